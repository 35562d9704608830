package orderwriter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type delivery struct {
	msg     seckill.Message
	attempt int
	acked   bool
	retried error
}

func (d *delivery) Message() seckill.Message { return d.msg }
func (d *delivery) Attempt() int             { return d.attempt }
func (d *delivery) Ack()                     { d.acked, d.retried = true, nil }
func (d *delivery) Retry(err error)          { d.acked, d.retried = false, err }

func event(t *testing.T, sale, user string) *delivery {
	t.Helper()
	ev := seckill.ReservationEvent{ReservationID: seckill.NewReservationID(sale, time.Now()), SaleID: sale, UserID: user, Qty: 1, ReservedAt: time.Now()}
	m, err := brokerpack.EventMessage(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &delivery{msg: m, attempt: 1}
}

type fakeStore struct {
	mu       sync.Mutex
	orders   map[string]bool
	failed   map[string]*seckill.FailedOrder
	calls    map[string]int // sale → PersistReservations calls
	failSale string         // PersistReservations fails for this sale
	down     int            // the database is down for this many pings
	failRec  bool
	overUser string // PersistReservations refuses this buyer's events as over the limit
	badUser  string // PersistReservations fails any batch with this buyer's event
	inFlight map[string]int
	overlap  bool          // two PersistReservations of one sale ran at once
	gate     chan struct{} // if set, PersistReservations waits on it
}

func newFakeStore() *fakeStore {
	return &fakeStore{orders: map[string]bool{}, failed: map[string]*seckill.FailedOrder{}, calls: map[string]int{}, inFlight: map[string]int{}}
}

func (f *fakeStore) PersistReservations(_ context.Context, sale string, evs []seckill.ReservationEvent, _ time.Time, _ time.Duration) ([]seckill.PersistOutcome, error) {
	f.mu.Lock()
	f.inFlight[sale]++
	f.overlap = f.overlap || f.inFlight[sale] > 1
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight[sale]--
	f.calls[sale]++
	for _, ev := range evs {
		if ev.UserID == f.badUser {
			return nil, errors.New("data too long for column user_id")
		}
	}
	if f.down > 0 {
		return nil, errors.New("connection refused")
	}
	if sale == f.failSale {
		return nil, seckill.ErrNotFound
	}
	out := make([]seckill.PersistOutcome, len(evs))
	for i, ev := range evs {
		if f.orders[ev.ReservationID] {
			out[i] = seckill.PersistDuplicate
		} else if ev.UserID == f.overUser {
			out[i] = seckill.PersistOverLimit
		} else {
			f.orders[ev.ReservationID] = true
			out[i] = seckill.PersistCreated
		}
	}
	return out, nil
}

func (f *fakeStore) RecordFailedOrder(_ context.Context, fo *seckill.FailedOrder) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRec {
		return errors.New("database down")
	}
	if _, ok := f.failed[fo.ReservationID]; ok {
		return seckill.ErrDuplicate
	}
	f.failed[fo.ReservationID] = fo
	return nil
}

func (f *fakeStore) Ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down > 0 {
		f.down-- // each failed ping brings the database closer to coming back
		return errors.New("connection refused")
	}
	return nil
}

func TestBatchIsPersistedPerSaleAndAcked(t *testing.T) {
	store := newFakeStore()
	var created, dup, kicks int
	w := New(store, nil, Config{Observe: func(c, d, _ int) { created += c; dup += d }, AfterPersist: func() { kicks++ }})
	a1, a2, b1 := event(t, "a", "u1"), event(t, "a", "u2"), event(t, "b", "u1")
	again := &delivery{msg: a1.msg, attempt: 2} // redelivery in the same batch
	batch := []seckill.Delivery{a1, b1, a2, again}
	w.handle(context.Background(), batch)
	for i, d := range []*delivery{a1, a2, b1, again} {
		if !d.acked {
			t.Errorf("delivery %d not acked", i)
		}
	}
	if store.calls["a"] != 1 || store.calls["b"] != 1 {
		t.Errorf("store calls %v, want one transaction per sale", store.calls)
	}
	if created != 3 || dup != 1 || len(store.orders) != 3 {
		t.Errorf("created %d dup %d orders %d; want 3, 1, 3", created, dup, len(store.orders))
	}
	if kicks != 2 {
		t.Errorf("AfterPersist called %d times, want once per sale that created orders", kicks)
	}
}

