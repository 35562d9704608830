package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ackgate"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// The Redis store is the relay's outbox.
var _ Outbox = redis.Outbox{}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A rueidis timer that outlives a closed client by a few seconds.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// fakeBroker records every message of every successful Publish, and fails
// every Publish while told to.
type fakeBroker struct {
	mu        sync.Mutex
	batches   [][]seckill.Message
	at        []time.Time // when each of batches was published
	fail      error
	failed    int
	published int
}

func (b *fakeBroker) Publish(ctx context.Context, msgs []seckill.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		b.failed++
		return b.fail
	}
	b.batches = append(b.batches, slices.Clone(msgs))
	b.at = append(b.at, time.Now())
	b.published += len(msgs)
	return nil
}

func (b *fakeBroker) setFail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail = err
}

func (b *fakeBroker) failedCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

func (b *fakeBroker) publishedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.published
}

// counts returns how many times each message id was published.
func (b *fakeBroker) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := map[string]int{}
	for _, batch := range b.batches {
		for _, m := range batch {
			c[m.ID]++
		}
	}
	return c
}

func (b *fakeBroker) messages() []seckill.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	var all []seckill.Message
	for _, batch := range b.batches {
		all = append(all, batch...)
	}
	return all
}

func (b *fakeBroker) Consume(context.Context, seckill.ConsumeOptions, func(context.Context, []seckill.Delivery)) error {
	return errors.New("fake broker: no consuming")
}

func (b *fakeBroker) ConsumeDeadLetters(context.Context, seckill.ConsumeOptions, func(context.Context, []seckill.DeadLetter) error) error {
	return errors.New("fake broker: no consuming")
}

func (b *fakeBroker) Close() error { return nil }

// backends are the stores the relay is tested on: the embedded default and
// a real Redis.
var backends = []struct {
	name string
	open func(t *testing.T) *redis.Store
}{
	{"Embedded", func(t *testing.T) *redis.Store {
		t.Helper()
		s, err := redis.StartEmbedded(context.Background(), redis.WithKeyPrefix(servicetest.UniqueName("t")))
		if err != nil {
			t.Fatalf("StartEmbedded: %v", err)
		}
		t.Cleanup(s.Close)
		return s
	}},
	{"Redis", func(t *testing.T) *redis.Store { return openRedis(t) }},
}

// openRedis returns a store on a fresh key prefix of the shared Redis, and
// deletes the prefix's keys when the test ends.
func openRedis(t *testing.T, opts ...redis.Option) *redis.Store {
	t.Helper()
	url := servicetest.Redis.URL(t)
	prefix := servicetest.UniqueName("t")
	s, err := redis.New(context.Background(), url, append([]redis.Option{redis.WithKeyPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		if err := redistest.DeletePrefix(url, prefix); err != nil {
			t.Errorf("delete test keys: %v", err)
		}
	})
	return s
}

func forEachBackend(t *testing.T, test func(t *testing.T, s *redis.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open(t))
		})
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testConfig is quick to react: tests wait on it.
func testConfig(t *testing.T, consumer string) Config {
	return Config{
		Group:        "relay",
		Consumer:     consumer,
		BatchSize:    50,
		ClaimMinIdle: 300 * time.Millisecond,
		PollInterval: 5 * time.Millisecond,
		Backoff:      5 * time.Millisecond,
		MaxBackoff:   20 * time.Millisecond,
		Logger:       testLogger(t),
	}
}

// start starts a relay and makes sure it is stopped before the test's
// store closes.
func start(t *testing.T, out Outbox, broker seckill.Broker, cfg Config) *Relay {
	t.Helper()
	r := New(out, broker, cfg)
	r.Start(context.Background())
	t.Cleanup(func() { _ = stopWithin(r, 10*time.Second) })
	return r
}

