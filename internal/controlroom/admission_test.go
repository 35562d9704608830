package controlroom

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/web"
)

func TestWaitingListIsTheDrawOrderLessEveryoneWithAUnit(t *testing.T) {
	e := func(id, user string) seckill.LotteryEntry { return seckill.LotteryEntry{ID: id, UserID: user, Qty: 1} }
	order := []seckill.LotteryEntry{e("e1", "a"), e("e2", "b"), e("e3", "c"), e("e4", "d"), e("e5", "e")}
	for _, tc := range []struct {
		name         string
		drawWinners  []string
		won          map[string]string
		wantWaiting  []string
		wantPromoted int64
	}{
		{"just drawn", []string{"e1", "e2"}, map[string]string{"a": "r1", "b": "r2"}, []string{"e3", "e4", "e5"}, 0},
		{"the first of the waiting list got a unit back", []string{"e1", "e2"}, map[string]string{"a": "r1", "b": "r2", "c": "r3"}, []string{"e4", "e5"}, 1},
		{"nobody won", nil, map[string]string{}, []string{"e1", "e2", "e3", "e4", "e5"}, 0},
	} {
		waiting, promoted := waitingList(order, tc.drawWinners, tc.won)
		var ids []string
		for _, w := range waiting {
			ids = append(ids, w.ID)
		}
		if !slices.Equal(ids, tc.wantWaiting) || promoted != tc.wantPromoted {
			t.Errorf("%s: waiting %v, promoted %d; want %v, %d", tc.name, ids, promoted, tc.wantWaiting, tc.wantPromoted)
		}
	}
}

type fakeLottery struct {
	entries []seckill.LotteryEntry
	won     map[string]string
	reads   int // of Entries
}

func (f *fakeLottery) EntrantCount(context.Context, string) (int64, error) {
	return int64(len(f.entries)), nil
}
func (f *fakeLottery) Entries(context.Context, string) ([]seckill.LotteryEntry, error) {
	f.reads++
	return f.entries, nil
}
func (f *fakeLottery) AllWon(context.Context, string) (map[string]string, error) { return f.won, nil }

type fakeDraws struct{ rec seckill.DrawRecord }

func (f *fakeDraws) EnsureDraw(context.Context, string) (seckill.DrawRecord, error) {
	return f.rec, nil
}

type fakeQueue struct{ n int64 }

func (f fakeQueue) Length(context.Context, string) (int64, error) { return f.n, nil }

// TestAdmissionOfALottery: the commitment before the draw, the seed, the
// winners and the waiting list (in draw order) after it; the draw order
// is computed once.
func TestAdmissionOfALottery(t *testing.T) {
	seed, entries := seckill.NewDrawSeed(), lotteryEntries(30)
	order := seckill.DrawOrder(seed, entries)
	l := &fakeLottery{entries: entries, won: map[string]string{}}
	d := &fakeDraws{rec: seckill.DrawRecord{SaleID: "lot", Seed: seed}}
	now := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	r := New(Config{Gatherer: prometheus.NewRegistry(), Lottery: l, Draws: d, Now: func() time.Time { return now }})
	sale := &seckill.Sale{ID: "lot", Admission: seckill.Admission{Mode: seckill.AdmitLottery}}

	a, err := r.Admission(t.Context(), sale)
	if err != nil {
		t.Fatal(err)
	}
	if a.Entrants != 30 || a.Commitment != seckill.DrawCommitment(seed) || a.Seed != "" || a.Winners != web.NA {
		t.Fatalf("before the draw: %+v; want 30 entrants, the commitment, no seed, no winners", a)
	}

	d.rec.DrawnAt, d.rec.Entrants, d.rec.Stock = time.Now(), 30, 3
	for _, e := range order[:3] {
		d.rec.Winners = append(d.rec.Winners, e.ID)
		l.won[e.UserID] = "r-" + e.UserID
	}
	l.won[order[3].UserID] = "r-late" // a unit came back to the first of the waiting list
	if a, _ := r.Admission(t.Context(), sale); a.Seed != "" {
		t.Fatalf("read again within %s: %+v; want the kept reading", snapshotTTL, a)
	}
	now = now.Add(snapshotTTL)
	for range 2 {
		a, err = r.Admission(t.Context(), sale)
		if err != nil {
			t.Fatal(err)
		}
	}
	if a.Seed != seed || a.Winners != 3 || !slices.Equal(a.WinnerIDs, d.rec.Winners) || a.Promoted != 1 || a.Waiting != 26 {
		t.Fatalf("after the draw: %+v", a)
	}
	var next []string
	for _, e := range order[4 : 4+maxListed] {
		next = append(next, e.ID)
	}
	if !slices.Equal(a.NextWaiting, next) {
		t.Errorf("next on the waiting list %v, want %v", a.NextWaiting, next)
	}
	for range 3 {
		now = now.Add(snapshotTTL)
		if _, err := r.Admission(t.Context(), sale); err != nil {
			t.Fatal(err)
		}
	}
	if l.reads != 1 {
		t.Errorf("the entries were read %d times for one draw order", l.reads)
	}
}

func TestAdmissionOfAQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	issued := prometheus.NewCounter(prometheus.CounterOpts{Name: "seckill_queue_tickets_issued_total", Help: "h"})
	reg.MustRegister(issued)
	issued.Add(7)
	start := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	now := start.Add(2 * time.Second)
	r := New(Config{Gatherer: reg, Queue: fakeQueue{n: 100}, Now: func() time.Time { return now }})
	sale := &seckill.Sale{ID: "q", StartAt: start, Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 5}}
	a, err := r.Admission(t.Context(), sale)
	if err != nil {
		t.Fatal(err)
	}
	if a.QueueLength != 100 || a.Admitted != 11 || a.TicketsIssued != 7 || !a.TicketsNodeWide {
		t.Errorf("queue: %+v; want 100 long, 11 admitted (5/s for 2 s, the first at the start), 7 tickets", a)
	}
	r = New(Config{Gatherer: reg, Queue: fakeQueue{n: 4}, Now: func() time.Time { return now }})
	if a, _ := r.Admission(t.Context(), sale); a.Admitted != 4 {
		t.Errorf("admitted %d of a queue of 4", a.Admitted)
	}
	// An adaptive queue: the admitted and the rate are the shared pace's.
	adaptive := func(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error) {
		return seckill.QueuePace{Start: start, Admitted: 50, At: now.Add(-time.Second), Rate: 20}, nil
	}
	r = New(Config{Gatherer: reg, Queue: fakeQueue{n: 100}, Pace: adaptive, Now: func() time.Time { return now }})
	if a, _ := r.Admission(t.Context(), sale); a.Admitted != 70 || a.AdmitRate != 20 {
		t.Errorf("adaptive queue: admitted %d at %d/s; want 70 (50, then 20 for 1 s) at 20/s", a.Admitted, a.AdmitRate)
	}
}

// fakeArchive is the database's copy of a lottery's entries.
type fakeArchive struct {
	entries []seckill.LotteryEntry
	won     map[string]string
	reads   int // of any kind
}

func (f *fakeArchive) EntryCounts(context.Context, string) (int64, int64, error) {
	f.reads++
	return int64(len(f.entries)), int64(len(f.won)), nil
}
func (f *fakeArchive) KeptEntries(context.Context, string) ([]seckill.LotteryEntry, error) {
	f.reads++
	return f.entries, nil
}
func (f *fakeArchive) KeptWon(context.Context, string) (map[string]string, error) {
	f.reads++
	return f.won, nil
}