func TestOverLimitIsAlertedAndAcked(t *testing.T) {
	store := newFakeStore()
	store.overUser = "greedy"
	var logs bytes.Buffer
	var failed []*seckill.FailedOrder
	var rejected int
	w := New(store, nil, Config{
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		OnFailed: func(f *seckill.FailedOrder) { failed = append(failed, f) },
		Observe:  func(_, _, r int) { rejected += r },
	})
	over, ok := event(t, "a", "greedy"), event(t, "a", "modest")
	w.handle(context.Background(), []seckill.Delivery{over, ok})
	if !over.acked || !ok.acked {
		t.Fatalf("acked: over-limit %v, ok %v; want both", over.acked, ok.acked)
	}
	if rejected != 1 || len(failed) != 1 || failed[0].Reason != seckill.ReasonOverLimit || failed[0].UserID != "greedy" {
		t.Errorf("rejected %d, failed %+v; want one over-limit failed order of greedy", rejected, failed)
	}
	if !strings.Contains(logs.String(), "ALERT") || !strings.Contains(logs.String(), seckill.ReasonOverLimit) {
		t.Errorf("log %q has no ALERT line naming the limit", logs.String())
	}
}

func TestFailureWithDatabaseUpRetriesOnlyThatSale(t *testing.T) {
	store := newFakeStore()
	store.failSale = "ghost"
	w := New(store, nil, Config{})
	bad, good := event(t, "ghost", "u"), event(t, "a", "u")
	w.handle(context.Background(), []seckill.Delivery{bad, good})
	if bad.acked || !errors.Is(bad.retried, seckill.ErrNotFound) {
		t.Errorf("event of an unknown sale: acked=%v retried=%v; want a retry with the error", bad.acked, bad.retried)
	}
	if !good.acked {
		t.Error("an event of another sale was not acked")
	}
}

// TestBadEventInABatch: a batch the store refuses with the database up is
// tried event by event: the bad event is retried, the others persist.
func TestBadEventInABatch(t *testing.T) {
	store := newFakeStore()
	store.badUser = "bad"
	var created int
	w := New(store, nil, Config{Observe: func(c, _, _ int) { created += c }})
	ds := []*delivery{event(t, "a", "u1"), event(t, "a", "bad"), event(t, "a", "u2"), event(t, "a", "u3")}
	batch := make([]seckill.Delivery, len(ds))
	for i, d := range ds {
		batch[i] = d
	}
	w.handle(context.Background(), batch)
	for i, d := range ds {
		if bad := i == 1; bad && (d.acked || d.retried == nil) || !bad && !d.acked {
			t.Errorf("delivery %d (user %s): acked=%v retried=%v", i, []string{"u1", "bad", "u2", "u3"}[i], d.acked, d.retried)
		}
	}
	if created != 3 || len(store.orders) != 3 {
		t.Errorf("created %d, orders %d; want the 3 good events persisted", created, len(store.orders))
	}
	if store.calls["a"] != 1+len(ds) {
		t.Errorf("store called %d times, want the batch once and then each event", store.calls["a"])
	}
}