// stop stops r, failing the test unless it drains within 10 s.
func stop(t *testing.T, r *Relay) {
	t.Helper()
	if err := stopWithin(r, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// startBrokerDown starts a relay on s whose broker fails every Publish
// until told otherwise, and returns once a Publish has failed.
func startBrokerDown(t *testing.T, s Outbox) (*Relay, *fakeBroker) {
	t.Helper()
	broker := &fakeBroker{}
	broker.setFail(errors.New("broker unreachable"))
	r := start(t, s, broker, testConfig(t, "r1"))
	servicetest.WaitFor(t, 30*time.Second, "a failed Publish", func() bool { return broker.failedCalls() >= 1 })
	return r, broker
}

func stopWithin(r *Relay, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return r.Stop(ctx)
}

// crashBeforeAck runs a relay under cfg that dies (its context ends) once
// the broker has confirmed its first batch and before it acks it. It
// returns the relay dead; its Stop is the caller's.
func crashBeforeAck(t *testing.T, s Outbox, broker *fakeBroker, cfg Config) *Relay {
	t.Helper()
	ctx, kill := context.WithCancel(context.Background())
	r := New(s, broker, cfg)
	r.beforeAck = kill
	r.Start(ctx)
	<-ctx.Done()
	return r
}

func preheat(t *testing.T, s *redis.Store, stock int64) *seckill.Sale {
	t.Helper()
	sale := &seckill.Sale{
		ID:            servicetest.UniqueName("sale_"),
		Name:          "Tea gift set",
		Stock:         stock,
		PurchaseLimit: 1,
		StartAt:       time.Now().Add(-time.Hour),
		EndAt:         time.Now().Add(time.Hour),
	}
	if _, err := s.StockStore().Preheat(context.Background(), sale); err != nil {
		t.Fatalf("Preheat: %v", err)
	}
	return sale
}

// reserve makes n reservations of one unit in batches of up to 100, as
// the request combiner would, and returns them by id.
func reserve(t *testing.T, s *redis.Store, saleID string, n int) map[string]seckill.ReserveRequest {
	t.Helper()
	return reserveIn(t, s, saleID, n, 100)
}

// reserveCalls numbers reserveIn's Reserve calls, each an outbox entry:
// the buyers of call c are "call<c>-…" (callOf).
var reserveCalls atomic.Int64

// reserveIn reserves n units, one for each of n fresh buyers, in Reserve
// calls of up to per requests.
func reserveIn(t *testing.T, s *redis.Store, saleID string, n, per int) map[string]seckill.ReserveRequest {
	t.Helper()
	out := map[string]seckill.ReserveRequest{}
	for n > 0 {
		reqs := make([]seckill.ReserveRequest, min(n, per))
		call := reserveCalls.Add(1)
		for i := range reqs {
			reqs[i] = seckill.ReserveRequest{
				ReservationID: seckill.NewReservationID(saleID, time.Now()),
				UserID:        fmt.Sprintf("call%d-%s", call, servicetest.UniqueName("u")),
				Qty:           1,
			}
		}
		res, err := s.StockStore().Reserve(context.Background(), saleID, reqs)
		if err != nil {
			t.Errorf("Reserve: %v", err)
			return out
		}
		for i, r := range res {
			if r.Outcome != seckill.OutcomeReserved {
				t.Errorf("Reserve: results[%d] = %+v; want reserved", i, r)
				return out
			}
			out[reqs[i].ReservationID] = reqs[i]
		}
		n -= len(reqs)
	}
	return out
}

// callOf is the Reserve call (reserveIn) of a published event's buyer.
func callOf(t *testing.T, m seckill.Message) string {
	t.Helper()
	ev, err := brokerpack.DecodeReservationEvent(m.Body)
	if err != nil {
		t.Fatalf("message %s: %v", m.ID, err)
	}
	call, _, _ := strings.Cut(ev.UserID, "-")
	return call
}

// wantOutbox checks a sale's reservations in the outbox and its entries
// pending for the relays' group.
func wantOutbox(t *testing.T, s *redis.Store, saleID string, wantLen, wantPending int64) {
	t.Helper()
	ctx := context.Background()
	if n, err := s.Outbox().OutboxLen(ctx, saleID); err != nil || n != wantLen {
		t.Errorf("sale %s: OutboxLen = %d, %v; want %d", saleID, n, err, wantLen)
	}
	if n, err := s.Outbox().OutboxPending(ctx, saleID, "relay"); err != nil || n != wantPending {
		t.Errorf("sale %s: OutboxPending = %d, %v; want %d", saleID, n, err, wantPending)
	}
}

// wantPublished checks that every reservation reached the broker as a
// well-formed event at least once, and nothing else did; it returns the
// number of duplicates.
func wantPublished(t *testing.T, b *fakeBroker, want map[string]seckill.ReserveRequest) (duplicates int) {
	t.Helper()
	counts := b.counts()
	for id := range want {
		if counts[id] == 0 {
			t.Errorf("reservation %s was never published", id)
			continue
		}
		duplicates += counts[id] - 1
	}
	for id := range counts {
		if _, ok := want[id]; !ok {
			t.Errorf("published %s, which is no reservation of the test", id)
		}
	}
	for _, m := range b.messages() {
		ev, err := brokerpack.DecodeReservationEvent(m.Body)
		if err != nil {
			t.Fatalf("message %s: body %s: %v", m.ID, m.Body, err)
		}
		r, ok := want[m.ID]
		sale, _ := seckill.SaleIDOfReservation(m.ID)
		if ok && (ev.ReservationID != m.ID || ev.SaleID != sale || ev.UserID != r.UserID || ev.Qty != r.Qty ||
			time.Since(ev.ReservedAt) > time.Minute) {
			t.Errorf("message %s = %+v; want the event of %+v", m.ID, ev, r)
		}
	}
	return duplicates
}

func merge(ms ...map[string]seckill.ReserveRequest) map[string]seckill.ReserveRequest {
	out := map[string]seckill.ReserveRequest{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestRelaysEveryReservationOnce: in normal operation every reservation,
// of every sale, reaches the broker exactly once and the outboxes end
// empty, reservations made while the relay runs included.
func TestRelaysEveryReservationOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		a, b := preheat(t, s, 1000), preheat(t, s, 1000)
		before := reserve(t, s, a.ID, 120) // a backlog from before the relay started
		broker := &fakeBroker{}
		var onPublished atomic.Int64
		cfg := testConfig(t, "r1")
		cfg.Block = 50 * time.Millisecond // idle reads wait for entries
		cfg.OnPublished = func(n int) { onPublished.Add(int64(n)) }
		r := start(t, s.Outbox(), broker, cfg)
		var during []map[string]seckill.ReserveRequest
		for range 5 {
			during = append(during, reserve(t, s, a.ID, 37), reserve(t, s, b.ID, 11))
			time.Sleep(10 * time.Millisecond)
		}
		want := merge(append(during, before)...)
		servicetest.WaitFor(t, 30*time.Second, "every reservation published", func() bool { return broker.publishedCount() >= len(want) })
		stop(t, r)
		if dups := wantPublished(t, broker, want); dups != 0 {
			t.Errorf("%d duplicates in normal operation; want 0", dups)
		}
		if got := broker.publishedCount(); got != len(want) {
			t.Errorf("published %d messages; want %d", got, len(want))
		}
		if got := onPublished.Load(); got != int64(len(want)) {
			t.Errorf("OnPublished counted %d; want %d", got, len(want))
		}
		for _, batch := range broker.batches {
			if len(batch) > cfg.BatchSize && callOf(t, batch[0]) != callOf(t, batch[len(batch)-1]) {
				t.Errorf("a Publish of %d messages, from several outbox entries; want at most BatchSize %d, or one entry", len(batch), cfg.BatchSize)
			}
		}
		wantOutbox(t, s, a.ID, 0, 0)
		wantOutbox(t, s, b.ID, 0, 0)
	})
}

// TestCompactEvents: with CompactEvents the relay publishes every event in
// the compact layout, each carrying its reservation.
func TestCompactEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		a := preheat(t, s, 100)
		want := reserve(t, s, a.ID, 30)
		broker := &fakeBroker{}
		cfg := testConfig(t, "compact")
		cfg.CompactEvents = true
		start(t, s.Outbox(), broker, cfg)
		servicetest.WaitFor(t, 30*time.Second, "every reservation published", func() bool { return broker.publishedCount() >= len(want) })
		wantPublished(t, broker, want)
		for _, m := range broker.messages() {
			if !strings.HasPrefix(string(m.Body), "SKE1") {
				t.Errorf("message %s: body %q; want the compact layout", m.ID, m.Body)
			}
		}
	})
}