// TestAdmissionOfAnArchivedLottery: an ended lottery whose Redis keys the
// archiver has dropped shows its entrants, winners and waiting list from
// the database's copy, on a node that saw it in Redis and on one that did
// not; a lottery not ended that Redis has no entrants of has none, and
// the copy is not read.
func TestAdmissionOfAnArchivedLottery(t *testing.T) {
	seed, entries := seckill.NewDrawSeed(), lotteryEntries(20)
	order := seckill.DrawOrder(seed, entries)
	rec := seckill.DrawRecord{SaleID: "lot", Seed: seed, DrawnAt: time.Now(), Entrants: 20, Stock: 2}
	won := map[string]string{}
	for _, e := range order[:2] {
		rec.Winners = append(rec.Winners, e.ID)
		won[e.UserID] = "r-" + e.UserID
	}
	won[order[2].UserID] = "r-late" // the waiting list's first, promoted before the end
	var next []string
	for _, e := range order[3 : 3+maxListed] {
		next = append(next, e.ID)
	}
	end := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	now := end.Add(-time.Minute)
	sale := &seckill.Sale{ID: "lot", EndAt: end, Admission: seckill.Admission{Mode: seckill.AdmitLottery}}
	redis, db := &fakeLottery{entries: entries, won: won}, &fakeArchive{}
	room := func() *Room {
		return New(Config{Gatherer: prometheus.NewRegistry(), Lottery: redis, Draws: &fakeDraws{rec: rec}, Archive: db, Now: func() time.Time { return now }})
	}
	want := func(r *Room, what string, entrants, promoted, waiting int64, next []string) {
		t.Helper()
		a, err := r.Admission(t.Context(), sale)
		if err != nil {
			t.Fatal(err)
		}
		if a.Entrants != entrants || a.Promoted != promoted || a.Waiting != waiting || !slices.Equal(a.NextWaiting, next) {
			t.Fatalf("%s: %+v; want %d entrants, %d promoted, %d waiting from %v", what, a, entrants, promoted, waiting, next)
		}
	}
	seen := room()
	want(seen, "in Redis", 20, 1, 17, next)

	// The archiver copies the entries, then drops the keys.
	db.entries, db.won = entries, won
	redis.entries, redis.won = nil, map[string]string{}
	want(room(), "not ended, Redis empty", 0, 0, 0, nil)
	if db.reads != 0 {
		t.Fatalf("%d reads of the copy of a lottery not ended; want none", db.reads)
	}
	now = end.Add(time.Hour)
	want(seen, "archived, on the node that saw it in Redis", 20, 1, 17, next)
	want(room(), "archived, on a node that did not", 20, 1, 17, next)
}

// keysDroppedMidRead counts a lottery's entrants in Redis once, then its
// keys go before the entries are read.
type keysDroppedMidRead struct {
	*fakeLottery
	counted bool
}

func (k *keysDroppedMidRead) EntrantCount(ctx context.Context, saleID string) (int64, error) {
	if !k.counted {
		k.counted = true
		return 20, nil
	}
	return k.fakeLottery.EntrantCount(ctx, saleID)
}

// TestDrawOrderOfNoEntriesIsNotKept: the keys of an archived lottery gone
// between the entrant count and the entries read leave an empty draw
// order, which is not kept: the next snapshot reads the copy's.
func TestDrawOrderOfNoEntriesIsNotKept(t *testing.T) {
	seed, entries := seckill.NewDrawSeed(), lotteryEntries(20)
	order := seckill.DrawOrder(seed, entries)
	rec := seckill.DrawRecord{SaleID: "lot", Seed: seed, DrawnAt: time.Now(), Entrants: 20, Stock: 1, Winners: []string{order[0].ID}}
	won := map[string]string{order[0].UserID: "r-0"}
	end := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	now := end.Add(time.Hour)
	sale := &seckill.Sale{ID: "lot", EndAt: end, Admission: seckill.Admission{Mode: seckill.AdmitLottery}}
	r := New(Config{Gatherer: prometheus.NewRegistry(), Lottery: &keysDroppedMidRead{fakeLottery: &fakeLottery{won: map[string]string{}}},
		Draws: &fakeDraws{rec: rec}, Archive: &fakeArchive{entries: entries, won: won}, Now: func() time.Time { return now }})
	if _, err := r.Admission(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	now = now.Add(snapshotTTL)
	a, err := r.Admission(t.Context(), sale)
	if err != nil {
		t.Fatal(err)
	}
	if a.Entrants != 20 || a.Waiting != 19 || len(a.NextWaiting) != maxListed || a.NextWaiting[0] != order[1].ID {
		t.Fatalf("after the keys went mid-read: %+v; want 20 entrants, 19 waiting from %s", a, order[1].ID)
	}
}

// lotteryEntries are n entries of one unit, of buyers u0, u1, ….
func lotteryEntries(n int) []seckill.LotteryEntry {
	entries := make([]seckill.LotteryEntry, n)
	for i := range entries {
		entries[i] = seckill.LotteryEntry{ID: seckill.NewEntryID(), UserID: fmt.Sprintf("u%d", i), Qty: 1}
	}
	return entries
}
