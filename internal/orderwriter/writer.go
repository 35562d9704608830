// Package orderwriter owns the last hop of a claim: it consumes reservation
// events from the broker and persists them as orders, a batch per database
// transaction, and it turns every message the broker gave up on into a
// failed_orders row with an alert. Between the two, no claim is dropped:
// a message is acknowledged only once its order (or failed order) is
// committed.
package orderwriter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Store is the part of seckill.OrderStore the writer uses, plus a health
// check that tells a database outage from a bad message.
type Store interface {
	PersistReservations(ctx context.Context, saleID string, events []seckill.ReservationEvent, now time.Time, payTimeout time.Duration) ([]seckill.PersistOutcome, error)
	RecordFailedOrder(ctx context.Context, f *seckill.FailedOrder) error
	Ping(ctx context.Context) error
}

// Consumer is the part of seckill.Broker the writer uses.
type Consumer interface {
	Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.Delivery)) error
	ConsumeDeadLetters(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.DeadLetter) error) error
}

// Config tunes a Writer. Zero values take the defaults.
type Config struct {
	PayTimeout time.Duration // default 15m
	Consume    seckill.ConsumeOptions
	// Consumers is the number of concurrent consume loops (competing
	// consumers within this process). Default 2.
	Consumers int
	// OutageBackoff is the first wait while the database is down; it
	// doubles up to 5s. Default 100ms.
	OutageBackoff time.Duration
	// CallTimeout bounds every call to the store: a database that went
	// silent (a cut network, a paused server) fails the call instead of
	// holding the batch for as long as TCP takes to notice. The batch is
	// then tried again from the start, as in an outage. Default 10s.
	CallTimeout time.Duration
	// ReleaseAfter, if positive, is how long a batch is held while the
	// database is unavailable to this process before its deliveries are
	// given back (seckill.Releaser: no attempt spent) for a node that
	// reaches the database; while this process's database stays out of
	// reach, later batches are given back at once. 0 holds every batch
	// until the database answers. A delivery that cannot be released is
	// retried (one attempt spent).
	ReleaseAfter time.Duration
	Now          func() time.Time
	Logger       *slog.Logger
	// Observe, if set, is told what each persisted batch did.
	Observe func(created, duplicate, rejected int)
	// OnFailed, if set, is told of every failed order recorded.
	OnFailed func(f *seckill.FailedOrder)
	// AfterPersist, if set, is called after every batch that created
	// orders: the restore service finishes restores parked for them.
	AfterPersist func()
}

// Writer is the order writer. Start it once; Stop drains it.
type Writer struct {
	store    Store
	consumer Consumer
	cfg      Config

	// down is set while the database has been out of this process's reach
	// since the last batch gave up on it (ReleaseAfter).
	down   atomic.Bool
	downAt atomic.Int64 // unix ns of the last failed ping while down

	sales  saleQueues
	worker startstop.Worker
}

// saleQueues holds, per sale, the batches waiting to be persisted and the
// mutex of the one transaction of the sale this process runs at a time,
// while anyone holds or waits for them.
type saleQueues struct {
	mu     sync.Mutex
	queues map[string]*saleQueue
}

type saleQueue struct {
	run     sync.Mutex // held by the consumer persisting the sale
	pending []*job     // under saleQueues.mu
	users   int        // consumers with a job in it; under saleQueues.mu
}

// job is one consumer's events of a sale, and what became of them.
type job struct {
	evs      []seckill.ReservationEvent
	outcomes []seckill.PersistOutcome
	err      error
	done     bool // under saleQueue.run
}

// enqueue adds j to sale's queue and returns the queue and its release.
func (s *saleQueues) enqueue(sale string, j *job) (*saleQueue, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues == nil {
		s.queues = map[string]*saleQueue{}
	}
	q := s.queues[sale]
	if q == nil {
		q = &saleQueue{}
		s.queues[sale] = q
	}
	q.users++
	q.pending = append(q.pending, j)
	return q, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if q.users--; q.users == 0 {
			delete(s.queues, sale)
		}
	}
}

// take empties q's queue.
func (s *saleQueues) take(q *saleQueue) []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	jobs := q.pending
	q.pending = nil
	return jobs
}

