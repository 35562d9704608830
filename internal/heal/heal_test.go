package heal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// fakeDB is the database side: a sale row and its ledger.
type fakeDB struct {
	mu     sync.Mutex
	sale   seckill.Sale
	orders []*seckill.Order
	failed []*seckill.FailedOrder
}

func (f *fakeDB) Sale(context.Context, string) (*seckill.Sale, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sale
	s.Unsold = s.Stock
	for _, o := range f.orders {
		if o.Status != seckill.OrderCancelled {
			s.Unsold -= o.Qty
		}
	}
	return &s, nil
}

// The pages are of 2 rows, so that a heal of a few orders takes several.
const fakePage = 2

func (f *fakeDB) OrdersAfter(_ context.Context, _, after string, limit int) ([]*seckill.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return servicetest.PageAfter(f.orders, func(o *seckill.Order) string { return o.ReservationID }, after, min(limit, fakePage)), nil
}

func (f *fakeDB) FailedOrdersAfter(_ context.Context, _, after string, limit int) ([]*seckill.FailedOrder, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return servicetest.PageAfter(f.failed, func(o *seckill.FailedOrder) string { return o.ReservationID }, after, min(limit, fakePage)), nil
}

// reserveOne reserves one unit of sale for user, alone in a batch.
func reserveOne(ctx context.Context, stock *redis.Store, saleID, user string) (seckill.ReserveResult, error) {
	res, err := stock.StockStore().Reserve(ctx, saleID, []seckill.ReserveRequest{{ReservationID: seckill.NewReservationID(saleID, time.Now()), UserID: user, Qty: 1}})
	if err != nil {
		return seckill.ReserveResult{}, err
	}
	return res[0], nil
}

type loaded []*seckill.Sale

func (l loaded) Loaded() []*seckill.Sale { return l }