// TestRelayIsFairAcrossSales: a sale with a deep backlog does not hold up
// another sale's reservations; each pass takes one batch of each.
func TestRelayIsFairAcrossSales(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		big, small := preheat(t, s, 1000), preheat(t, s, 10)
		reserve(t, s, big.ID, 500)
		want := reserve(t, s, small.ID, 1)
		var id string
		for id = range want {
		}
		broker := &fakeBroker{}
		cfg := testConfig(t, "r1")
		cfg.BatchSize = 20
		start(t, s.Outbox(), broker, cfg)
		servicetest.WaitFor(t, 30*time.Second, "the small sale's reservation", func() bool { return broker.counts()[id] > 0 })
		broker.mu.Lock()
		call := slices.IndexFunc(broker.batches, func(b []seckill.Message) bool {
			return slices.ContainsFunc(b, func(m seckill.Message) bool { return m.ID == id })
		})
		broker.mu.Unlock()
		if call > 1 {
			t.Errorf("the small sale's reservation came in Publish call %d; want one of the first 2 (one batch per sale per pass)", call+1)
		}
	})
}

// TestBrokerOutage: while the broker fails nothing is acked, the entries
// wait in the group's pending list; once it recovers everything is
// published and nothing is lost.
func TestBrokerOutage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		sale := preheat(t, s, 1000)
		want := reserve(t, s, sale.ID, 130)
		r, broker := startBrokerDown(t, s.Outbox())
		servicetest.WaitFor(t, 30*time.Second, "several failed Publish calls", func() bool { return broker.failedCalls() >= 5 })
		more := reserve(t, s, sale.ID, 20) // the API goes on reserving meanwhile
		servicetest.WaitFor(t, 30*time.Second, "more failed Publish calls", func() bool { return broker.failedCalls() >= 10 })
		if n := broker.publishedCount(); n != 0 {
			t.Fatalf("published %d while the broker failed", n)
		}
		// Nothing acked: every entry is still in the stream, and the
		// entries of the first read (the backlog's two, of 100 and 30
		// reservations) are pending for this relay, which retries them
		// rather than reading further.
		if n, err := s.Outbox().OutboxLen(context.Background(), sale.ID); err != nil || n != 150 {
			t.Errorf("OutboxLen during the outage = %d, %v; want 150", n, err)
		}
		if n, err := s.Outbox().OutboxPending(context.Background(), sale.ID, "relay"); err != nil || n != 2 {
			t.Errorf("OutboxPending during the outage = %d, %v; want the first read's 2 entries", n, err)
		}

		broker.setFail(nil)
		want = merge(want, more)
		servicetest.WaitFor(t, 30*time.Second, "everything published after recovery", func() bool { return broker.publishedCount() >= len(want) })
		stop(t, r)
		if dups := wantPublished(t, broker, want); dups != 0 {
			t.Errorf("%d duplicates; want 0 (a failed Publish stored nothing here)", dups)
		}
		wantOutbox(t, s, sale.ID, 0, 0)
	})
}

