package restore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore keeps orders and restore requests in memory with the port's
// semantics.
type fakeStore struct {
	mu       sync.Mutex
	orders   map[string]seckill.OrderStatus
	requests map[string]*seckill.RestoreRequest
	stock    int64
	batches  int // RestoreOrders calls
}

func newFakeStore() *fakeStore {
	return &fakeStore{orders: map[string]seckill.OrderStatus{}, requests: map[string]*seckill.RestoreRequest{}}
}

func (f *fakeStore) RestoreOrder(_ context.Context, id, reason string, now time.Time) (*seckill.Order, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.orders[id]
	switch {
	case !ok:
		return nil, false, seckill.ErrNotFound
	case st == seckill.OrderPaid:
		return nil, false, seckill.Errorf(seckill.ESTATECONFLICT, "paid")
	case st == seckill.OrderCancelled:
		return &seckill.Order{ReservationID: id, Status: st}, false, nil
	}
	f.orders[id] = seckill.OrderCancelled
	f.stock++
	f.requests[id] = &seckill.RestoreRequest{ReservationID: id, Reason: reason, State: seckill.RestoreStateRedisPending, CreatedAt: now}
	return &seckill.Order{ReservationID: id, Status: seckill.OrderCancelled}, true, nil
}

func (f *fakeStore) ParkRestore(_ context.Context, id, sale, reason string, now time.Time) (*seckill.RestoreRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.requests[id]; ok {
		c := *r
		return &c, nil
	}
	r := &seckill.RestoreRequest{ReservationID: id, SaleID: sale, Reason: reason, State: seckill.RestoreStateParked, CreatedAt: now}
	f.requests[id] = r
	c := *r
	return &c, nil
}

// land is the order writer persisting a reservation: a parked restore
// makes it land cancelled.
func (f *fakeStore) land(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.requests[id]; ok && r.State == seckill.RestoreStateParked {
		f.orders[id] = seckill.OrderCancelled
		r.State = seckill.RestoreStateRedisPending
		return
	}
	f.orders[id] = seckill.OrderPlaced
}

func (f *fakeStore) RestoreRequest(_ context.Context, id string) (*seckill.RestoreRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.requests[id]
	if !ok {
		return nil, seckill.ErrNotFound
	}
	c := *r
	return &c, nil
}

func (f *fakeStore) RestoreRequests(_ context.Context, state seckill.RestoreState, _ int) ([]*seckill.RestoreRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*seckill.RestoreRequest
	for _, r := range f.requests {
		if r.State == state {
			c := *r
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeStore) UpdateRestore(_ context.Context, id string, state seckill.RestoreState, lastErr string, alerted bool, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.requests[id]
	r.State, r.LastError = state, lastErr
	r.Attempts++
	if alerted && r.AlertedAt.IsZero() {
		r.AlertedAt = now
	}
	return nil
}

func (f *fakeStore) request(id string) seckill.RestoreRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.requests[id]
}

type fakeStock struct {
	mu        sync.Mutex
	active    map[string]bool
	down      bool
	restores  int
	batches   int // RestoreReservations calls
	published []string
}

func (f *fakeStock) RestoreReservation(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errors.New("redis: connection refused")
	}
	active, known := f.active[id]
	if !known {
		return false, seckill.ErrNotFound
	}
	if !active {
		return false, nil
	}
	f.active[id] = false
	f.restores++
	return true, nil
}

func (f *fakeStock) PublishRestocked(_ context.Context, sale string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, sale)
	return nil
}

