package redis

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func lotterySale(id string, start, closeAt time.Time) *seckill.Sale {
	return &seckill.Sale{ID: id, Name: id, Stock: 2, PurchaseLimit: 2, StartAt: start, EndAt: start.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: closeAt}}
}

// TestLotteryOneEntryPerBuyerAndNoFirstComeClaims: a buyer's second entry,
// in the same batch or a later one, answers their first; a lottery sale
// refuses every first come claim, and takes the claims its admission let
// in; entries stop when the draw closes them, or at close.
func TestLotteryOneEntryPerBuyerAndNoFirstComeClaims(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		ctx := t.Context()
		s := newStore(t)
		l := s.Lottery()
		now := time.Now()
		sale := lotterySale("lot", now.Add(-time.Minute), now.Add(time.Hour/2))
		if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
			t.Fatal(err)
		}
		a1, a2, b := seckill.NewEntryID(), seckill.NewEntryID(), seckill.NewEntryID()
		res, err := l.EnterBatch(ctx, sale, []seckill.EntryRequest{er(a1, "alice", 1), er(a2, "alice", 2), er(b, "bob", 2)})
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].New || res[0].Entry.ID != a1 || res[1].New || res[1].Entry.ID != a1 || res[1].Entry.Qty != 1 || !res[2].New || res[2].Entry.ID != b {
			t.Fatalf("results = %+v; want alice's first entry twice, bob's", res)
		}
		again, err := l.EnterBatch(ctx, sale, []seckill.EntryRequest{er(seckill.NewEntryID(), "bob", 1)})
		if err != nil || again[0].New || again[0].Entry.ID != b || again[0].Entry.Qty != 2 {
			t.Fatalf("bob's second entry = %+v, %v; want his first", again, err)
		}
		if e, ok, err := l.Entry(ctx, "lot", "alice"); err != nil || !ok || e.ID != a1 {
			t.Fatalf("Entry(alice) = %+v, %v, %v", e, ok, err)
		}
		if _, ok, err := l.Entry(ctx, "lot", "carol"); err != nil || ok {
			t.Fatalf("Entry(carol) = %v, %v; want none", ok, err)
		}
		if n, err := l.EntrantCount(ctx, "lot"); err != nil || n != 2 {
			t.Fatalf("EntrantCount = %d, %v; want 2 (alice and bob, once each)", n, err)
		}
		if n, err := l.EntrantCount(ctx, "nobody-entered"); err != nil || n != 0 {
			t.Fatalf("EntrantCount of a sale without entries = %d, %v; want 0", n, err)
		}

		claim := func(user string) seckill.ReserveRequest {
			return seckill.ReserveRequest{ReservationID: seckill.NewReservationID("lot", time.Now()), UserID: user, Qty: 1}
		}
		got, err := s.StockStore().Reserve(ctx, "lot", []seckill.ReserveRequest{claim("carol")})
		if err != nil || got[0].Outcome != seckill.OutcomeAdmissionRequired {
			t.Fatalf("first come claim on a lottery = %+v, %v; want admission_required", got, err)
		}
		got, err = s.StockStore().ReserveAdmitted(ctx, "lot", []seckill.ReserveRequest{claim("alice")})
		if err != nil || got[0].Outcome != seckill.OutcomeReserved {
			t.Fatalf("admitted claim = %+v, %v; want reserved", got, err)
		}

		if err := l.CloseEntries(ctx, "lot"); err != nil {
			t.Fatal(err)
		}
		late, err := l.EnterBatch(ctx, sale, []seckill.EntryRequest{er(seckill.NewEntryID(), "carol", 1)})
		if err != nil || late[0].Refused != seckill.EENDED {
			t.Fatalf("entry after close = %+v, %v; want ended", late, err)
		}
		all, err := l.Entries(ctx, "lot")
		if err != nil || len(all) != 2 {
			t.Fatalf("Entries = %+v, %v; want alice's and bob's", all, err)
		}

		early := lotterySale("early", now.Add(time.Minute), now.Add(time.Hour/2))
		if r, err := l.EnterBatch(ctx, early, []seckill.EntryRequest{er(seckill.NewEntryID(), "alice", 1)}); err != nil || r[0].Refused != seckill.ENOTSTARTED {
			t.Fatalf("entry before the start = %+v, %v", r, err)
		}
		closed := lotterySale("closed", now.Add(-time.Hour/2), now.Add(-time.Second))
		if r, err := l.EnterBatch(ctx, closed, []seckill.EntryRequest{er(seckill.NewEntryID(), "alice", 1)}); err != nil || r[0].Refused != seckill.EENDED {
			t.Fatalf("entry after entries_close_at = %+v, %v", r, err)
		}

		if err := l.RecordWon(ctx, "lot", map[string]string{"alice": "r1"}); err != nil {
			t.Fatal(err)
		}
		if id, ok, err := l.Won(ctx, "lot", "alice"); err != nil || !ok || id != "r1" {
			t.Fatalf("Won(alice) = %q, %v, %v", id, ok, err)
		}
		if _, ok, _ := l.Won(ctx, "lot", "bob"); ok {
			t.Fatal("bob won without a draw")
		}
		if n, w, err := l.EntryCounts(ctx, "lot"); err != nil || n != 2 || w != 1 {
			t.Fatalf("EntryCounts = %d, %d, %v; want 2 entries, 1 won", n, w, err)
		}
		if n, w, err := l.EntryCounts(ctx, "nobody-entered"); err != nil || n != 0 || w != 0 {
			t.Fatalf("EntryCounts of a sale without entries = %d, %d, %v; want 0, 0", n, w, err)
		}
	})
}