// TestCrashBetweenPublishAndAck: a relay dies after the broker confirmed a
// batch and before it acked it. A second relay, under another name,
// reclaims the entries once they are ClaimMinIdle old and publishes them
// again: nothing is lost, and the duplicates are exactly that batch.
func TestCrashBetweenPublishAndAck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		sale := preheat(t, s, 1000)
		want := reserve(t, s, sale.ID, 30)
		broker := &fakeBroker{}

		cfg := testConfig(t, "doomed")
		cfg.BatchSize = 500
		// The entries' idle time counts from their delivery to the doomed
		// relay, which comes after this instant (and before the crash).
		startedAt := time.Now()
		doomed := crashBeforeAck(t, s.Outbox(), broker, cfg)
		if err := stopWithin(doomed, 10*time.Second); err == nil {
			t.Error("Stop of the killed relay = nil; want an error: it never drained")
		}
		if err := stopWithin(doomed, 10*time.Second); err == nil {
			t.Error("second Stop of the killed relay = nil; want the same error")
		}
		if n := broker.publishedCount(); n != len(want) {
			t.Fatalf("the killed relay published %d; want all %d before dying", n, len(want))
		}
		wantOutbox(t, s, sale.ID, int64(len(want)), 1)

		more := reserve(t, s, sale.ID, 5) // never read by the dead relay
		want = merge(want, more)
		heirCfg := testConfig(t, "heir")
		var takeovers, reclaimed atomic.Int64
		heirCfg.OnReclaimed = func(s string, n int) {
			if s != sale.ID {
				t.Errorf("OnReclaimed for sale %q; want %q", s, sale.ID)
			}
			takeovers.Add(1)
			reclaimed.Add(int64(n))
		}
		heir := start(t, s.Outbox(), broker, heirCfg)
		servicetest.WaitFor(t, 30*time.Second, "everything published again", func() bool { return broker.publishedCount() >= 30+len(want) })
		if took := time.Since(startedAt); took < 300*time.Millisecond {
			t.Errorf("the entries were reclaimed %s after the doomed relay started; want no sooner than ClaimMinIdle (300ms) after their delivery: a live relay's batch must be left alone", took)
		}
		stop(t, heir)
		if dups := wantPublished(t, broker, want); dups != 30 {
			t.Errorf("%d duplicates; want exactly the 30 of the batch the dead relay never acked", dups)
		}
		if takeovers.Load() < 1 || reclaimed.Load() != 30 {
			t.Errorf("OnReclaimed told of %d takeovers, %d entries; want at least 1, exactly the 30 the dead relay held", takeovers.Load(), reclaimed.Load())
		}
		for id := range more {
			if n := broker.counts()[id]; n != 1 {
				t.Errorf("reservation %s made after the crash published %d times; want 1", id, n)
			}
		}
		wantOutbox(t, s, sale.ID, 0, 0)
	})
}