// TestOneSaleOneTransactionAtATime: the consumers of one writer never run
// two transactions of a sale at once (one would lose its optimistic lock);
// the batches that waited meanwhile go in one transaction; another sale's
// transaction goes ahead meanwhile. If the joint transaction fails, each
// batch is tried alone.
func TestOneSaleOneTransactionAtATime(t *testing.T) {
	for _, withBad := range []bool{false, true} {
		store := newFakeStore()
		store.badUser = "bad"
		store.gate = make(chan struct{})
		w := New(store, nil, Config{})
		var wg sync.WaitGroup
		start := func(sale, user string) *delivery {
			d := event(t, sale, user)
			wg.Go(func() { w.handle(context.Background(), []seckill.Delivery{d}) })
			return d
		}
		inFlight := func(sale string) int {
			store.mu.Lock()
			defer store.mu.Unlock()
			return store.inFlight[sale]
		}
		users := func(sale string) int {
			w.sales.mu.Lock()
			defer w.sales.mu.Unlock()
			if q := w.sales.queues[sale]; q != nil {
				return q.users
			}
			return 0
		}
		first := start("a", "u1")
		servicetest.WaitFor(t, 10*time.Second, "the first transaction of a", func() bool { return inFlight("a") == 1 })
		second := "u2"
		if withBad {
			second = "bad"
		}
		waiting := []*delivery{start("a", second), start("a", "u3")}
		servicetest.WaitFor(t, 10*time.Second, "two more batches of a to wait or to start",
			func() bool { return users("a") == 3 || inFlight("a") > 1 })
		b := start("b", "u1")
		servicetest.WaitFor(t, 10*time.Second, "b's transaction, while a's are held", func() bool { return inFlight("b") == 1 })
		close(store.gate)
		wg.Wait()
		if store.overlap {
			t.Error("two transactions of one sale ran at once")
		}
		for i, d := range []*delivery{first, waiting[1], b} {
			if !d.acked {
				t.Errorf("delivery %d not acked", i)
			}
		}
		if withBad {
			if waiting[0].acked || waiting[0].retried == nil {
				t.Errorf("the bad batch: acked=%v retried=%v; want a retry", waiting[0].acked, waiting[0].retried)
			}
			// a1, then a2 and a3 together, then each alone.
			if store.calls["a"] != 4 {
				t.Errorf("sale a: %d transactions, want 4", store.calls["a"])
			}
		} else if !waiting[0].acked || store.calls["a"] != 2 {
			t.Errorf("sale a: %d transactions (second batch acked: %v), want 2: the two that waited together", store.calls["a"], waiting[0].acked)
		}
		if len(w.sales.queues) != 0 {
			t.Errorf("%d sale queues left after every batch settled, want none", len(w.sales.queues))
		}
	}
}

func TestDatabaseOutageIsWaitedOutWithoutSpendingAttempts(t *testing.T) {
	store := newFakeStore()
	store.down = 3
	w := New(store, nil, Config{OutageBackoff: time.Millisecond})
	d := event(t, "a", "u")
	w.handle(context.Background(), []seckill.Delivery{d})
	if !d.acked || d.retried != nil {
		t.Fatalf("after the outage: acked=%v retried=%v; want acked with no attempt spent", d.acked, d.retried)
	}
	if store.calls["a"] != 4 {
		t.Fatalf("store called %d times, want 4 (3 during the outage)", store.calls["a"])
	}
}

// releasable is a delivery that can be given back (seckill.Releaser).
type releasable struct {
	*delivery
	released bool
}

func (d *releasable) Release() { d.released = true }

// TestOutageGivesTheBatchBack: with ReleaseAfter, a writer that cannot
// reach its database gives its deliveries back, spending no attempt, and
// while it stays out of reach gives later batches back after one ping;
// once the database answers again it writes.
func TestOutageGivesTheBatchBack(t *testing.T) {
	store := newFakeStore()
	store.down = 1 << 30
	w := New(store, nil, Config{OutageBackoff: time.Millisecond, ReleaseAfter: 20 * time.Millisecond})
	d := &releasable{delivery: event(t, "a", "u")}
	start := time.Now()
	w.handle(context.Background(), []seckill.Delivery{d})
	if !d.released || d.acked || d.retried != nil {
		t.Fatalf("after the outage: released=%v acked=%v retried=%v; want given back, no attempt spent", d.released, d.acked, d.retried)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("given back after %s; want ReleaseAfter (20ms) held first", took)
	}
	calls := store.calls["a"]
	next := &releasable{delivery: event(t, "a", "v")}
	w.handle(context.Background(), []seckill.Delivery{next})
	if !next.released || store.calls["a"] != calls {
		t.Errorf("while still out of reach: released=%v, store called %d more times; want given back after a ping alone", next.released, store.calls["a"]-calls)
	}
	// A delivery that cannot be given back is retried.
	plain := event(t, "a", "w")
	w.handle(context.Background(), []seckill.Delivery{plain})
	if plain.retried == nil {
		t.Error("a delivery without Release was neither given back nor retried")
	}
	store.mu.Lock()
	store.down = 0
	store.mu.Unlock()
	// Within a second of the last failed ping, batches go back unpinged.
	soon := &releasable{delivery: event(t, "a", "y")}
	w.handle(context.Background(), []seckill.Delivery{soon})
	if !soon.released {
		t.Error("a batch within a second of a failed ping was not given back")
	}
	w.downAt.Store(time.Now().Add(-time.Second).UnixNano()) // a second later
	back := &releasable{delivery: event(t, "a", "x")}
	w.handle(context.Background(), []seckill.Delivery{back})
	if !back.acked || back.released {
		t.Errorf("database back: acked=%v released=%v; want written", back.acked, back.released)
	}
}