// New returns a Writer reading from consumer into store.
func New(store Store, consumer Consumer, cfg Config) *Writer {
	if cfg.PayTimeout <= 0 {
		cfg.PayTimeout = 15 * time.Minute
	}
	if cfg.Consumers <= 0 {
		cfg.Consumers = 2
	}
	if cfg.OutageBackoff <= 0 {
		cfg.OutageBackoff = 100 * time.Millisecond
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{store: store, consumer: consumer, cfg: cfg}
}

// Start launches the consume loops and the dead-letter loop. A second
// Start, or a Start after Stop, does nothing.
func (w *Writer) Start(ctx context.Context) {
	w.worker.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for range w.cfg.Consumers {
			wg.Go(func() {
				w.loop(ctx, "consume", func(ctx context.Context) error {
					return w.consumer.Consume(ctx, w.cfg.Consume, w.handle)
				})
			})
		}
		wg.Go(func() {
			w.loop(ctx, "dead letters", func(ctx context.Context) error {
				return w.consumer.ConsumeDeadLetters(ctx, w.cfg.Consume, w.handleDead)
			})
		})
		wg.Wait()
	})
}

// loop runs fn until ctx ends, restarting it after an unexpected return.
func (w *Writer) loop(ctx context.Context, name string, fn func(context.Context) error) {
	for ctx.Err() == nil {
		err := fn(ctx)
		if ctx.Err() != nil || errors.Is(err, seckill.ErrClosed) {
			return
		}
		w.cfg.Logger.Error("order writer: consumer stopped; restarting", "loop", name, "err", err)
		_ = startstop.Sleep(ctx, time.Second) // the loop ends if ctx did
	}
}

// Stop ends consumption after the batches in hand are settled. Safe to
// call twice, and without Start.
func (w *Writer) Stop(ctx context.Context) error {
	return w.worker.StopNamed(ctx, "order writer")
}

// handle persists one batch. Deliveries are grouped by sale, one
// transaction per sale. A failure while the database is unreachable is
// waited out without spending the messages' attempts: an outage is not a
// bad message, and must not fill failed_orders. A batch that fails with
// the database up is tried again event by event, so that one bad event
// costs only its own attempt and the others persist.
func (w *Writer) handle(ctx context.Context, batch []seckill.Delivery) {
	groups := map[string][]int{} // sale → indexes into batch
	var order []string
	events := make([]seckill.ReservationEvent, len(batch))
	for i, d := range batch {
		ev, err := decodeEvent(d.Message())
		if err != nil {
			d.Retry(err) // poison: will be dead-lettered after its attempts
			continue
		}
		events[i] = ev
		if _, ok := groups[ev.SaleID]; !ok {
			order = append(order, ev.SaleID)
		}
		groups[ev.SaleID] = append(groups[ev.SaleID], i)
	}
	for _, sale := range order {
		idx := groups[sale]
		evs := make([]seckill.ReservationEvent, len(idx))
		for j, i := range idx {
			evs[j] = events[i]
		}
		outcomes, err := w.persist(ctx, sale, evs)
		if err == nil {
			w.settle(sale, batch, idx, evs, outcomes)
			continue
		}
		if errors.Is(err, errReleased) {
			for _, i := range idx {
				if r, ok := batch[i].(seckill.Releaser); ok {
					r.Release()
				} else {
					batch[i].Retry(err)
				}
			}
			continue
		}
		if len(idx) == 1 || ctx.Err() != nil {
			for _, i := range idx {
				batch[i].Retry(err)
			}
			continue
		}
		w.cfg.Logger.Warn("order writer: batch failed; persisting its events one by one", "sale", sale, "events", len(evs), "err", err)
		for j, i := range idx {
			one, err := w.persist(ctx, sale, evs[j:j+1])
			if err != nil {
				batch[i].Retry(err)
				continue
			}
			w.settle(sale, batch, []int{i}, evs[j:j+1], one)
		}
	}
}