// TestWholeEntries: the relay publishes whole outbox entries (each the
// reservations of one Reserve call), as many as fit in BatchSize, or an
// entry larger than BatchSize alone; what it read beyond them waits,
// pending, for its next pass, and every reservation is published once.
func TestWholeEntries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		sale := preheat(t, s, 1000)
		want := merge(reserveIn(t, s, sale.ID, 30, 30), reserveIn(t, s, sale.ID, 30, 30),
			reserveIn(t, s, sale.ID, 80, 80), reserveIn(t, s, sale.ID, 5, 5))
		broker := &fakeBroker{}
		r := start(t, s.Outbox(), broker, testConfig(t, "r1")) // BatchSize 50
		servicetest.WaitFor(t, 30*time.Second, "every reservation published", func() bool { return broker.publishedCount() >= len(want) })
		stop(t, r)
		if dups := wantPublished(t, broker, want); dups != 0 {
			t.Errorf("%d duplicates; want 0", dups)
		}
		broker.mu.Lock()
		var sizes []int
		for _, b := range broker.batches {
			sizes = append(sizes, len(b))
		}
		broker.mu.Unlock()
		if fmt.Sprint(sizes) != "[30 30 80 5]" {
			t.Errorf("Publish sizes %v; want [30 30 80 5]: whole entries up to 50, the entry of 80 alone", sizes)
		}
		wantOutbox(t, s, sale.ID, 0, 0)
	})
}

// TestRestartUnderSameName: a relay restarted under its old name publishes
// its own unacked entries at once, without waiting ClaimMinIdle.
func TestRestartUnderSameName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		sale := preheat(t, s, 1000)
		want := reserve(t, s, sale.ID, 10)
		broker := &fakeBroker{}
		cfg := testConfig(t, "r1")
		cfg.ClaimMinIdle = time.Hour
		_ = crashBeforeAck(t, s.Outbox(), broker, cfg).Stop(context.Background())

		again := start(t, s.Outbox(), broker, cfg)
		servicetest.WaitFor(t, 30*time.Second, "the batch published again", func() bool { return broker.publishedCount() >= 20 })
		stop(t, again)
		if dups := wantPublished(t, broker, want); dups != 10 {
			t.Errorf("%d duplicates; want 10", dups)
		}
		wantOutbox(t, s, sale.ID, 0, 0)
	})
}

// TestStopDrains: Stop returns only once every outbox is empty, relaying
// through a backlog and waiting out a broker outage; a second Stop is fine.
func TestStopDrains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		a, b := preheat(t, s, 1000), preheat(t, s, 1000)
		want := merge(reserve(t, s, a.ID, 400), reserve(t, s, b.ID, 100))
		r, broker := startBrokerDown(t, s.Outbox())
		stopped := make(chan error, 1)
		before := broker.failedCalls()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			stopped <- r.Stop(ctx)
		}()
		// The sentinel: two more failed publishes, so the relay went on
		// trying after Stop was called, and Stop had not returned.
		servicetest.WaitFor(t, 30*time.Second, "publishes failing after Stop", func() bool { return broker.failedCalls() >= before+2 })
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v while the broker was down and the outboxes full", err)
		default:
		}
		broker.setFail(nil)
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		// Stop returned: everything is on the broker, nothing is left.
		if dups := wantPublished(t, broker, want); dups != 0 {
			t.Errorf("%d duplicates; want 0", dups)
		}
		wantOutbox(t, s, a.ID, 0, 0)
		wantOutbox(t, s, b.ID, 0, 0)
		if err := r.Stop(context.Background()); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

// TestStopGivesUp: when the outboxes cannot be drained before Stop's
// context ends, Stop abandons the relay (its goroutine ends) and says so;
// the entries stay for the next relay.
func TestStopGivesUp(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		sale := preheat(t, s, 1000)
		reserve(t, s, sale.ID, 20)
		r, _ := startBrokerDown(t, s.Outbox())
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := r.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop = %v; want an error wrapping context.DeadlineExceeded", err)
		}
		if err := r.Stop(context.Background()); err == nil {
			t.Error("second Stop = nil; want the outboxes still reported undrained")
		}
		wantOutbox(t, s, sale.ID, 20, 1)
	})
}