// TestBusyDatabaseIsNotGivenBack: a database that answers pings but says
// it is unavailable (a lock wait timed out) is waited out, not given
// back: it would be as busy for another node.
func TestBusyDatabaseIsNotGivenBack(t *testing.T) {
	store := &busyStore{fakeStore: newFakeStore(), busy: 3}
	w := New(store, nil, Config{OutageBackoff: time.Millisecond, ReleaseAfter: time.Nanosecond})
	d := &releasable{delivery: event(t, "a", "u")}
	w.handle(context.Background(), []seckill.Delivery{d})
	if !d.acked || d.released || d.retried != nil {
		t.Fatalf("acked=%v released=%v retried=%v; want written after the busy spell", d.acked, d.released, d.retried)
	}
}

// busyStore answers pings, but its first busy calls fail unavailable.
type busyStore struct {
	*fakeStore
	busy int
}

func (b *busyStore) PersistReservations(ctx context.Context, sale string, evs []seckill.ReservationEvent, now time.Time, pay time.Duration) ([]seckill.PersistOutcome, error) {
	if b.busy > 0 {
		b.busy--
		return nil, fmt.Errorf("take stock: lock timeout: %w", &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "busy"})
	}
	return b.fakeStore.PersistReservations(ctx, sale, evs, now, pay)
}

func TestOutageAndShutdown(t *testing.T) {
	store := newFakeStore()
	store.down = 1 << 30
	w := New(store, nil, Config{OutageBackoff: time.Millisecond})
	d := event(t, "a", "u")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	w.handle(ctx, []seckill.Delivery{d})
	if d.acked {
		t.Fatal("acked while the database was down")
	}
}

func TestPoisonMessagesAreRetried(t *testing.T) {
	good := event(t, "a", "u")
	var ev seckill.ReservationEvent
	_ = json.Unmarshal(good.msg.Body, &ev)
	mk := func(mut func(*seckill.ReservationEvent)) *delivery {
		e := ev
		mut(&e)
		b, _ := json.Marshal(e)
		return &delivery{msg: seckill.Message{ID: ev.ReservationID, Body: b}, attempt: 1}
	}
	poisons := map[string]*delivery{
		"not JSON":       {msg: seckill.Message{ID: ev.ReservationID, Body: []byte("{")}, attempt: 1},
		"id mismatch":    {msg: seckill.Message{ID: "other", Body: good.msg.Body}, attempt: 1},
		"zero qty":       mk(func(e *seckill.ReservationEvent) { e.Qty = 0 }),
		"bad user":       mk(func(e *seckill.ReservationEvent) { e.UserID = "" }),
		"sale mismatch":  mk(func(e *seckill.ReservationEvent) { e.SaleID = "b" }),
		"brace sale id":  mk(func(e *seckill.ReservationEvent) { e.SaleID = "{a}" }),
		"huge qty":       mk(func(e *seckill.ReservationEvent) { e.Qty = 1 << 60 }),
		"control in usr": mk(func(e *seckill.ReservationEvent) { e.UserID = "a\x00" }),
	}
	store := newFakeStore()
	w := New(store, nil, Config{})
	for name, d := range poisons {
		w.handle(context.Background(), []seckill.Delivery{d})
		if d.acked || d.retried == nil {
			t.Errorf("%s: acked=%v retried=%v; want a retry", name, d.acked, d.retried)
		}
	}
	if len(store.orders) != 0 {
		t.Fatalf("poison created %d orders", len(store.orders))
	}
}

