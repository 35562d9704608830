package paytimeout

import (
	"bytes"
	"context"
	"errors"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC)

type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// fakeStore holds orders with the conditional cancel of the contract.
// beforeCancel, if set, runs at the start of CancelOrder, outside the
// lock: a test uses it to let a concurrent pay or cancel win.
type fakeStore struct {
	mu           sync.Mutex
	orders       map[string]*seckill.Order
	limits       []int
	listErr      error
	cancelErr    map[string]error
	beforeCancel func(id string)
}

func newFakeStore() *fakeStore {
	return &fakeStore{orders: map[string]*seckill.Order{}, cancelErr: map[string]error{}}
}

func (f *fakeStore) add(id string, status seckill.OrderStatus, payBy time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders[id] = &seckill.Order{ID: seckill.OrderIDOf(id), ReservationID: id, SaleID: "tea", UserID: "u-" + id, Qty: 1, Status: status, PayBy: payBy}
}

func (f *fakeStore) ExpiredOrders(_ context.Context, now time.Time, limit int) ([]*seckill.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = append(f.limits, limit)
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*seckill.Order
	for _, o := range f.orders {
		if o.Status == seckill.OrderPlaced && !o.PayBy.After(now) {
			c := *o
			out = append(out, &c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ReservationID < out[j].ReservationID })
	return out[:min(limit, len(out))], nil
}

func (f *fakeStore) CancelOrder(_ context.Context, id, reason string, now time.Time) (*seckill.Order, bool, error) {
	if f.beforeCancel != nil {
		f.beforeCancel(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.cancelErr[id]; err != nil {
		return nil, false, err
	}
	o, ok := f.orders[id]
	switch {
	case !ok:
		return nil, false, seckill.ErrNotFound
	case o.Status == seckill.OrderCancelled:
		c := *o
		return &c, false, nil
	case o.Status == seckill.OrderPaid:
		return nil, false, seckill.Errorf(seckill.ESTATECONFLICT, "order is paid")
	}
	o.Status, o.CancelReason, o.UpdatedAt = seckill.OrderCancelled, reason, now
	c := *o
	return &c, true, nil
}

func (f *fakeStore) set(id string, status seckill.OrderStatus, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders[id].Status, f.orders[id].CancelReason = status, reason
}

func (f *fakeStore) get(id string) seckill.Order {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.orders[id]
}

// hook records OnCancelled calls.
type hook struct {
	mu    sync.Mutex
	calls []int
}

func (h *hook) OnCancelled(n int) {
	h.mu.Lock()
	h.calls = append(h.calls, n)
	h.mu.Unlock()
}

func (h *hook) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum := 0
	for _, n := range h.calls {
		sum += n
	}
	return sum
}

func TestSweepCancelsExpiredOnly(t *testing.T) {
	store := newFakeStore()
	store.add("expired-1", seckill.OrderPlaced, t0.Add(-time.Minute))
	store.add("expired-2", seckill.OrderPlaced, t0) // PayBy <= now: due
	store.add("not-yet", seckill.OrderPlaced, t0.Add(time.Second))
	store.add("paid", seckill.OrderPaid, t0.Add(-time.Hour))
	store.add("cancelled", seckill.OrderCancelled, t0.Add(-time.Hour))
	store.set("cancelled", seckill.OrderCancelled, "cancelled by buyer")
	h := &hook{}
	s := New(store, Config{Now: newClock(t0).Now, OnCancelled: h.OnCancelled})

	n, err := s.Sweep(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2, nil", n, err)
	}
	for _, id := range []string{"expired-1", "expired-2"} {
		if o := store.get(id); o.Status != seckill.OrderCancelled || o.CancelReason != "payment timeout" || !o.UpdatedAt.Equal(t0) {
			t.Errorf("%s = %+v, want cancelled for payment timeout at t0", id, o)
		}
	}
	for id, want := range map[string]seckill.OrderStatus{"not-yet": seckill.OrderPlaced, "paid": seckill.OrderPaid, "cancelled": seckill.OrderCancelled} {
		if o := store.get(id); o.Status != want || (id == "cancelled" && o.CancelReason != "cancelled by buyer") {
			t.Errorf("%s = %+v, want untouched", id, o)
		}
	}
	if len(store.limits) != 1 || store.limits[0] != DefaultBatchSize {
		t.Fatalf("ExpiredOrders limits = %v, want [%d]", store.limits, DefaultBatchSize)
	}
	if len(h.calls) != 1 || h.calls[0] != 2 {
		t.Fatalf("OnCancelled calls = %v, want [2]", h.calls)
	}

	// Nothing left: a second sweep cancels nothing and tells no one.
	if n, err := s.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v", n, err)
	}
	if len(h.calls) != 1 {
		t.Fatalf("OnCancelled called for an empty sweep: %v", h.calls)
	}
}

// TestSweepPayWins: a payment that lands between the listing and the
// cancel wins; the sweeper moves on without an error.
func TestSweepPayWins(t *testing.T) {
	store := newFakeStore()
	store.add("a", seckill.OrderPlaced, t0.Add(-time.Second))
	store.add("b", seckill.OrderPlaced, t0.Add(-time.Second))
	store.beforeCancel = func(id string) {
		if id == "a" {
			store.set(id, seckill.OrderPaid, "")
		}
	}
	var logs bytes.Buffer
	h := &hook{}
	s := New(store, Config{Now: newClock(t0).Now, OnCancelled: h.OnCancelled, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	n, err := s.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if o := store.get("a"); o.Status != seckill.OrderPaid {
		t.Fatalf("a = %+v, want the payment to stand", o)
	}
	if o := store.get("b"); o.Status != seckill.OrderCancelled {
		t.Fatalf("b = %+v, want cancelled", o)
	}
	if h.total() != 1 {
		t.Fatalf("OnCancelled total = %d, want 1", h.total())
	}
	if logs.Len() != 0 {
		t.Fatalf("a lost race was logged above debug: %s", logs.String())
	}
}

// TestSweepAnotherSweeperFirst: an order another node cancelled in the
// meantime is neither counted twice nor an error.
func TestSweepAnotherSweeperFirst(t *testing.T) {
	store := newFakeStore()
	store.add("a", seckill.OrderPlaced, t0.Add(-time.Second))
	store.beforeCancel = func(id string) { store.set(id, seckill.OrderCancelled, Reason) }
	h := &hook{}
	s := New(store, Config{Now: newClock(t0).Now, OnCancelled: h.OnCancelled})
	if n, err := s.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v; want 0, nil", n, err)
	}
	if len(h.calls) != 0 {
		t.Fatalf("OnCancelled = %v, want no call", h.calls)
	}
}

func TestSweepDrainsBacklogInBatches(t *testing.T) {
	store := newFakeStore()
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		store.add(id, seckill.OrderPlaced, t0.Add(-time.Minute))
	}
	s := New(store, Config{Now: newClock(t0).Now, BatchSize: 3})
	if n, err := s.Sweep(context.Background()); err != nil || n != 7 {
		t.Fatalf("Sweep = %d, %v; want 7, nil", n, err)
	}
	if want := []int{3, 3, 3}; len(store.limits) != 3 || store.limits[0] != 3 || store.limits[2] != 3 {
		t.Fatalf("ExpiredOrders limits = %v, want %v", store.limits, want)
	}
}

func TestSweepFailures(t *testing.T) {
	t.Run("one cancel fails, the rest go on", func(t *testing.T) {
		store := newFakeStore()
		for _, id := range []string{"a", "b", "c", "d"} {
			store.add(id, seckill.OrderPlaced, t0.Add(-time.Minute))
		}
		store.cancelErr["b"] = errors.New("database is locked")
		h := &hook{}
		s := New(store, Config{Now: newClock(t0).Now, BatchSize: 4, OnCancelled: h.OnCancelled})
		n, err := s.Sweep(context.Background())
		if n != 3 || err == nil || !strings.Contains(err.Error(), "1 of 4") || !strings.Contains(err.Error(), "database is locked") {
			t.Fatalf("Sweep = %d, %v; want 3 and an error naming 1 of 4 and the cause", n, err)
		}
		if o := store.get("b"); o.Status != seckill.OrderPlaced {
			t.Fatalf("b = %+v", o)
		}
		// A full batch with a failure does not loop on the same orders.
		if len(store.limits) != 1 {
			t.Fatalf("ExpiredOrders called %d times, want 1", len(store.limits))
		}
		if h.total() != 3 {
			t.Fatalf("OnCancelled total = %d, want 3", h.total())
		}
	})
	t.Run("listing fails", func(t *testing.T) {
		store := newFakeStore()
		store.listErr = errors.New("connection refused")
		s := New(store, Config{Now: newClock(t0).Now})
		if _, err := s.Sweep(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("Sweep err = %v", err)
		}
	})
	t.Run("a cancel that changes nothing cannot spin", func(t *testing.T) {
		store := newFakeStore()
		store.add("a", seckill.OrderPlaced, t0.Add(-time.Minute))
		s := New(store, Config{Now: newClock(t0).Now, BatchSize: 1, Cancel: func(context.Context, *seckill.Order) error { return nil }})
		if _, err := s.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(store.limits) != maxBatchesPerSweep {
			t.Fatalf("ExpiredOrders called %d times, want the bound %d", len(store.limits), maxBatchesPerSweep)
		}
	})
}

// TestCustomCancel: the restore path replaces the store's cancel.
func TestCustomCancel(t *testing.T) {
	store := newFakeStore()
	store.add("a", seckill.OrderPlaced, t0.Add(-time.Minute))
	store.add("b", seckill.OrderPlaced, t0.Add(-time.Minute))
	var got []string
	s := New(store, Config{Now: newClock(t0).Now, Cancel: func(ctx context.Context, o *seckill.Order) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("Cancel called without a deadline")
		}
		got = append(got, o.ReservationID)
		if o.ReservationID == "b" {
			return seckill.Errorf(seckill.ESTATECONFLICT, "paid")
		}
		store.set(o.ReservationID, seckill.OrderCancelled, Reason)
		return nil
	}})
	n, err := s.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("Cancel saw %v", got)
	}
}