func TestStopWithoutStart(t *testing.T) {
	r := New(nil, nil, Config{})
	for range 2 {
		if err := r.Stop(context.Background()); err != nil {
			t.Fatalf("Stop without Start: %v", err)
		}
	}
	r.Start(context.Background()) // after Stop: does nothing
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// fakeOutbox serves fixed entries of one sale, for what the Redis store
// cannot be made to produce on demand.
type fakeOutbox struct {
	mu      sync.Mutex
	sale    string
	entries []seckill.OutboxEntry // not yet read
	pending map[string]seckill.OutboxEntry
	acked   []string
}

func (f *fakeOutbox) OutboxSales(context.Context) ([]string, error) { return []string{f.sale}, nil }
func (f *fakeOutbox) ForgetOutbox(context.Context, string) (bool, error) {
	return false, nil
}

func (f *fakeOutbox) OutboxLen(context.Context, string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.entries) + len(f.pending)), nil
}

func (f *fakeOutbox) ReadOutbox(_ context.Context, _, _, _ string, count int, _ time.Duration) ([]seckill.OutboxEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(count, len(f.entries))
	out := f.entries[:n]
	f.entries = f.entries[n:]
	for _, e := range out {
		f.pending[e.StreamID] = e
	}
	return out, nil
}

func (f *fakeOutbox) ReadPendingOutbox(context.Context, string, string, string, int) ([]seckill.OutboxEntry, error) {
	return nil, nil
}

func (f *fakeOutbox) ClaimStaleOutbox(context.Context, string, string, string, time.Duration, int) ([]seckill.OutboxEntry, error) {
	return nil, nil
}

func (f *fakeOutbox) AckOutbox(_ context.Context, _, _ string, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		delete(f.pending, id)
		f.acked = append(f.acked, id)
	}
	return nil
}

// TestMalformedEntryPublishedRaw: an entry the store could not decode is
// neither dropped nor left to block the outbox: it is published raw, in a
// body the order writer refuses (so it ends in failed_orders for an
// operator), under the reservation id when the entry names a valid one.
func TestMalformedEntryPublishedRaw(t *testing.T) {
	sale := "sale1"
	rid := seckill.NewReservationID(sale, time.Now())
	good := seckill.ReservationEvent{ReservationID: seckill.NewReservationID(sale, time.Now()), SaleID: sale, UserID: "u1", Qty: 1, ReservedAt: time.Now()}
	good2 := good
	good2.ReservationID = seckill.NewReservationID(sale, time.Now())
	out := &fakeOutbox{sale: sale, pending: map[string]seckill.OutboxEntry{}, entries: []seckill.OutboxEntry{
		{StreamID: "1-0", Event: seckill.ReservationEvent{SaleID: sale, ReservationID: rid}, Err: errors.New("invalid qty \"x\""),
			Fields: map[string]string{"reservation_id": rid, "user_id": "u1", "qty": "x"}},
		{StreamID: "2-0", Event: seckill.ReservationEvent{SaleID: sale}, Err: errors.New("entry deleted from the stream while pending")},
		{StreamID: "3-0", Event: good},
		// A batch entry whose second line names no valid reservation.
		{StreamID: "4-0", Event: good2},
		{StreamID: "4-0", Seq: 1, Event: seckill.ReservationEvent{SaleID: sale}, Err: errors.New("line 2: not a reservation id"),
			Fields: map[string]string{"reservation_id": sale + ".x", "user_id": "u2", "qty": "1"}},
	}}
	broker := &fakeBroker{}
	r := start(t, out, broker, testConfig(t, "r1"))
	stop(t, r)
	msgs := broker.messages()
	if len(msgs) != 5 {
		t.Fatalf("published %d messages; want 5", len(msgs))
	}
	wantIDs := []string{rid, sale + ":outbox:2-0", good.ReservationID, good2.ReservationID, sale + ":outbox:4-0:1"}
	for i, m := range msgs {
		if m.ID != wantIDs[i] {
			t.Errorf("message %d id = %q; want %q", i, m.ID, wantIDs[i])
		}
	}
	for _, m := range append(msgs[:2:2], msgs[4]) {
		var ev seckill.ReservationEvent
		if err := json.Unmarshal(m.Body, &ev); err == nil && ev.ReservationID != "" {
			t.Errorf("raw message %s decodes as a reservation event %+v; the order writer must refuse it", m.ID, ev)
		}
		var raw rawEntry
		if err := json.Unmarshal(m.Body, &raw); err != nil || raw.SaleID != sale || raw.Malformed == "" || raw.OutboxID == "" {
			t.Errorf("raw message %s body %s: want sale, outbox id and the reason", m.ID, m.Body)
		}
	}
	if fmt.Sprint(out.acked) != "[1-0 2-0 3-0 4-0]" {
		t.Errorf("acked %v; want every entry once published", out.acked)
	}
}

