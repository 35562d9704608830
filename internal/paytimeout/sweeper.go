// Package paytimeout owns the payment deadline: a Sweeper that finds
// orders still unpaid past their PayBy and cancels them. Pay and cancel
// are conditional updates in the order store, so a payment that lands at
// the deadline and the sweeper cannot both win; when the payment wins,
// the sweeper simply moves on.
//
// Every node may run a Sweeper: two sweepers cancelling the same order
// are two conditional updates, and only one changes anything.
package paytimeout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Reason is recorded on the orders the sweeper cancels.
const Reason = seckill.ReasonPayTimeout

// ErrAlreadyCancelled is what a Cancel returns (or wraps) when another
// cancel got there first, e.g. the sweeper of another node: the order is
// neither counted nor a failure.
var ErrAlreadyCancelled = errors.New("already cancelled")

// Defaults of Config.
const (
	DefaultInterval      = 5 * time.Second
	DefaultBatchSize     = 500
	DefaultConcurrency   = 4
	DefaultCancelTimeout = 30 * time.Second
)

// maxBatchesPerSweep bounds one sweep: a backlog larger than this many
// full batches waits for the next tick. Stop does not wait for the
// bound: the sweep ends after the batch in hand.
const maxBatchesPerSweep = 200

// Store is the part of seckill.OrderStore the sweeper uses.
type Store interface {
	ExpiredOrders(ctx context.Context, now time.Time, limit int) ([]*seckill.Order, error)
	CancelOrder(ctx context.Context, reservationID, reason string, now time.Time) (o *seckill.Order, changed bool, err error)
}

// Config tunes a Sweeper. Zero values take the defaults.
type Config struct {
	// Interval between sweeps. Default 5s.
	Interval time.Duration
	// BatchSize is how many expired orders one ExpiredOrders call lists.
	// Default 500.
	BatchSize int
	// Cancel cancels one expired order. Default: the store's CancelOrder
	// with Reason. The restore path (cancel, then give the stock back)
	// plugs in here. An error that is a *seckill.Error with code
	// ESTATECONFLICT means a payment won the race: it is not a failure;
	// nor is ErrAlreadyCancelled.
	Cancel func(ctx context.Context, o *seckill.Order) error
	// CancelTimeout bounds one Cancel call. Stop does not interrupt a
	// call in progress (it may be a restore of several steps); it waits
	// for it, up to this. Default 30s.
	CancelTimeout time.Duration
	// CancelBatch, if set, cancels expired orders of one sale together
	// (the batched restore path: one database transaction and one Redis
	// call per batch) and is used instead of Cancel. errs[i] answers
	// orders[i] as Cancel would. Each call gets up to BatchSize orders and
	// CancelTimeout.
	CancelBatch func(ctx context.Context, orders []*seckill.Order) (errs []error)
	// Concurrency is how many CancelBatch calls run at once: the sweeper
	// lists that many batches with one ExpiredOrders call and hands them
	// out together, so that one batch's Redis step and bookkeeping overlap
	// another's database transaction (those of one sale queue on its
	// row). Default 4.
	Concurrency int
	Now         func() time.Time
	Logger      *slog.Logger
	// OnCancelled, if set, is told how many orders each sweep cancelled
	// (called only when that is more than zero).
	OnCancelled func(n int)
}

// Sweeper cancels unpaid orders past their deadline. Start it once; Stop
// ends it.
type Sweeper struct {
	store Store
	cfg   Config

	worker startstop.Worker
}

// New returns a Sweeper over store; call Start to run it.
func New(store Store, cfg Config) *Sweeper {
	defaults.Positive(&cfg.Interval, DefaultInterval)
	defaults.Positive(&cfg.BatchSize, DefaultBatchSize)
	defaults.Positive(&cfg.Concurrency, DefaultConcurrency)
	defaults.Positive(&cfg.CancelTimeout, DefaultCancelTimeout)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	s := &Sweeper{store: store, cfg: cfg}
	if s.cfg.Cancel == nil {
		s.cfg.Cancel = s.cancelInStore
	}
	return s
}

func (s *Sweeper) cancelInStore(ctx context.Context, o *seckill.Order) error {
	_, changed, err := s.store.CancelOrder(ctx, o.ReservationID, Reason, s.cfg.Now())
	if err == nil && !changed {
		return ErrAlreadyCancelled
	}
	return err
}

