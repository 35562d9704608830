package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestQueueAfterTheStartIsArrivalOrderOnePlaceEachCappedPerAddress: once
// the sale started, places follow arrival, a second join keeps the first
// place, and an address holds at most the cap.
func TestQueueAfterTheStartIsArrivalOrderOnePlaceEachCappedPerAddress(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		ctx := t.Context()
		s := newStore(t)
		q := s.Queue()
		now := time.Now()
		sale := &seckill.Sale{ID: "qs", Name: "qs", Stock: 5, PurchaseLimit: 1, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
			Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1}}
		if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
			t.Fatal(err)
		}
		res, err := q.JoinBatch(ctx, sale, 2, []seckill.QueueJoin{{UserID: "a", IP: "1.1.1.1"}, {UserID: "b", IP: "2.2.2.2"}, {UserID: "a", IP: "1.1.1.1"}})
		if err != nil || res[0].Position != 1 || res[1].Position != 2 || res[2].Position != 1 {
			t.Fatalf("joins = %+v, %v; want a 1, b 2, a again 1", res, err)
		}
		// Each answer holds its place, as the database keeps it: the
		// arrival order after the start, the same place again for a.
		base := int64(seckill.QueueScoreBase)
		wantPlaces := []seckill.QueuePlace{{UserID: "a", Score: base + 1, IP: "1.1.1.1"}, {UserID: "b", Score: base + 2, IP: "2.2.2.2"}, {UserID: "a", Score: base + 1, IP: "1.1.1.1"}}
		for i, r := range res {
			if r.Place != wantPlaces[i] {
				t.Fatalf("join %d's place = %+v; want %+v", i, r.Place, wantPlaces[i])
			}
		}
		res, err = q.JoinBatch(ctx, sale, 2, []seckill.QueueJoin{{UserID: "c", IP: "1.1.1.1"}, {UserID: "d", IP: "1.1.1.1"}, {UserID: "e"}})
		if err != nil || res[0].Position != 3 || res[1].Refused != seckill.ERATELIMITED || res[2].Position != 4 {
			t.Fatalf("joins = %+v, %v; want c 3, d refused (1.1.1.1 holds 2), e 4", res, err)
		}
		if p, ok, err := q.Position(ctx, "qs", "b"); err != nil || !ok || p != 2 {
			t.Fatalf("Position(b) = %d, %v, %v", p, ok, err)
		}
		if _, ok, _ := q.Position(ctx, "qs", "d"); ok {
			t.Fatal("a refused buyer has a place")
		}
		if n, err := q.Length(ctx, "qs"); err != nil || n != 4 {
			t.Fatalf("Length = %d, %v; want 4", n, err)
		}
	})
}

// TestQueueRoomWaitsForTheSaleAndIsRestored: no place is given while the
// sale is not loaded or heals (the heal puts the database's places back
// first): the batch is refused try later and nothing is counted. A room
// restored from places has each place, the per-address counts and an
// arrival counter past every restored arrival, so the next arrival queues
// behind them; an early place keeps its random score.
func TestQueueRoomWaitsForTheSaleAndIsRestored(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		ctx := t.Context()
		s := newStore(t)
		q := s.Queue()
		now := time.Now()
		sale := &seckill.Sale{ID: "qr", Name: "qr", Stock: 5, PurchaseLimit: 1, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
			Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1}}
		join := func(user, ip string) seckill.QueueJoinResult {
			t.Helper()
			r, err := q.JoinBatch(ctx, sale, 2, []seckill.QueueJoin{{UserID: user, IP: ip}})
			if err != nil {
				t.Fatal(err)
			}
			return r[0]
		}
		if r := join("a", "1.1.1.1"); r.Refused != seckill.ETRYLATER {
			t.Fatalf("a join before the sale is loaded = %+v; want try_later", r)
		}
		if n, err := q.Length(ctx, sale.ID); err != nil || n != 0 {
			t.Fatalf("Length after a refusal = %d, %v; want 0", n, err)
		}
		if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Healer().BeginHeal(ctx, sale, "tok"); err != nil {
			t.Fatal(err)
		}
		if r := join("a", "1.1.1.1"); r.Refused != seckill.ETRYLATER {
			t.Fatalf("a join while the sale heals = %+v; want try_later", r)
		}
		base := int64(seckill.QueueScoreBase)
		room := []seckill.QueuePlace{
			{UserID: "early", Score: 12345, IP: "1.1.1.1"},
			{UserID: "x", Score: base + 1, IP: "1.1.1.1"},
			{UserID: "y", Score: base + 7},
		}
		if err := q.RestoreRoom(ctx, sale.ID, room); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Healer().ApplyHeal(ctx, sale, "tok", nil, nil); err != nil {
			t.Fatal(err)
		}
		places, err := q.Places(ctx, sale.ID)
		if err != nil || len(places) != 3 || places[0].UserID != "early" || places[0].Score != 12345 || places[2].Score != base+7 {
			t.Fatalf("Places after the restore = %+v, %v; want early, x, y with their scores", places, err)
		}
		if r := join("z", "1.1.1.1"); r.Refused != seckill.ERATELIMITED {
			t.Fatalf("a third place from 1.1.1.1 = %+v; want refused (it holds 2, restored)", r)
		}
		if r := join("z", "2.2.2.2"); r.Position != 4 || r.Place.Score != base+8 {
			t.Fatalf("the next arrival = %+v; want position 4, score 2^40 + 8 (behind every restored arrival)", r)
		}
		if r := join("x", "3.3.3.3"); r.Position != 2 || r.Place.Score != base+1 {
			t.Fatalf("x joining again = %+v; want her restored place 2", r)
		}
	})
}