func TestDeadLettersBecomeFailedOrders(t *testing.T) {
	store := newFakeStore()
	var alerts []*seckill.FailedOrder
	w := New(store, nil, Config{OnFailed: func(f *seckill.FailedOrder) { alerts = append(alerts, f) }})
	d := event(t, "a", "alice")
	dl := seckill.DeadLetter{Message: d.msg, Attempts: 5, Reason: "boom"}
	junk := seckill.DeadLetter{Message: seckill.Message{ID: "junk", Body: []byte("%%")}, Attempts: 5}
	if err := w.handleDead(context.Background(), []seckill.DeadLetter{dl, junk}); err != nil {
		t.Fatal(err)
	}
	f := store.failed[d.msg.ID]
	if f == nil || f.SaleID != "a" || f.UserID != "alice" || f.Qty != 1 || f.Attempts != 5 || f.Reason != "boom" {
		t.Fatalf("failed order %+v", f)
	}
	if j := store.failed["junk"]; j == nil || string(j.Payload) != "%%" || j.Reason == "" {
		t.Fatalf("undecodable dead letter recorded as %+v; want its raw payload and a reason", j)
	}
	if len(alerts) != 2 {
		t.Fatalf("%d alerts, want 2", len(alerts))
	}
	// A redelivered dead letter is not recorded or alerted twice.
	if err := w.handleDead(context.Background(), []seckill.DeadLetter{dl}); err != nil || len(alerts) != 2 {
		t.Fatalf("redelivered dead letter: err=%v alerts=%d", err, len(alerts))
	}
	// A database failure returns an error so the broker keeps the letter.
	store.failRec = true
	other := seckill.DeadLetter{Message: event(t, "a", "bob").msg, Attempts: 5}
	if err := w.handleDead(context.Background(), []seckill.DeadLetter{other}); err == nil {
		t.Fatal("recording failed but the dead letter was settled")
	}
}

type blockingConsumer struct{ started sync.WaitGroup }

func (b *blockingConsumer) Consume(ctx context.Context, _ seckill.ConsumeOptions, _ func(context.Context, []seckill.Delivery)) error {
	b.started.Done()
	<-ctx.Done()
	return nil
}

func (b *blockingConsumer) ConsumeDeadLetters(ctx context.Context, _ seckill.ConsumeOptions, _ func(context.Context, []seckill.DeadLetter) error) error {
	b.started.Done()
	<-ctx.Done()
	return nil
}

func TestStartStop(t *testing.T) {
	c := &blockingConsumer{}
	c.started.Add(3)
	w := New(newFakeStore(), c, Config{Consumers: 2})
	w.Start(context.Background())
	c.started.Wait()
	w.Start(context.Background()) // does nothing: more loops would drive started below zero
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := New(newFakeStore(), c, Config{}).Stop(context.Background()); err != nil {
		t.Fatal("Stop without Start:", err)
	}
}

// TestCompactEvents: events in the compact layout persist like JSON ones,
// and a compact dead letter is recorded with a JSON payload an operator
// can read.
func TestCompactEvents(t *testing.T) {
	store := newFakeStore()
	w := New(store, nil, Config{})
	// The outbox's precision, which the compact layout keeps.
	at := time.UnixMilli(time.Now().UnixMilli()).UTC()
	ev := seckill.ReservationEvent{ReservationID: seckill.NewReservationID("a", at), SaleID: "a", UserID: "alice", Qty: 1, ReservedAt: at}
	d := &delivery{msg: brokerpack.CompactEvent(ev), attempt: 1}
	w.handle(context.Background(), []seckill.Delivery{d})
	if !store.orders[ev.ReservationID] {
		t.Fatalf("compact event %s not persisted", ev.ReservationID)
	}
	dl := seckill.DeadLetter{Message: brokerpack.CompactEvent(ev), Attempts: 5, Reason: "boom"}
	if err := w.handleDead(context.Background(), []seckill.DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	js, _ := brokerpack.EventMessage(ev)
	if f := store.failed[ev.ReservationID]; f == nil || string(f.Payload) != string(js.Body) || f.UserID != "alice" {
		t.Fatalf("compact dead letter recorded as %+v; want the JSON payload %s", f, js.Body)
	}
}