// Sweep cancels the orders expired by now: lists of BatchSize (times
// Concurrency, with CancelBatch) while lists come back full and every
// cancel in them succeeded, up to a bound. It returns how many it cancelled; an order a payment won is not
// counted and is not an error. A failed cancel does not stop the others;
// the error reports how many failed and the first cause.
func (s *Sweeper) Sweep(ctx context.Context) (cancelled int, err error) {
	now := s.cfg.Now()
	defer func() {
		if cancelled > 0 && s.cfg.OnCancelled != nil {
			s.cfg.OnCancelled(cancelled)
		}
	}()
	page := s.cfg.BatchSize
	if s.cfg.CancelBatch != nil {
		page *= s.cfg.Concurrency
	}
	for range maxBatchesPerSweep {
		orders, err := s.store.ExpiredOrders(ctx, now, page)
		if err != nil {
			return cancelled, fmt.Errorf("pay timeout: list expired orders: %w", err)
		}
		n, failed, firstErr := s.cancelAll(ctx, orders)
		cancelled += n
		if failed > 0 {
			return cancelled, fmt.Errorf("pay timeout: %d of %d cancels failed; first: %w", failed, len(orders), firstErr)
		}
		// A short batch is the end of the backlog. A stopped sweeper
		// leaves the rest to the next one.
		if len(orders) < page || ctx.Err() != nil {
			return cancelled, nil
		}
	}
	return cancelled, nil
}

func (s *Sweeper) cancelAll(ctx context.Context, orders []*seckill.Order) (cancelled, failed int, firstErr error) {
	if s.cfg.CancelBatch != nil {
		return s.cancelBatches(ctx, orders)
	}
	for _, o := range orders {
		if ctx.Err() != nil {
			return cancelled, failed, firstErr
		}
		// Detached from ctx: Stop waits for the call in hand instead of
		// cutting a multi-step cancel in two.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CancelTimeout)
		err := s.cfg.Cancel(cctx, o)
		cancel()
		s.count(o, err, &cancelled, &failed, &firstErr)
	}
	return cancelled, failed, firstErr
}

// cancelBatches hands the orders to CancelBatch in batches of one sale
// and up to BatchSize orders, in the order their sales first appear,
// Concurrency calls at a time; it returns when every call has.
func (s *Sweeper) cancelBatches(ctx context.Context, orders []*seckill.Order) (cancelled, failed int, firstErr error) {
	bySale := map[string][]*seckill.Order{}
	var sales []string
	for _, o := range orders {
		if bySale[o.SaleID] == nil {
			sales = append(sales, o.SaleID)
		}
		bySale[o.SaleID] = append(bySale[o.SaleID], o)
	}
	var batches [][]*seckill.Order
	for _, sale := range sales {
		all := bySale[sale]
		for start := 0; start < len(all); start += s.cfg.BatchSize {
			batches = append(batches, all[start:min(start+s.cfg.BatchSize, len(all))])
		}
	}
	errs := make([][]error, len(batches))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(s.cfg.Concurrency, len(batches)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// Detached from ctx: Stop waits for the calls in hand.
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CancelTimeout)
				errs[i] = s.cfg.CancelBatch(cctx, batches[i])
				cancel()
			}
		}()
	}
	handed := 0
	for i := range batches {
		if ctx.Err() != nil {
			break
		}
		next <- i
		handed++
	}
	close(next)
	wg.Wait()
	for i, batch := range batches[:handed] {
		for j, o := range batch {
			var err error
			if j < len(errs[i]) {
				err = errs[i][j]
			} else {
				err = fmt.Errorf("cancel batch answered %d orders of %d", len(errs[i]), len(batch))
			}
			s.count(o, err, &cancelled, &failed, &firstErr)
		}
	}
	return cancelled, failed, firstErr
}

// count files one cancel's error.
func (s *Sweeper) count(o *seckill.Order, err error, cancelled, failed *int, firstErr *error) {
	switch {
	case err == nil:
		*cancelled++
	case seckill.ErrorCode(err) == seckill.ESTATECONFLICT:
		s.cfg.Logger.Debug("pay timeout: paid in time after all", "reservation", o.ReservationID)
	case errors.Is(err, ErrAlreadyCancelled):
	default:
		*failed++
		if *firstErr == nil {
			*firstErr = fmt.Errorf("cancel %s: %w", o.ReservationID, err)
		}
	}
}

// Start runs a first Sweep, then one every Interval, until Stop. A second
// Start, or a Start after Stop, does nothing.
func (s *Sweeper) Start(ctx context.Context) {
	s.worker.StartEvery(ctx, s.cfg.Interval, s.sweepAndLog)
}

func (s *Sweeper) sweepAndLog(ctx context.Context) {
	n, err := s.Sweep(ctx)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("pay timeout sweep failed; retrying next tick", "cancelled", n, "err", err)
	} else if n > 0 {
		s.cfg.Logger.Info("cancelled unpaid orders past their deadline", "cancelled", n)
	}
}

// Stop ends the loop after the cancel in hand and waits for it, or for
// ctx. Safe to call twice, and without Start.
func (s *Sweeper) Stop(ctx context.Context) error {
	return s.worker.StopNamed(ctx, "pay timeout")
}