// SubscribeRestocked is not the restore path's: the fake has no feed.
func (f *fakeStock) SubscribeRestocked(ctx context.Context, _ func(string)) error {
	<-ctx.Done()
	return nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup(t *testing.T) (*Service, *fakeStore, *fakeStock, *clock, string) {
	t.Helper()
	c := &clock{t: time.Date(2026, 8, 20, 9, 0, 0, 0, time.UTC)}
	store, stock := newFakeStore(), &fakeStock{active: map[string]bool{}}
	id := seckill.NewReservationID("tea", c.t)
	stock.active[id] = true
	return New(store, stock, Config{Now: c.now}), store, stock, c, id
}

func TestRestoreOrderedThenAgain(t *testing.T) {
	s, store, stock, _, id := setup(t)
	store.orders[id] = seckill.OrderPlaced
	var restocked []string
	s.cfg.OnRestocked = func(sale string) { restocked = append(restocked, sale) }

	res, err := s.Restore(context.Background(), id, "operator")
	if err != nil || res != seckill.Restored {
		t.Fatalf("first restore: %v, %v", res, err)
	}
	if store.stock != 1 || stock.restores != 1 || store.request(id).State != seckill.RestoreStateDone {
		t.Fatalf("after restore: db stock %d, redis restores %d, request %+v", store.stock, stock.restores, store.request(id))
	}
	if len(restocked) != 1 || len(stock.published) != 1 || stock.published[0] != "tea" {
		t.Fatalf("restock not announced: local %v, published %v", restocked, stock.published)
	}
	res, err = s.Restore(context.Background(), id, "operator")
	if err != nil || res != seckill.AlreadyRestored {
		t.Fatalf("second restore: %v, %v", res, err)
	}
	if store.stock != 1 || stock.restores != 1 {
		t.Fatalf("second restore changed something: db stock %d, redis restores %d", store.stock, stock.restores)
	}
}

func TestConcurrentRestoresRestoreOnce(t *testing.T) {
	s, store, stock, _, id := setup(t)
	store.orders[id] = seckill.OrderPlaced
	results := make(chan seckill.RestoreResult, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Restore(context.Background(), id, "race")
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	n := 0
	for r := range results {
		if r == seckill.Restored {
			n++
		}
	}
	if n != 1 || store.stock != 1 || stock.restores != 1 {
		t.Fatalf("%d restored answers, db stock %d, redis restores %d; want 1, 1, 1", n, store.stock, stock.restores)
	}
}

func TestPaidAndMalformed(t *testing.T) {
	s, store, _, _, id := setup(t)
	store.orders[id] = seckill.OrderPaid
	if _, err := s.Restore(context.Background(), id, "x"); seckill.ErrorCode(err) != seckill.ESTATECONFLICT {
		t.Fatalf("restore of a paid order: %v, want state_conflict", err)
	}
	if _, err := s.Restore(context.Background(), "not-an-id", "x"); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Fatalf("malformed id: %v, want invalid_request", err)
	}
}

func TestRedisDownLeavesPendingThenRetries(t *testing.T) {
	s, store, stock, _, id := setup(t)
	store.orders[id] = seckill.OrderPlaced
	stock.down = true
	res, err := s.Restore(context.Background(), id, "operator")
	if err != nil || res != seckill.Restored {
		t.Fatalf("restore with Redis down: %v, %v; the database step decides", res, err)
	}
	if r := store.request(id); r.State != seckill.RestoreStateRedisPending || r.LastError == "" {
		t.Fatalf("request %+v, want redis_pending with the error", r)
	}
	if err := s.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if store.request(id).State != seckill.RestoreStateRedisPending || stock.restores != 0 {
		t.Fatal("a retry with Redis still down changed something")
	}
	stock.down = false
	if err := s.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if store.request(id).State != seckill.RestoreStateDone || stock.restores != 1 || len(stock.published) != 1 {
		t.Fatalf("after Redis came back: request %+v, restores %d", store.request(id), stock.restores)
	}
}

func TestParkedUntilTheOrderLands(t *testing.T) {
	s, store, stock, _, id := setup(t)
	res, err := s.Restore(context.Background(), id, "buyer")
	if err != nil || res != seckill.RestoreParked {
		t.Fatalf("restore before the order: %v, %v; want parked", res, err)
	}
	if res, _ := s.Restore(context.Background(), id, "buyer"); res != seckill.RestoreParked {
		t.Fatalf("second early restore: %v, want parked again", res)
	}
	store.land(id)
	if err := s.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if store.orders[id] != seckill.OrderCancelled || store.stock != 0 || stock.restores != 1 || store.request(id).State != seckill.RestoreStateDone {
		t.Fatalf("after the order landed: order %s, db stock %d, redis restores %d, request %+v",
			store.orders[id], store.stock, stock.restores, store.request(id))
	}
	if res, _ := s.Restore(context.Background(), id, "buyer"); res != seckill.AlreadyRestored {
		t.Fatalf("restore after completion: %v", res)
	}
}

func TestParkedTooLongAlertsOnce(t *testing.T) {
	s, store, _, c, _ := setup(t)
	ghost := seckill.NewReservationID("tea", c.t) // never reserved anywhere
	var alerts []string
	s.cfg.OnAlert = func(r *seckill.RestoreRequest) { alerts = append(alerts, r.ReservationID) }
	if res, _ := s.Restore(context.Background(), ghost, "operator"); res != seckill.RestoreParked {
		t.Fatalf("restore of an unknown reservation: %v, want parked", res)
	}
	c.t = c.t.Add(59 * time.Minute)
	if err := s.Retry(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 0 {
		t.Fatalf("alerted after 59 minutes: %v", alerts)
	}
	c.t = c.t.Add(time.Minute)
	for range 3 {
		if err := s.Retry(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(alerts) != 1 || alerts[0] != ghost {
		t.Fatalf("alerts after an hour: %v, want exactly one for %s", alerts, ghost)
	}
	if r := store.request(ghost); r.AlertedAt.IsZero() || r.State != seckill.RestoreStateParked {
		t.Fatalf("request %+v, want still parked and alerted", r)
	}
}

func TestNoRedisRecordIsDone(t *testing.T) {
	s, store, stock, _, id := setup(t)
	delete(stock.active, id)
	store.orders[id] = seckill.OrderPlaced
	if res, err := s.Restore(context.Background(), id, "op"); err != nil || res != seckill.Restored {
		t.Fatalf("%v, %v", res, err)
	}
	if r := store.request(id); r.State != seckill.RestoreStateDone || r.LastError == "" {
		t.Fatalf("request %+v, want done with a note", r)
	}
}

func TestStartKickStop(t *testing.T) {
	s, store, stock, _, id := setup(t)
	s.cfg.RetryInterval = time.Hour // only Kick can run a pass
	store.orders[id] = seckill.OrderPlaced
	stock.down = true
	if _, err := s.Restore(context.Background(), id, "op"); err != nil {
		t.Fatal(err)
	}
	stock.mu.Lock()
	stock.down = false
	stock.mu.Unlock()
	s.Start(context.Background())
	s.Start(context.Background()) // does nothing; goleak would see a second loop
	s.Kick()
	servicetest.Eventually(30*time.Second, func() bool { return store.request(id).State == seckill.RestoreStateDone })
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if store.request(id).State != seckill.RestoreStateDone {
		t.Fatal("Kick did not run a retry pass")
	}
}

// The batch methods of the fakes do what the single ones do, in turn, as
// the ports promise.

func (f *fakeStore) RestoreOrders(ctx context.Context, _ string, ids []string, reason string, now time.Time) ([]seckill.OrderRestore, error) {
	f.mu.Lock()
	f.batches++
	f.mu.Unlock()
	out := make([]seckill.OrderRestore, len(ids))
	for i, id := range ids {
		out[i].Order, out[i].Changed, out[i].Err = f.RestoreOrder(ctx, id, reason, now)
	}
	return out, nil
}

func (f *fakeStore) FinishRestores(ctx context.Context, ids []string, lastErr string, now time.Time) error {
	for _, id := range ids {
		if err := f.UpdateRestore(ctx, id, seckill.RestoreStateDone, lastErr, false, now); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeStock) RestoreReservations(ctx context.Context, _ string, ids []string) ([]seckill.ReservationRestore, error) {
	f.mu.Lock()
	f.batches++
	down := f.down
	f.mu.Unlock()
	if down {
		return nil, errors.New("redis: connection refused")
	}
	out := make([]seckill.ReservationRestore, len(ids))
	for i, id := range ids {
		out[i].Restored, out[i].Err = f.RestoreReservation(ctx, id)
	}
	return out, nil
}