func TestStartSweepsEveryInterval(t *testing.T) {
	store := newFakeStore()
	clk := newClock(t0)
	store.add("a", seckill.OrderPlaced, t0.Add(-time.Minute))
	store.add("b", seckill.OrderPlaced, t0.Add(time.Minute))
	h := &hook{}
	s := New(store, Config{Now: clk.Now, Interval: 5 * time.Millisecond, OnCancelled: h.OnCancelled})
	s.Start(context.Background())
	s.Start(context.Background()) // a second Start does nothing
	defer s.Stop(context.Background())

	servicetest.WaitFor(t, 30*time.Second, "order a cancelled", func() bool { return store.get("a").Status == seckill.OrderCancelled })
	if store.get("b").Status != seckill.OrderPlaced {
		t.Fatal("b cancelled before its deadline")
	}
	clk.ns.Add(int64(2 * time.Minute))
	servicetest.WaitFor(t, 30*time.Second, "order b cancelled", func() bool { return store.get("b").Status == seckill.OrderCancelled })

	// The status flips inside the sweep, before the sweep tells the hook:
	// Stop waits for the sweep to finish, so only then is the count final.
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.total() != 2 {
		t.Fatalf("OnCancelled total = %d, want 2", h.total())
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	// Stopped means stopped: nothing is swept any more, and Start does
	// not revive it.
	s.Start(context.Background())
	store.add("c", seckill.OrderPlaced, t0)
	time.Sleep(30 * time.Millisecond)
	if store.get("c").Status != seckill.OrderPlaced {
		t.Fatal("swept after Stop")
	}
}

func TestStopWithoutStart(t *testing.T) {
	s := New(newFakeStore(), Config{})
	for range 2 {
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStopWaitsForTheCancelInHand: Stop does not cut a cancel in two; it
// waits for it (up to its ctx), and the next order is not started.
func TestStopWaitsForTheCancelInHand(t *testing.T) {
	store := newFakeStore()
	store.add("a", seckill.OrderPlaced, t0.Add(-time.Minute))
	store.add("b", seckill.OrderPlaced, t0.Add(-time.Minute))
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var ctxErr atomic.Value
	s := New(store, Config{Now: newClock(t0).Now, Interval: time.Hour, Cancel: func(ctx context.Context, o *seckill.Order) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		if ctx.Err() != nil {
			ctxErr.Store(ctx.Err())
		}
		return nil
	}})
	s.Start(context.Background())
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with a cancel in hand = %v, want the deadline", err)
	}
	close(release)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("Cancel calls = %d, want 1 (b left for the next sweeper)", n)
	}
	if err := ctxErr.Load(); err != nil {
		t.Fatalf("the cancel in hand saw its context end: %v", err)
	}
}
