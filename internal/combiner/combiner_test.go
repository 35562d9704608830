package combiner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore answers each request with its user id as reservation id and
// records how many calls ran at once per sale. A gated store holds every
// call until the test opens the gate, and says when each call starts, so
// tests decide what is in flight and what is queued instead of guessing
// with sleeps.
type fakeStore struct {
	fail    func(reqs []seckill.ReserveRequest) error
	gate    chan struct{} // if set, calls wait until it is closed
	entered chan string   // if set, told the sale of each call as it starts

	mu          sync.Mutex
	inFlight    map[string]int
	maxInFlight map[string]int
	batches     []int
}

func newFakeStore() *fakeStore {
	return &fakeStore{inFlight: map[string]int{}, maxInFlight: map[string]int{}}
}

func newGatedStore() *fakeStore {
	f := newFakeStore()
	f.gate = make(chan struct{})
	f.entered = make(chan string, 1<<12)
	return f
}

// open lets every held call, and every later one, through.
func (f *fakeStore) open() { close(f.gate) }

func (f *fakeStore) Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	f.mu.Lock()
	f.inFlight[saleID]++
	f.maxInFlight[saleID] = max(f.maxInFlight[saleID], f.inFlight[saleID])
	f.batches = append(f.batches, len(reqs))
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight[saleID]--; f.mu.Unlock() }()

	if f.entered != nil {
		select {
		case f.entered <- saleID:
		default:
		}
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.fail != nil {
		if err := f.fail(reqs); err != nil {
			return nil, err
		}
	}
	out := make([]seckill.ReserveResult, len(reqs))
	for i, r := range reqs {
		out[i] = seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: saleID + "/" + r.UserID, Qty: r.Qty}
	}
	return out, nil
}

func (f *fakeStore) stats() (batches []int, maxInFlight map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.maxInFlight))
	for k, v := range f.maxInFlight {
		m[k] = v
	}
	return append([]int(nil), f.batches...), m
}

// queued counts the requests waiting behind the call in flight for sale.
func (c *Combiner) queued(saleID string) int {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if l := c.b.lanes[saleID]; l != nil {
		return len(l.pending)
	}
	return 0
}

func (c *Combiner) isClosed() bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.b.closed
}

func TestLoneRequestGoesAtOnce(t *testing.T) {
	store := newFakeStore()
	c := New(store, Config{})
	defer c.Stop(context.Background())

	for i := range 3 {
		res, err := c.Reserve(context.Background(), "s1", seckill.ReserveRequest{UserID: fmt.Sprint(i), Qty: 1})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("s1/%d", i); res.ReservationID != want {
			t.Fatalf("got reservation %q, want %q", res.ReservationID, want)
		}
	}
	batches, _ := store.stats()
	if fmt.Sprint(batches) != "[1 1 1]" {
		t.Fatalf("sequential requests were batched as %v, want three calls of one", batches)
	}
}

func TestStampedeIsBatchedOneCallInFlightPerSale(t *testing.T) {
	store := newGatedStore()
	c := New(store, Config{MaxBatch: 50})
	defer c.Stop(context.Background())

	const n = 2000
	sales := []string{"a", "b"}
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sale := sales[i%2]
			user := fmt.Sprint(i)
			res, err := c.Reserve(context.Background(), sale, seckill.ReserveRequest{UserID: user, Qty: 1})
			if err != nil || res.ReservationID != sale+"/"+user {
				wrong.Add(1)
			}
		}()
	}
	// The first call of each sale holds the gate; everyone else queues.
	servicetest.WaitFor(t, 30*time.Second, "every request in flight or queued", func() bool {
		return c.queued("a")+c.queued("b") == n-len(sales)
	})
	store.open()
	wg.Wait()
	if w := wrong.Load(); w != 0 {
		t.Fatalf("%d requests got an error or someone else's answer", w)
	}
	batches, maxInFlight := store.stats()
	total := 0
	for _, b := range batches {
		if b > 50 {
			t.Fatalf("batch of %d exceeds MaxBatch 50", b)
		}
		total += b
	}
	if total != n {
		t.Fatalf("store saw %d requests, want %d", total, n)
	}
	for _, s := range sales {
		if maxInFlight[s] != 1 {
			t.Fatalf("sale %s had %d calls in flight at once, want 1", s, maxInFlight[s])
		}
	}
	if len(batches) > n/4 {
		t.Fatalf("%d calls for %d concurrent requests: the stampede was not batched", len(batches), n)
	}
	t.Logf("%d requests in %d calls", n, len(batches))
}