// TestAdaptiveQueuePaceMovesOnAtTheRateLastSet: until a node moves it, an
// adaptive queue's pace is its starting rate from the start; a move counts
// the time since at the rate in force, then sets the next; the pace reads
// back as moved; before the start nothing is written. A sale not loaded,
// or healing, is not moved (try later); a heal puts a lost pace back as
// the database kept it, and leaves one still there.
func TestAdaptiveQueuePaceMovesOnAtTheRateLastSet(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		ctx := t.Context()
		s := newStore(t)
		q := s.Queue()
		now := time.Now()
		sale := &seckill.Sale{ID: "qp", Name: "qp", Stock: 5, PurchaseLimit: 1, StartAt: now.Add(-10 * time.Second), EndAt: now.Add(time.Hour),
			Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 2, Adaptive: &seckill.AdaptiveAdmission{MaxPerSecond: 50}}}
		if p, err := q.Pace(ctx, sale); err != nil || p != seckill.FixedQueuePace(sale) {
			t.Fatalf("Pace before any move = %+v, %v; want the starting rate from the start", p, err)
		}
		if _, err := q.AdvancePace(ctx, sale, 7); !errors.Is(err, ErrHealing) {
			t.Fatalf("a move of a sale not loaded = %v; want ErrHealing (the heal puts the kept pace back first)", err)
		}
		if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
			t.Fatal(err)
		}
		first, err := q.AdvancePace(ctx, sale, 7)
		// 10 s or more at 2 a second since position 1 at the start.
		if err != nil || first.Admitted < 21 || first.Rate != 7 || first.At.Before(sale.StartAt.Add(10*time.Second).Truncate(time.Millisecond)) {
			t.Fatalf("first move = %+v, %v; want 21 or more admitted, rate 7", first, err)
		}
		if p, err := q.Pace(ctx, sale); err != nil || p.Admitted != first.Admitted || !p.At.Equal(first.At) || p.Rate != 7 {
			t.Fatalf("Pace = %+v, %v; want %+v", p, err, first)
		}
		second, err := q.AdvancePace(ctx, sale, 3)
		elapsed := second.At.Sub(first.At).Seconds()
		if err != nil || second.Rate != 3 || second.Admitted < first.Admitted || second.Admitted-first.Admitted > 7*elapsed+0.001 {
			t.Fatalf("second move = %+v, %v after %+v; want the %.3f s between at 7 a second", second, err, first, elapsed)
		}

		later := &seckill.Sale{ID: "qp2", Name: "qp2", Stock: 5, PurchaseLimit: 1, StartAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour), Admission: sale.Admission}
		if _, err := s.StockStore().Preheat(ctx, later); err != nil {
			t.Fatal(err)
		}
		if p, err := q.AdvancePace(ctx, later, 9); err != nil || p != seckill.FixedQueuePace(later) {
			t.Fatalf("move before the start = %+v, %v; want the starting pace", p, err)
		}
		if n := exists(t, s, q.key("qp2", "queue_pace")); n != 0 {
			t.Fatalf("a move before the start wrote the pace")
		}
		if _, err := q.AdvancePace(ctx, sale, 0); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Fatalf("rate 0: %v; want invalid", err)
		}

		// A heal: the pace is not moved, and a lost one is put back as
		// the database kept it; one still there is left.
		if _, err := s.Healer().BeginHeal(ctx, sale, "tok"); err != nil {
			t.Fatal(err)
		}
		if _, err := q.AdvancePace(ctx, sale, 9); !errors.Is(err, ErrHealing) {
			t.Fatalf("a move while the sale heals = %v; want ErrHealing", err)
		}
		kept := seckill.QueuePace{Admitted: 1234.5, At: now.Truncate(time.Millisecond), Rate: 4}
		if err := q.RestorePace(ctx, sale.ID, kept); err != nil {
			t.Fatal(err)
		}
		if p, err := q.Pace(ctx, sale); err != nil || p.Admitted != second.Admitted || p.Rate != 3 {
			t.Fatalf("Pace after restoring over a pace still there = %+v, %v; want it left (%+v)", p, err, second)
		}
		if err := s.client.Do(ctx, s.client.B().Del().Key(q.key(sale.ID, "queue_pace")).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := q.RestorePace(ctx, sale.ID, kept); err != nil {
			t.Fatal(err)
		}
		if p, err := q.Pace(ctx, sale); err != nil || p.Admitted != kept.Admitted || !p.At.Equal(kept.At) || p.Rate != kept.Rate {
			t.Fatalf("Pace after restoring a lost one = %+v, %v; want %+v", p, err, kept)
		}
	})
}