// passCounter is an Outbox that counts the relay's reads of new entries
// that came back empty: after one, the relay is idle.
type passCounter struct {
	Outbox
	empty atomic.Int64
}

func (o *passCounter) ReadOutbox(ctx context.Context, saleID, group, consumer string, count int, block time.Duration) ([]seckill.OutboxEntry, error) {
	es, err := o.Outbox.ReadOutbox(ctx, saleID, group, consumer, count, block)
	if err == nil && len(es) == 0 {
		o.empty.Add(1)
	}
	return es, err
}

// openWakingRedis opens a stock store that counts the reservations it
// appends to outboxes and signals the returned channel on every reserve
// that appends, as serve wires the relay's Appended and Wake.
func openWakingRedis(t *testing.T) (*redis.Store, chan struct{}, *atomic.Uint64) {
	t.Helper()
	wake := make(chan struct{}, 1)
	appended := new(atomic.Uint64)
	s := openRedis(t, redis.WithOnOutboxAppend(func(n int) {
		appended.Add(uint64(n))
		select {
		case wake <- struct{}{}:
		default:
		}
	}))
	return s, wake, appended
}

// TestWakeEndsTheIdlePause: an idle relay whose poll would come after an
// hour relays new entries at once when Wake is signalled, which the stock
// store does on every reserve that appends to an outbox
// (redis.WithOnOutboxAppend).
func TestWakeEndsTheIdlePause(t *testing.T) {
	s, wake, _ := openWakingRedis(t)
	sale := preheat(t, s, 100)
	out := &passCounter{Outbox: s.Outbox()}
	broker := &fakeBroker{}
	cfg := testConfig(t, "wake")
	cfg.PollInterval = time.Hour
	cfg.Wake = wake
	start(t, out, broker, cfg)
	servicetest.WaitFor(t, 10*time.Second, "the relay's first pass", func() bool { return out.empty.Load() > 0 })
	// Only a wake brings the next pass within the test's time.
	want := reserve(t, s, sale.ID, 7)
	servicetest.WaitFor(t, 10*time.Second, "the reservations published", func() bool { return broker.publishedCount() >= len(want) })
	wantPublished(t, broker, want)
	servicetest.WaitFor(t, 10*time.Second, "the outbox acknowledged", func() bool {
		n, err := s.Outbox().OutboxPending(context.Background(), sale.ID, "relay")
		return err == nil && n == 0
	})
}

// TestLingerGathersABatch: under Linger, the pass after one that found
// entries starts no sooner than Linger after it, however soon a wake
// comes, so the entries appended meanwhile go in one batch; the first
// entry after an idle spell goes at once (a wake, not a poll, brings it
// within the test's time).
func TestLingerGathersABatch(t *testing.T) {
	s, wake, _ := openWakingRedis(t)
	sale := preheat(t, s, 100)
	out := &passCounter{Outbox: s.Outbox()}
	broker := &fakeBroker{}
	const linger = time.Second
	cfg := testConfig(t, "linger")
	cfg.PollInterval = time.Hour
	cfg.Linger = linger
	cfg.Wake = wake
	start(t, out, broker, cfg)
	oneThenMore(t, s, sale.ID, out, broker, 3, 4)
	broker.mu.Lock()
	defer broker.mu.Unlock()
	if len(broker.batches) != 2 || len(broker.batches[1]) != 7 {
		t.Errorf("published batches of %v; want 1 then 7", batchSizes(broker.batches))
	}
	// The second pass began at least linger after the first began, which
	// was before its publish.
	if gap := broker.at[len(broker.at)-1].Sub(broker.at[0]); gap < linger/2 {
		t.Errorf("the second batch came %s after the first; want about %s (Linger)", gap, linger)
	}
}