// TestLotteryEntriesWaitForTheSaleToBeLoaded: no entry is taken while the
// sale's stock hash is missing (not preheated, or lost with the rest of
// Redis) or the sale heals, since the heal puts back the entries the
// database keeps: such a batch is refused "try later", rate checks and
// all, and records nothing. PutEntries sets the database's entries over
// whatever the store holds. Readiness agrees with the script at each step.
func TestLotteryEntriesWaitForTheSaleToBeLoaded(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		ctx := t.Context()
		s := newStore(t)
		l := s.Lottery()
		now := time.Now()
		sale := lotterySale("wait", now.Add(-time.Minute), now.Add(time.Hour/2))
		enter := func(user string) seckill.EntryResult {
			t.Helper()
			r, err := l.EnterBatch(ctx, sale, []seckill.EntryRequest{er(seckill.NewEntryID(), user, 1)})
			if err != nil {
				t.Fatal(err)
			}
			return r[0]
		}
		ready := func(step string, want bool) {
			t.Helper()
			if got, err := s.Readiness().SaleReady(ctx, sale.ID); err != nil || got != want {
				t.Fatalf("SaleReady %s = %v, %v; want %v", step, got, err, want)
			}
		}
		ready("before the preheat", false)
		if r := enter("ann"); r.Refused != seckill.ETRYLATER {
			t.Fatalf("entry into a sale not loaded = %+v; want try_later", r)
		}
		if n, err := l.EntrantCount(ctx, sale.ID); err != nil || n != 0 {
			t.Fatalf("EntrantCount after a refusal = %d, %v; want 0", n, err)
		}
		if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
			t.Fatal(err)
		}
		ready("once preheated", true)
		bob := enter("bob")
		if !bob.New {
			t.Fatalf("entry into a loaded sale = %+v; want new", bob)
		}
		if _, err := s.Healer().BeginHeal(ctx, sale, "tok"); err != nil {
			t.Fatal(err)
		}
		ready("while the sale heals", false)
		if r := enter("cat"); r.Refused != seckill.ETRYLATER {
			t.Fatalf("entry while the sale heals = %+v; want try_later", r)
		}
		kept := []seckill.LotteryEntry{{ID: seckill.NewEntryID(), UserID: "bob", Qty: 2}, {ID: seckill.NewEntryID(), UserID: "dan", Qty: 1}}
		if err := l.PutEntries(ctx, sale.ID, kept); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Healer().ApplyHeal(ctx, sale, "tok", nil, nil); err != nil {
			t.Fatal(err)
		}
		ready("after the heal", true)
		for _, want := range kept {
			if r := enter(want.UserID); r.Refused != "" || r.New || r.Entry != want {
				t.Fatalf("entry of %s after the heal = %+v; want the database's %+v", want.UserID, r, want)
			}
		}
		if r := enter("cat"); !r.New {
			t.Fatalf("a new entry after the heal = %+v; want new", r)
		}
	})
}

// TestFirstComeSaleIgnoresTheAdmittedMark: a first come sale decides an
// admitted batch as any other.
func TestFirstComeSaleIgnoresTheAdmittedMark(t *testing.T) {
	s, err := StartEmbedded(t.Context(), WithKeyPrefix(servicetest.UniqueName("t")))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	sale := &seckill.Sale{ID: "fc", Name: "fc", Stock: 1, PurchaseLimit: 1, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour)}
	if _, err := s.StockStore().Preheat(t.Context(), sale); err != nil {
		t.Fatal(err)
	}
	for i, want := range []seckill.Outcome{seckill.OutcomeReserved, seckill.OutcomeSoldOut} {
		got, err := s.StockStore().ReserveAdmitted(t.Context(), "fc", []seckill.ReserveRequest{{ReservationID: seckill.NewReservationID("fc", now), UserID: "u" + string(rune('a'+i)), Qty: 1}})
		if err != nil || got[0].Outcome != want {
			t.Fatalf("claim %d = %+v, %v; want %s", i, got, err, want)
		}
	}
}

func er(id, user string, qty int64) seckill.EntryRequest {
	return seckill.EntryRequest{EntryID: id, UserID: user, Qty: qty}
}