// TestHeal: a Redis rolled back (records, reserved, buyers and the reserve
// sequence lost) or emptied is noticed and rebuilt from the database:
// orders get their records and buyers their limit back, claims the
// database refused give their units back, claims are refused while it
// heals, and each heal is alerted.
func TestHeal(t *testing.T) {
	ctx := context.Background()
	stock, raw := storetest.Stock(t)
	do := func(args ...string) {
		t.Helper()
		if err := raw.Do(ctx, raw.B().Arbitrary(args[0]).Args(args[1:]...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}

	sale := &seckill.Sale{ID: servicetest.UniqueName("heal_"), Name: "tea", Stock: 10, PurchaseLimit: 1,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	db := &fakeDB{sale: *sale}
	var logs bytes.Buffer
	var mu sync.Mutex
	var heals []string
	w := New(stock.Healer(), db, loaded{sale}, Config{
		Settle: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnHeal: func(_, reason string, _, _ int) { mu.Lock(); heals = append(heals, reason); mu.Unlock() },
	})

	reserve := func(user string) (seckill.ReserveResult, error) { return reserveOne(ctx, stock, sale.ID, user) }
	ids := map[string]string{}
	for _, u := range []string{"u1", "u2", "u3", "u4", "u5"} {
		r, err := reserve(u)
		if err != nil || r.Outcome != seckill.OutcomeReserved {
			t.Fatalf("reserve %s: %+v, %v", u, r, err)
		}
		ids[u] = r.ReservationID
		db.orders = append(db.orders, &seckill.Order{ReservationID: r.ReservationID, UserID: u, Qty: 1, Status: seckill.OrderPlaced, ReservedAt: time.Now()})
	}
	w.Tick(ctx)
	if len(heals) != 0 {
		t.Fatalf("healthy sale healed: %v", heals)
	}

	// Power loss: the last two claims are gone from Redis, not from the
	// database.
	keys := "sk:{" + sale.ID + "}:"
	do("HSET", keys+"stock", "reserved", "3", "seq", "3")
	// (A record's field is its id's last 26 characters: the key names the sale.)
	field := func(id string) string { return id[strings.LastIndexByte(id, '.')+1:] }
	do("HDEL", keys+"res", field(ids["u4"]), field(ids["u5"]))
	do("HDEL", keys+"buyers", "u4", "u5")
	// Redis sells u4 a unit again; the database refuses it (over limit).
	again, err := reserve("u4")
	if err != nil || again.Outcome != seckill.OutcomeReserved {
		t.Fatalf("reserve after the loss: %+v, %v", again, err)
	}
	db.failed = append(db.failed, &seckill.FailedOrder{ReservationID: again.ReservationID, UserID: "u4", Qty: 1, Reason: seckill.ReasonOverLimit + ": holds 1 of 1"})

	w.Tick(ctx)
	if len(heals) != 1 || !strings.Contains(logs.String(), "ALERT") {
		t.Fatalf("heals %q, log %q; want one heal, alerted", heals, logs.String())
	}
	lvl, err := stock.StockStore().Stock(ctx, sale.ID)
	if err != nil || lvl.Reserved != 5 || lvl.Heals != 1 {
		t.Errorf("after the heal: %+v, %v; want reserved 5 (the database's), 1 heal", lvl, err)
	}
	for _, u := range []string{"u4", "u5"} {
		if r, err := reserve(u); err != nil || r.Outcome != seckill.OutcomeLimitExceeded {
			t.Errorf("%s after the heal: %+v, %v; want limit_exceeded (the database has their order)", u, r, err)
		}
		if _, _, st, err := stock.StockStore().Reservation(ctx, ids[u]); err != nil || st != redis.StatusActive {
			t.Errorf("%s's record after the heal: %q, %v; want active", u, st, err)
		}
	}
	if _, _, st, err := stock.StockStore().Reservation(ctx, again.ReservationID); err != nil || st != "restored" {
		t.Errorf("refused claim's record after the heal: %q, %v; want restored", st, err)
	}

	// While a sale heals, claims are refused with try_later.
	if _, err := stock.Healer().BeginHeal(ctx, sale, "1:x"); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve("u9"); !errors.Is(err, redis.ErrHealing) || seckill.ErrorCode(err) != seckill.ETRYLATER {
		t.Errorf("reserve while healing: %v; want ErrHealing (try_later)", err)
	}
	if err := stock.Healer().AbortHeal(ctx, sale.ID, "1:x"); err != nil {
		t.Fatal(err)
	}

	// Every key gone (a restart with no AOF): rebuilt from the database.
	do("DEL", keys+"stock", keys+"res", keys+"buyers", keys+"idem")
	w.Tick(ctx)
	if lvl, err := stock.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 5 || lvl.Total != 10 {
		t.Errorf("after vanished keys: %+v, %v; want total 10, reserved 5", lvl, err)
	}
	if r, err := reserve("u1"); err != nil || r.Outcome != seckill.OutcomeLimitExceeded {
		t.Errorf("u1 after vanished keys: %+v, %v; want limit_exceeded", r, err)
	}
	if r, err := reserve("u6"); err != nil || r.Outcome != seckill.OutcomeReserved {
		t.Errorf("a new buyer after the heals: %+v, %v; want reserved", r, err)
	}
	if len(heals) != 2 {
		t.Errorf("heals %q; want 2", heals)
	}

	// Stop is safe twice, and without Start.
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	w2 := New(stock.Healer(), db, loaded{sale}, Config{})
	w2.Start(ctx)
	for range 2 {
		if err := w2.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHealAPreheatedSaleThatVanishedUnseen: Redis lost a sale the
// preheat scheduler had loaded before the watcher's first look at it, and
// nothing of it is sold (no claim yet, or every order cancelled). The
// watcher has no earlier look to compare with and the database no sold
// units, but the scheduler's list says the stock store held the sale: it
// is healed, not left answering not_started until its end.
func TestHealAPreheatedSaleThatVanishedUnseen(t *testing.T) {
	ctx := context.Background()
	stock, raw := storetest.Stock(t)
	sale := &seckill.Sale{ID: servicetest.UniqueName("heal_"), Name: "tea", Stock: 10, PurchaseLimit: 1,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	keys := "sk:{" + sale.ID + "}:"
	if err := raw.Do(ctx, raw.B().Del().Key(keys+"stock", keys+"res", keys+"buyers", keys+"idem").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	tickHealsOnce(t, stock, &fakeDB{sale: *sale}, sale)
	if lvl, err := stock.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Total != 10 || lvl.Reserved != 0 {
		t.Errorf("after the heal: %+v, %v; want total 10, reserved 0", lvl, err)
	}
	if r, err := reserveOne(ctx, stock, sale.ID, "u1"); err != nil || r.Outcome != seckill.OutcomeReserved {
		t.Errorf("a claim after the heal: %+v, %v; want reserved", r, err)
	}
}

// TestHealASaleLoadedHeld: a node preheats a live sale that Redis lost
// with nobody there to see it go (its row counts 3 units sold): the
// loader loads it held (redis.Loader), and the watcher's next tick
// rebuilds it from the database before it takes a claim, instead of the
// fresh load selling the 3 units again.
func TestHealASaleLoadedHeld(t *testing.T) {
	ctx := context.Background()
	stock, _ := storetest.Stock(t)
	sale := &seckill.Sale{ID: servicetest.UniqueName("heal_"), Name: "tea", Stock: 10, Unsold: 7, PurchaseLimit: 1,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
	db := &fakeDB{sale: *sale}
	for _, u := range []string{"u1", "u2", "u3"} {
		db.orders = append(db.orders, &seckill.Order{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: u, Qty: 1,
			Status: seckill.OrderPlaced, ReservedAt: time.Now()})
	}
	if created, err := stock.Loader(nil).Preheat(ctx, sale); err != nil || !created {
		t.Fatalf("Loader.Preheat = %v, %v; want created", created, err)
	}
	if _, err := reserveOne(ctx, stock, sale.ID, "u9"); !errors.Is(err, redis.ErrHealing) {
		t.Fatalf("a claim before the heal: %v; want ErrHealing", err)
	}
	tickHealsOnce(t, stock, db, sale)
	if lvl, err := stock.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Total != 10 || lvl.Reserved != 3 {
		t.Errorf("after the heal: %+v, %v; want total 10, reserved 3 (the database's)", lvl, err)
	}
	if r, err := reserveOne(ctx, stock, sale.ID, "u1"); err != nil || r.Outcome != seckill.OutcomeLimitExceeded {
		t.Errorf("u1 after the heal: %+v, %v; want limit_exceeded (the database has her order)", r, err)
	}
	if r, err := reserveOne(ctx, stock, sale.ID, "u9"); err != nil || r.Outcome != seckill.OutcomeReserved {
		t.Errorf("a new buyer after the heal: %+v, %v; want reserved", r, err)
	}
}

// tickHealsOnce runs one tick of a new watcher of sale on db and fails
// the test unless it healed the sale once.
func tickHealsOnce(t *testing.T, stock *redis.Store, db *fakeDB, sale *seckill.Sale) {
	t.Helper()
	var heals []string
	w := New(stock.Healer(), db, loaded{sale}, Config{
		Settle: 10 * time.Millisecond,
		OnHeal: func(_, reason string, _, _ int) { heals = append(heals, reason) },
	})
	w.Tick(context.Background())
	if len(heals) != 1 {
		t.Fatalf("heals %q; want one", heals)
	}
}

// TestHealRebuildsTheRestWhileTheSaleHolds: Config.Rebuild (a lottery's
// entries, in the engine) runs once a heal, while the sale still refuses
// claims. A Rebuild that fails leaves the sale held (what it puts back is
// not there yet), until the heal is stale and the next tick heals again,
// calling it again.
func TestHealRebuildsTheRestWhileTheSaleHolds(t *testing.T) {
	ctx := context.Background()
	stock, raw := storetest.Stock(t)
	sale := &seckill.Sale{ID: servicetest.UniqueName("heal_"), Name: "tea", Stock: 10, PurchaseLimit: 1,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	var calls int
	var failWith error
	var heals []string
	clock := time.Now()
	const settle = 10 * time.Millisecond
	w := New(stock.Healer(), &fakeDB{sale: *sale}, loaded{sale}, Config{
		Settle: settle,
		Now:    func() time.Time { return clock },
		OnHeal: func(_, reason string, _, _ int) { heals = append(heals, reason) },
		Rebuild: func(ctx context.Context, s *seckill.Sale) error {
			calls++
			if s.ID != sale.ID {
				t.Errorf("Rebuild of %s; want %s", s.ID, sale.ID)
			}
			if _, err := reserveOne(ctx, stock, sale.ID, "early"); !errors.Is(err, redis.ErrHealing) {
				t.Errorf("a claim during Rebuild: %v; want ErrHealing", err)
			}
			return failWith
		},
	})
	w.Tick(ctx) // sees the sale loaded
	keys := "sk:{" + sale.ID + "}:"
	if err := raw.Do(ctx, raw.B().Del().Key(keys+"stock", keys+"res", keys+"buyers", keys+"idem").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	failWith = errors.New("database down")
	w.Tick(ctx)
	if calls != 1 || len(heals) != 0 {
		t.Fatalf("after a tick whose Rebuild failed: %d calls, heals %q; want 1 call, no heal", calls, heals)
	}
	if _, err := reserveOne(ctx, stock, sale.ID, "u1"); !errors.Is(err, redis.ErrHealing) {
		t.Fatalf("a claim after the failed Rebuild: %v; want ErrHealing (held)", err)
	}
	failWith = nil
	w.Tick(ctx)
	if calls != 1 || len(heals) != 0 {
		t.Fatalf("a tick while the failed heal is fresh: %d calls, heals %q; want it left alone", calls, heals)
	}
	clock = clock.Add(settle + staleHeal + time.Second)
	w.Tick(ctx)
	if calls != 2 || len(heals) != 1 {
		t.Fatalf("a tick once the failed heal is stale: %d calls, heals %q; want 2 calls, one heal", calls, heals)
	}
	if r, err := reserveOne(ctx, stock, sale.ID, "u1"); err != nil || r.Outcome != seckill.OutcomeReserved {
		t.Errorf("a claim after the heal: %+v, %v; want reserved", r, err)
	}
}

// failingLedger is a database whose ledger cannot be read.
type failingLedger struct{ *fakeDB }

func (failingLedger) OrdersAfter(context.Context, string, string, int) ([]*seckill.Order, error) {
	return nil, errors.New("database down")
}

// TestHold: a stock store that starts empty (the embedded one after a
// SIGKILL) refuses the held sales' claims until the first tick healed
// them from the database, even a sale no preheat listed; an ended sale is
// not held; a heal that fails lets claims in again.
func TestHold(t *testing.T) {
	ctx := context.Background()
	stock, err := redis.StartEmbedded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stock.Close()
	now := time.Now()
	sale := &seckill.Sale{ID: "hold_live", Name: "tea", Stock: 10, PurchaseLimit: 1, StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
	ended := &seckill.Sale{ID: "hold_ended", Name: "tea", Stock: 10, PurchaseLimit: 1, StartAt: now.Add(-2 * time.Hour), EndAt: now.Add(-time.Hour)}
	db := &fakeDB{sale: *sale}
	for _, u := range []string{"u1", "u2", "u3"} {
		db.orders = append(db.orders, &seckill.Order{ReservationID: seckill.NewReservationID(sale.ID, now), UserID: u, Qty: 1, Status: seckill.OrderPlaced, ReservedAt: now})
	}
	var logs bytes.Buffer
	heals := 0
	cfg := Config{Settle: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnHeal: func(string, string, int, int) { heals++ }}
	w := New(stock.Healer(), db, loaded{}, cfg) // not preheated: Loaded lists nothing
	held, err := w.Hold(ctx, []*seckill.Sale{sale, ended})
	if err != nil || held != 1 {
		t.Fatalf("Hold: %d, %v; want 1 (the live sale only)", held, err)
	}
	reserve := func(user string) (seckill.ReserveResult, error) { return reserveOne(ctx, stock, sale.ID, user) }
	if _, err := reserve("u9"); !errors.Is(err, redis.ErrHealing) {
		t.Fatalf("reserve on a held sale: %v; want ErrHealing (try_later)", err)
	}
	// A preheat meanwhile (the scheduler) does not let claims in.
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve("u9"); !errors.Is(err, redis.ErrHealing) {
		t.Fatalf("reserve on a held sale after its preheat: %v; want ErrHealing", err)
	}
	w.Tick(ctx)
	if heals != 1 || !strings.Contains(logs.String(), "ALERT") {
		t.Fatalf("%d heals, log %q; want one heal, alerted", heals, logs.String())
	}
	if lvl, err := stock.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 3 {
		t.Errorf("after the heal: %+v, %v; want reserved 3 (the database's)", lvl, err)
	}
	if r, err := reserve("u1"); err != nil || r.Outcome != seckill.OutcomeLimitExceeded {
		t.Errorf("u1 after the heal: %+v, %v; want limit_exceeded", r, err)
	}
	if r, err := reserve("u9"); err != nil || r.Outcome != seckill.OutcomeReserved {
		t.Errorf("a new buyer after the heal: %+v, %v; want reserved", r, err)
	}
	w.Tick(ctx) // held once: healed once
	if heals != 1 {
		t.Errorf("%d heals after a second tick; want 1", heals)
	}

	// A heal that cannot read the database lets claims in again.
	other := &seckill.Sale{ID: "hold_fail", Name: "tea", Stock: 10, PurchaseLimit: 1, StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
	w2 := New(stock.Healer(), failingLedger{&fakeDB{sale: *other}}, loaded{other}, Config{Settle: 10 * time.Millisecond})
	if held, err := w2.Hold(ctx, []*seckill.Sale{other}); err != nil || held != 1 {
		t.Fatalf("Hold: %d, %v", held, err)
	}
	w2.Tick(ctx)
	res, err := stock.StockStore().Reserve(ctx, other.ID, []seckill.ReserveRequest{{ReservationID: seckill.NewReservationID(other.ID, time.Now()), UserID: "u1", Qty: 1}})
	if err != nil || res[0].Outcome != seckill.OutcomeReserved {
		t.Errorf("reserve after a failed heal: %+v, %v; want reserved (claims let in again)", res, err)
	}
}

// TestNoHealOfASaleEndedEarly: the preheat scheduler's row of a sale
// ended early still has the old end; once the sale's keys are gone (the
// archive took them) the watcher must not see lost writes and rebuild it,
// alerting, from a database that says it has ended.
func TestNoHealOfASaleEndedEarly(t *testing.T) {
	ctx := context.Background()
	stock, raw := storetest.Stock(t)
	preheated := &seckill.Sale{ID: servicetest.UniqueName("heal_"), Name: "tea", Stock: 10, PurchaseLimit: 1,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
	if _, err := stock.StockStore().Preheat(ctx, preheated); err != nil {
		t.Fatal(err)
	}
	ended := *preheated
	ended.EndAt = time.Now().Add(-time.Second)
	db := &fakeDB{sale: ended, orders: []*seckill.Order{{ReservationID: seckill.NewReservationID(ended.ID, time.Now()), UserID: "u1", Qty: 1, Status: seckill.OrderPaid}}}
	var heals int
	w := New(stock.Healer(), db, loaded{preheated}, Config{Settle: 10 * time.Millisecond, OnHeal: func(string, string, int, int) { heals++ }})
	keys := "sk:{" + ended.ID + "}:"
	if err := raw.Do(ctx, raw.B().Del().Key(keys+"stock", keys+"res", keys+"buyers", keys+"idem").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := stock.StockStore().Stock(ctx, ended.ID); !errors.Is(err, seckill.ErrNotFound) {
		t.Fatalf("stock after the archive: %v, want not found", err)
	}
	w.Tick(ctx)
	if heals != 0 {
		t.Errorf("%d heals of a sale the database has ended", heals)
	}
	if _, err := stock.StockStore().Stock(ctx, ended.ID); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("stock after a tick: %v, want still not found (nothing rebuilt)", err)
	}
}

// TestHealWaitsForTheBacklogToDrain: with Config.Backlog a held sale is
// healed only once the broker's backlog is drained, so an event that
// lands meanwhile is counted (its unit not sold again); a backlog that
// never drains delays the heal by DrainMax, no longer.
func TestHealWaitsForTheBacklogToDrain(t *testing.T) {
	ctx := context.Background()
	stock, err := redis.StartEmbedded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stock.Close()
	now := time.Now()
	for _, tc := range []struct {
		name      string
		drainAt   int // the Backlog call that first answers 0; 0: never
		wantSold  int64
		wantCalls int
	}{
		{"drains on the third look", 3, 2, 3},
		{"never drains", 0, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sale := &seckill.Sale{ID: servicetest.UniqueName("drain_"), Name: "tea", Stock: 10, PurchaseLimit: 1, StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
			db := &fakeDB{sale: *sale}
			order := func(user string) *seckill.Order {
				return &seckill.Order{ReservationID: seckill.NewReservationID(sale.ID, now), UserID: user, Qty: 1, Status: seckill.OrderPlaced, ReservedAt: now}
			}
			db.orders = append(db.orders, order("u1"))
			calls := 0
			backlog := func(context.Context) (int64, error) {
				calls++
				if calls == tc.drainAt {
					// The last event in the stream landed.
					db.mu.Lock()
					db.orders = append(db.orders, order("u2"))
					db.mu.Unlock()
					return 0, nil
				}
				return 1, nil
			}
			w := New(stock.Healer(), db, loaded{}, Config{Backlog: backlog, DrainMax: 300 * time.Millisecond})
			if held, err := w.Hold(ctx, []*seckill.Sale{sale}); err != nil || held != 1 {
				t.Fatalf("Hold: %d, %v", held, err)
			}
			start := time.Now()
			w.Tick(ctx)
			if lvl, err := stock.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != tc.wantSold {
				t.Errorf("after the heal: %+v, %v; want reserved %d", lvl, err, tc.wantSold)
			}
			if tc.wantCalls > 0 && calls != tc.wantCalls {
				t.Errorf("Backlog asked %d times; want %d", calls, tc.wantCalls)
			}
			if tc.drainAt == 0 && time.Since(start) < 300*time.Millisecond {
				t.Errorf("a backlog that never drained held the heal %s; want DrainMax", time.Since(start))
			}
		})
	}
}

// restartedStock is a stock store whose server id the test changes, as
// a Redis restart or failover does.
type restartedStock struct {
	redis.Healer
	id string
}

func (s *restartedStock) ServerID(context.Context) (string, error) { return s.id, nil }

// countingDB counts the order rows the watcher reads.
type countingDB struct {
	*fakeDB
	rows int
}

func (c *countingDB) OrdersAfter(ctx context.Context, sale, after string, limit int) ([]*seckill.Order, error) {
	page, err := c.fakeDB.OrdersAfter(ctx, sale, after, limit)
	c.rows += len(page)
	return page, err
}

// TestSuspectTicksReadWhatChanged: after a Redis restart the watcher
// compares a sale's whole ledger once, then on each tick only the orders
// of claims made since InFlight before the restart, and only when the sale
// changed since its last comparison (the row's version, the reserve
// sequence, reserved): a tick's reads follow what changed, not the sale's
// size nor the number of ticks. A late order Redis has no record of is
// still found. OnRestart is told of the restart once.
func TestSuspectTicksReadWhatChanged(t *testing.T) {
	ctx := context.Background()
	emb, err := redis.StartEmbedded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	now := time.Now()
	sale := &seckill.Sale{ID: servicetest.UniqueName("suspect_"), Name: "tea", Stock: 100, PurchaseLimit: 1, StartAt: now.Add(-2 * time.Hour), EndAt: now.Add(time.Hour)}
	if _, err := emb.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	db := &countingDB{fakeDB: &fakeDB{sale: *sale}}
	// Orders of claims made an hour ago, recorded in Redis as well.
	claim := func(user string, at time.Time) {
		t.Helper()
		id := seckill.NewReservationID(sale.ID, at)
		if _, err := emb.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{{ReservationID: id, UserID: user, Qty: 1}}); err != nil {
			t.Fatal(err)
		}
		db.land(id, user, at)
	}
	const old = 30
	for i := range old {
		claim(fmt.Sprintf("old%d", i), now.Add(-time.Hour))
	}
	stock := &restartedStock{Healer: emb.Healer(), id: "first"}
	heals, restarts := 0, 0
	w := New(stock, db, loaded{sale}, Config{InFlight: time.Minute, OnHeal: func(string, string, int, int) { heals++ }, OnRestart: func() { restarts++ }})
	w.Tick(ctx) // learns the server id
	stock.id = "restarted"
	db.rows = 0
	w.Tick(ctx)
	if db.rows < old {
		t.Fatalf("first tick after the restart read %d orders; want the whole ledger (%d)", db.rows, old)
	}
	claim("recent", time.Now())
	db.rows = 0
	w.Tick(ctx)
	if db.rows != 1 {
		t.Errorf("a later tick read %d orders; want only the 1 made since InFlight before the restart", db.rows)
	}
	// Ticks with nothing changed on either side compare nothing.
	before := w.comparisons
	db.rows = 0
	for range 5 {
		w.Tick(ctx)
	}
	if db.rows != 0 || w.comparisons != before {
		t.Errorf("5 ticks with nothing changed read %d orders in %d comparisons; want none", db.rows, w.comparisons-before)
	}
	if heals != 0 || restarts != 1 {
		t.Errorf("%d heals with every order recorded, %d restarts told; want none and 1", heals, restarts)
	}
	// A claim in Redis whose order is on its way: the reserve sequence
	// moved, so the next tick compares (and finds nothing to heal).
	if _, err := reserveOne(ctx, emb, sale.ID, "inflight"); err != nil {
		t.Fatal(err)
	}
	w.Tick(ctx)
	// An order that lands late, whose claim Redis lost (its units are
	// counted: the in-flight claim's): only the database's version
	// moved, and the next tick compares, and heals.
	db.land(seckill.NewReservationID(sale.ID, time.Now()), "lost", time.Now())
	w.Tick(ctx)
	if w.comparisons != before+2 || heals != 1 {
		t.Errorf("after a claim and an order Redis has no record of: %d comparisons, %d heals; want 2 and 1", w.comparisons-before, heals)
	}
}

// land adds an order as the order writer does, bumping the sale row's
// version.
func (f *fakeDB) land(id, user string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders = append(f.orders, &seckill.Order{ReservationID: id, UserID: user, Qty: 1, Status: seckill.OrderPlaced, ReservedAt: at})
	slices.SortFunc(f.orders, func(a, b *seckill.Order) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	f.sale.Version++
}

// TestHealBucketed: a sale spread over 3 stock buckets on a Redis that
// came back empty is healed like any other: every buyer's record and
// limit back in their home bucket, the stock back to what the database
// left, and a rush afterwards sells exactly that, nobody twice.
func TestHealBucketed(t *testing.T) {
	ctx := context.Background()
	stock, raw := storetest.Stock(t)
	sale := &seckill.Sale{ID: servicetest.UniqueName("healb_"), Name: "tea", Stock: 20, PurchaseLimit: 1, Buckets: 3,
		StartAt: time.Now().Add(-time.Hour), EndAt: time.Now().Add(time.Hour)}
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	db := &fakeDB{sale: *sale}
	var heals []string
	w := New(stock.Healer(), db, loaded{sale}, Config{
		Settle: 10 * time.Millisecond,
		OnHeal: func(_, reason string, _, _ int) { heals = append(heals, reason) },
	})
	reserve := func(user string) (seckill.ReserveResult, error) { return reserveOne(ctx, stock, sale.ID, user) }
	var buyers []string
	for i := range 8 {
		u := fmt.Sprintf("b%d", i)
		r, err := reserve(u)
		if err != nil || r.Outcome != seckill.OutcomeReserved {
			t.Fatalf("reserve %s: %+v, %v", u, r, err)
		}
		buyers = append(buyers, u)
		db.orders = append(db.orders, &seckill.Order{ReservationID: r.ReservationID, UserID: u, Qty: 1, Status: seckill.OrderPlaced, ReservedAt: time.Now()})
	}
	w.Tick(ctx)
	if len(heals) != 0 {
		t.Fatalf("healthy bucketed sale healed: %v", heals)
	}
	if err := raw.Do(ctx, raw.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	w.Tick(ctx)
	if len(heals) != 1 {
		t.Fatalf("heals %q; want one", heals)
	}
	st, err := stock.Healer().SaleState(ctx, sale.ID)
	if err != nil || !st.Loaded || st.Buckets != 3 || st.Total != 20 || st.Reserved != 8 || st.Healing {
		t.Fatalf("after the heal: %+v, %v; want 3 buckets, total 20, reserved 8, not healing", st, err)
	}
	for _, u := range buyers {
		if r, err := reserve(u); err != nil || r.Outcome != seckill.OutcomeLimitExceeded {
			t.Errorf("%s after the heal: %+v, %v; want limit_exceeded (the database has their order)", u, r, err)
		}
	}
	sold := 0
	for i := range 30 {
		r, err := reserve(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome == seckill.OutcomeReserved {
			sold++
		}
	}
	if sold != 12 {
		t.Errorf("sold %d after the heal; want the 12 units the database left", sold)
	}
	w.Tick(ctx)
	if len(heals) != 1 {
		t.Errorf("heals %q after the rush; want still one", heals)
	}
}