func TestStoreErrorFailsOnlyItsBatch(t *testing.T) {
	store := newFakeStore()
	boom := errors.New("redis down")
	store.fail = func(reqs []seckill.ReserveRequest) error {
		for _, r := range reqs {
			if r.UserID == "bad" {
				return boom
			}
		}
		return nil
	}
	c := New(store, Config{})
	defer c.Stop(context.Background())

	if _, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "bad", Qty: 1}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the store's error", err)
	}
	res, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "good", Qty: 1})
	if err != nil || res.ReservationID != "s/good" {
		t.Fatalf("the next batch got %+v, %v; want a clean answer", res, err)
	}
}

func TestShortAnswerIsAnError(t *testing.T) {
	c := New(shortStore{}, Config{})
	defer c.Stop(context.Background())
	if _, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "u", Qty: 1}); err == nil {
		t.Fatal("a store answering fewer results than requests must be an error")
	}
}

type shortStore struct{}

func (shortStore) Reserve(context.Context, string, []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return nil, nil
}

func TestCancelledWaiterDoesNotDisturbBatch(t *testing.T) {
	store := newGatedStore()
	c := New(store, Config{})
	defer c.Stop(context.Background())

	first := make(chan error, 1)
	go func() {
		_, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "first", Qty: 1})
		first <- err
	}()
	<-store.entered // the first call is in flight
	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan error, 1)
	go func() {
		_, err := c.Reserve(ctx, "s", seckill.ReserveRequest{UserID: "impatient", Qty: 1})
		waiter <- err
	}()
	servicetest.WaitFor(t, 30*time.Second, "the impatient request to queue", func() bool { return c.queued("s") == 1 })
	cancel()
	if err := <-waiter; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v", err)
	}
	store.open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	batches, _ := store.stats()
	if total := len(batches); total != 2 {
		t.Fatalf("got %d calls, want 2: the impatient request still runs in its batch", total)
	}
}

func TestStopDrainsThenRefuses(t *testing.T) {
	store := newGatedStore()
	c := New(store, Config{})

	const n = 100
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: fmt.Sprint(i), Qty: 1})
			errs <- err
		}()
	}
	<-store.entered // a call is in flight
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	servicetest.WaitFor(t, 30*time.Second, "Stop to refuse new requests", c.isClosed)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v with a call in flight", err)
	default:
	}
	store.open()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// Every request either ran before Stop returned or was refused; none hangs.
	answered, refused := 0, 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			answered++
		case errors.Is(err, seckill.ErrClosed):
			refused++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	batches, _ := store.stats()
	total := 0
	for _, b := range batches {
		total += b
	}
	if total != answered {
		t.Fatalf("store ran %d requests but %d were answered", total, answered)
	}
	if answered == 0 {
		t.Fatal("no request got through before Stop")
	}
	if _, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "late", Qty: 1}); !errors.Is(err, seckill.ErrClosed) {
		t.Fatalf("after Stop got %v, want ErrClosed", err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStopTimesOutOnAStuckStore(t *testing.T) {
	store := newGatedStore()
	c := New(store, Config{})
	done := make(chan struct{})
	go func() { c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "u", Qty: 1}); close(done) }()
	<-store.entered // the call is in flight and stays there
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	store.open()
	<-done
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkCombiner(b *testing.B) {
	c := New(newFakeStore(), Config{})
	defer c.Stop(context.Background())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Reserve(context.Background(), "s", seckill.ReserveRequest{UserID: "u", Qty: 1}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestHeldBatchWaitsWhileTheNextRuns: with Hold, a batch's requests are
// answered only once its wait ends, and the next batch's store call does
// not wait for that: the lane is free as soon as the call returned.
func TestHeldBatchWaitsWhileTheNextRuns(t *testing.T) {
	store := newFakeStore()
	release := make(chan struct{})
	var holds atomic.Int32
	c := New(store, Config{Hold: func(results []seckill.ReserveResult) func(context.Context) error {
		if holds.Add(1) > 1 {
			return nil // only the first batch is held
		}
		return func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}})
	defer c.Stop(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Reserve(context.Background(), "s1", seckill.ReserveRequest{UserID: "a", Qty: 1})
		first <- err
	}()
	servicetest.WaitFor(t, 10*time.Second, "the first batch's call", func() bool { return holds.Load() == 1 })
	res, err := c.Reserve(context.Background(), "s1", seckill.ReserveRequest{UserID: "b", Qty: 1})
	if err != nil || res.ReservationID != "s1/b" {
		t.Fatalf("second request while the first is held: %+v, %v", res, err)
	}
	select {
	case err := <-first:
		t.Fatalf("the held request was answered (%v) before its wait ended", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the held request after its wait: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	holds.Store(0)
	release = make(chan struct{})
	if _, err := c.Reserve(ctx, "s1", seckill.ReserveRequest{UserID: "c", Qty: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held request whose context ended: %v; want its context's error", err)
	}
}