// settle acknowledges the deliveries batch[idx[j]] whose events evs[j]
// the store decided (outcomes[j]), alerting on each it refused.
func (w *Writer) settle(sale string, batch []seckill.Delivery, idx []int, evs []seckill.ReservationEvent, outcomes []seckill.PersistOutcome) {
	var created, dup, rejected int
	for j, i := range idx {
		switch outcomes[j] {
		case seckill.PersistCreated:
			created++
		case seckill.PersistDuplicate:
			dup++
		case seckill.PersistRejected:
			rejected++
			w.alert(&seckill.FailedOrder{ReservationID: evs[j].ReservationID, SaleID: sale, UserID: evs[j].UserID, Qty: evs[j].Qty, Reason: seckill.ReasonInsufficientStock, Attempts: batch[i].Attempt()})
		case seckill.PersistOverLimit:
			rejected++
			w.alert(&seckill.FailedOrder{ReservationID: evs[j].ReservationID, SaleID: sale, UserID: evs[j].UserID, Qty: evs[j].Qty, Reason: seckill.ReasonOverLimit, Attempts: batch[i].Attempt()})
		}
		batch[i].Ack()
	}
	if w.cfg.Observe != nil {
		w.cfg.Observe(created, dup, rejected)
	}
	if created > 0 && w.cfg.AfterPersist != nil {
		w.cfg.AfterPersist()
	}
}

// persist persists evs of sale in one transaction with the batches of the
// sale that this process's other consumers queued meanwhile: a sale's
// transactions serialize on its row lock anyway, so one pays the fixed cost
// (round trips, a commit) for all. If it fails, each batch is tried alone,
// so a bad batch fails only itself. Other processes, and a redrive, still
// meet on the optimistic lock.
func (w *Writer) persist(ctx context.Context, sale string, evs []seckill.ReservationEvent) ([]seckill.PersistOutcome, error) {
	mine := &job{evs: evs}
	q, release := w.sales.enqueue(sale, mine)
	defer release()
	q.run.Lock()
	defer q.run.Unlock()
	if mine.done {
		return mine.outcomes, mine.err
	}
	jobs := w.sales.take(q)
	if len(jobs) == 1 {
		mine.outcomes, mine.err = w.persistOnce(ctx, sale, evs)
		return mine.outcomes, mine.err
	}
	var all []seckill.ReservationEvent
	for _, j := range jobs {
		all = append(all, j.evs...)
	}
	outcomes, err := w.persistOnce(ctx, sale, all)
	for _, j := range jobs {
		if err == nil {
			j.outcomes, outcomes = outcomes[:len(j.evs):len(j.evs)], outcomes[len(j.evs):]
		} else if errors.Is(err, errReleased) {
			j.err = err // the database, not a batch, is what failed
		} else {
			j.outcomes, j.err = w.persistOnce(ctx, sale, j.evs)
		}
		j.done = true
	}
	return mine.outcomes, mine.err
}

// persistOnce calls the store, waiting out a database outage: while the
// database is down or the store answers unavailable, the same events are
// tried again after a growing pause, spending no attempt. Retrying is safe:
// a transaction the server killed rolled back whole, and one whose commit
// answer was lost turns the retry's events into duplicates. It fails only
// with the database up (a bad event, an unknown sale) or when ctx ends.
//
// With ReleaseAfter, the wait ends after that long with errReleased, and
// while the database stays down a batch is first checked with a ping and
// given back at once if it fails.
func (w *Writer) persistOnce(ctx context.Context, sale string, evs []seckill.ReservationEvent) ([]seckill.PersistOutcome, error) {
	pause := w.cfg.OutageBackoff
	start := time.Now()
	if w.cfg.ReleaseAfter > 0 && w.down.Load() {
		// Not at full speed (the next batch would be fetched only to be
		// given back), and the database pinged at most once a second:
		// a ping of a silent database takes its whole second, and every
		// batch given back late is a batch the other nodes wait for.
		var err error
		if since := time.Since(time.Unix(0, w.downAt.Load())); since < time.Second {
			err = fmt.Errorf("database out of reach %s ago", since.Round(time.Millisecond))
		} else if err = w.ping(ctx); err != nil {
			w.downAt.Store(time.Now().UnixNano())
		}
		if err != nil {
			_ = startstop.Sleep(ctx, w.cfg.OutageBackoff)
			return nil, fmt.Errorf("%w: %w", errReleased, err)
		}
		w.down.Store(false)
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		outcomes, err := w.store.PersistReservations(cctx, sale, evs, w.cfg.Now(), w.cfg.PayTimeout)
		cancel()
		if err == nil {
			if len(outcomes) != len(evs) {
				return nil, fmt.Errorf("order store answered %d of %d events", len(outcomes), len(evs))
			}
			return outcomes, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		perr := w.ping(ctx)
		if perr == nil && seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
			return nil, err
		}
		// Given back only when this process cannot reach the database:
		// a database that answers but is busy (a lock wait timed out)
		// would be as busy for another node.
		if w.cfg.ReleaseAfter > 0 && perr != nil && time.Since(start) >= w.cfg.ReleaseAfter {
			w.downAt.Store(time.Now().UnixNano())
			w.down.Store(true)
			w.cfg.Logger.Warn("order writer: database unreachable or unavailable; batch given back for another node", "sale", sale, "events", len(evs), "held", time.Since(start).Round(time.Millisecond), "err", err)
			return nil, fmt.Errorf("%w: %w", errReleased, err)
		}
		w.cfg.Logger.Warn("order writer: database unreachable or unavailable; holding the batch", "sale", sale, "events", len(evs), "err", err)
		if startstop.Sleep(ctx, pause) != nil {
			return nil, err
		}
		pause = min(pause*2, 5*time.Second)
	}
}