// TestLingerEndsOnceABatchWaits: a relay lingering for an hour goes on as
// soon as this process has appended a full batch since its last pass
// began (Config.Appended, counted by the stock store's hook as serve
// wires it), and not before: the 4 reservations appended first wait for
// the 6 that fill the batch of 10, and all 10 go out together.
func TestLingerEndsOnceABatchWaits(t *testing.T) {
	s, wake, appended := openWakingRedis(t)
	sale := preheat(t, s, 100)
	out := &passCounter{Outbox: s.Outbox()}
	broker := &fakeBroker{}
	cfg := testConfig(t, "lingerfull")
	cfg.PollInterval, cfg.Linger, cfg.BatchSize = time.Hour, time.Hour, 10
	cfg.Wake, cfg.Appended = wake, appended.Load
	start(t, out, broker, cfg)
	oneThenMore(t, s, sale.ID, out, broker, 4, 6)
	broker.mu.Lock()
	defer broker.mu.Unlock()
	if len(broker.batches) != 2 || len(broker.batches[1]) != 10 {
		t.Errorf("published batches of %v; want 1 then 10", batchSizes(broker.batches))
	}
}

// oneThenMore waits for the started relay's first (empty) pass, makes one
// reservation and waits for it to be published, then makes reservations
// in calls of the sizes more and waits until the broker holds exactly all
// of them.
func oneThenMore(t *testing.T, s *redis.Store, saleID string, out *passCounter, broker *fakeBroker, more ...int) {
	t.Helper()
	servicetest.WaitFor(t, 10*time.Second, "the relay's first pass", func() bool { return out.empty.Load() > 0 })
	want := reserve(t, s, saleID, 1)
	servicetest.WaitFor(t, 10*time.Second, "the first reservation published", func() bool { return broker.publishedCount() >= 1 })
	for _, n := range more {
		want = merge(want, reserve(t, s, saleID, n))
	}
	servicetest.WaitFor(t, 10*time.Second, "the others published", func() bool { return broker.publishedCount() >= len(want) })
	wantPublished(t, broker, want)
}

func batchSizes(batches [][]seckill.Message) []int {
	n := make([]int, len(batches))
	for i, b := range batches {
		n[i] = len(b)
	}
	return n
}

// TestNoLingerWhileBatchesFill: a relay whose batch took what it could hold
// (more entries wait) goes on at once, Linger or not: lingering after every
// full batch would cap it at one batch per Linger, below a stampede's
// rate. Here four batches of whole entries of 30 (two each, 60 of
// BatchSize 80, and the last one) go out well before a single Linger of an
// hour has passed.
func TestNoLingerWhileBatchesFill(t *testing.T) {
	s := openRedis(t)
	sale := preheat(t, s, 1000)
	want := reserveIn(t, s, sale.ID, 210, 30)
	broker := &fakeBroker{}
	cfg := testConfig(t, "busy")
	cfg.BatchSize = 80
	cfg.Linger = time.Hour
	start(t, s.Outbox(), broker, cfg)
	servicetest.WaitFor(t, 30*time.Second, "every reservation published", func() bool { return broker.publishedCount() >= len(want) })
	wantPublished(t, broker, want)
	broker.mu.Lock()
	defer broker.mu.Unlock()
	if sizes := batchSizes(broker.batches); fmt.Sprint(sizes) != "[60 60 60 30]" {
		t.Errorf("published batches of %v; want [60 60 60 30]", sizes)
	}
}

// TestProgressStoresOnlyWhatIsPublished: the relay stores a mark only
// once every entry written before it was taken is confirmed by the
// broker. While the broker fails, a ticket taken after the reserves is not
// stored; once it recovers the ticket is stored, and by then every one of
// those reservations is published, over several passes.
func TestProgressStoresOnlyWhatIsPublished(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s *redis.Store) {
		sale := preheat(t, s, 1000)
		gate := ackgate.New()
		broker := &fakeBroker{}
		broker.setFail(errors.New("broker unreachable"))
		cfg := testConfig(t, "r1")
		cfg.BatchSize = 40 // an entry of 100 alone, then one of 30: two passes at least
		cfg.Progress = gate
		want := reserve(t, s, sale.ID, 130)
		gate.Appended()
		ticket := gate.Ticket()
		start(t, s.Outbox(), broker, cfg)
		servicetest.WaitFor(t, 30*time.Second, "failed Publish calls", func() bool { return broker.failedCalls() >= 3 })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := gate.Wait(ctx, ticket)
		cancel()
		if seckill.ErrorCode(err) != seckill.ETRYLATER {
			t.Fatalf("Wait while the broker fails = %v; want try_later", err)
		}
		broker.setFail(nil)
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := gate.Wait(ctx, ticket); err != nil {
			t.Fatalf("Wait after the broker recovered: %v", err)
		}
		if got := broker.publishedCount(); got < len(want) {
			t.Fatalf("the ticket was stored with %d of %d reservations published", got, len(want))
		}
		wantPublished(t, broker, want)
	})
}