// errReleased is persistOnce giving up on a batch because the database
// stayed out of reach (Config.ReleaseAfter): its deliveries go back to the
// broker without spending an attempt.
var errReleased = errors.New("order writer: database out of reach; batch given back")

// ping checks, within a second, that the database answers.
func (w *Writer) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return w.store.Ping(pctx)
}

// handleDead records every dead letter as a failed order. An error brings
// the batch back later, so a dead letter is never dropped either.
func (w *Writer) handleDead(ctx context.Context, batch []seckill.DeadLetter) error {
	for _, dl := range batch {
		f := &seckill.FailedOrder{
			ReservationID: dl.Message.ID,
			Reason:        dl.Reason,
			Attempts:      dl.Attempts,
			Payload:       brokerpack.EventJSON(dl.Message.Body), // readable, whatever the layout
			CreatedAt:     w.cfg.Now(),
		}
		if ev, err := decodeEvent(dl.Message); err == nil {
			f.SaleID, f.UserID, f.Qty = ev.SaleID, ev.UserID, ev.Qty
		}
		if f.Reason == "" {
			f.Reason = "gave up after retries"
		}
		cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		err := w.store.RecordFailedOrder(cctx, f)
		cancel()
		if errors.Is(err, seckill.ErrDuplicate) {
			continue // recorded by an earlier delivery of this dead letter
		} else if err != nil {
			return fmt.Errorf("record failed order %s: %w", f.ReservationID, err)
		}
		w.alert(f)
	}
	return nil
}

// alert is the operator's signal for a failed order: an error log line
// with a fixed message to match on, and the OnFailed hook (a metric).
func (w *Writer) alert(f *seckill.FailedOrder) {
	w.cfg.Logger.Error("ALERT failed order: a claimed reservation did not become an order",
		"reservation", f.ReservationID, "sale", f.SaleID, "user", f.UserID, "qty", f.Qty,
		"attempts", f.Attempts, "reason", f.Reason)
	if w.cfg.OnFailed != nil {
		w.cfg.OnFailed(f)
	}
}

// decodeEvent parses and checks a message body. A message that fails here
// can never succeed; it is retried like any failure and so ends in
// failed_orders with its raw payload for an operator.
func decodeEvent(m seckill.Message) (seckill.ReservationEvent, error) {
	ev, err := brokerpack.DecodeReservationEvent(m.Body)
	if err != nil {
		return ev, fmt.Errorf("decode reservation event: %w", err)
	}
	switch {
	case ev.ReservationID == "" || ev.ReservationID != m.ID:
		return ev, fmt.Errorf("reservation event: id %q does not match message id %q", ev.ReservationID, m.ID)
	case !seckill.ValidSaleID(ev.SaleID):
		return ev, fmt.Errorf("reservation event %s: bad sale id", ev.ReservationID)
	case !seckill.ValidUserID(ev.UserID):
		return ev, fmt.Errorf("reservation event %s: bad user id", ev.ReservationID)
	case ev.Qty < 1 || ev.Qty > seckill.MaxPurchaseLimit:
		return ev, fmt.Errorf("reservation event %s: qty %d out of range", ev.ReservationID, ev.Qty)
	}
	if sale, ok := seckill.SaleIDOfReservation(ev.ReservationID); !ok || sale != ev.SaleID {
		return ev, fmt.Errorf("reservation event %s: id does not belong to sale %s", ev.ReservationID, ev.SaleID)
	}
	return ev, nil
}
