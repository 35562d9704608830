// Package lottery owns the draw of lottery sales (docs/fairness.md). At a
// sale's entries_close_at, the node that holds the draw's lease in the
// database closes the entries, orders them by the published rule
// (seckill.DrawOrder), and gives each winner a reservation through the
// stock store exactly as a claim is made: the same script, so the same
// outbox, order and payment deadline. Until the sale ends it then gives
// units that come back (a winner who did not pay) to the waiting list, in
// draw order.
//
// Every step is safe to run twice: winners reserve under one idempotency
// key per buyer, so a node killed mid-draw leaves nothing another node
// cannot finish, and no unit goes out twice; the draw record's first
// finish stands.
package lottery

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

// IdempotencyKey is the key under which the draw reserves each winner's
// units: one per buyer, since a buyer has one entry.
const IdempotencyKey = "lottery-draw"

// Defaults of Config.
const (
	DefaultInterval = time.Second
	DefaultLease    = 30 * time.Second
)

// DefaultBatch is how many winners go in one stock-store call.
const DefaultBatch = 256

// Entries is the stock store's side of a lottery (internal/redis.Lottery).
type Entries interface {
	CloseEntries(ctx context.Context, saleID string) error
	Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	RecordWon(ctx context.Context, saleID string, won map[string]string) error
	AllWon(ctx context.Context, saleID string) (map[string]string, error)
}

// EntryBook keeps a lottery's entries and results in the database as
// well as in the stock store (Book).
type EntryBook interface {
	// Level brings the stock store level with the database, and returns
	// the entries both then hold.
	Level(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	// KeepWon records winners' reservations in the database.
	KeepWon(ctx context.Context, saleID string, winners []seckill.LotteryEntry, won map[string]string) error
}

// Stock reserves the winners' units (internal/redis StockStore).
type Stock interface {
	ReserveAdmitted(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error)
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
}

// DrawStore keeps lottery draw records (internal/sqlstore).
type DrawStore interface {
	EnsureDraw(ctx context.Context, saleID string) (seckill.DrawRecord, error) // with a fresh seed if none
	// LeaseDraw gives owner the draw until until, if nobody holds it at now.
	LeaseDraw(ctx context.Context, saleID, owner string, now, until time.Time) (ok bool, err error)
	FinishDraw(ctx context.Context, d seckill.DrawRecord) error // once
	// OpenDraws lists the sales with a draw whose sale has not ended.
	OpenDraws(ctx context.Context, now time.Time) ([]string, error)
}

// Sales reads sales.
type Sales interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
}

// Config wires a Drawer. Draws, Sales, Entries, Stock and Owner are
// required.
type Config struct {
	Draws   DrawStore
	Sales   Sales
	Entries Entries
	Stock   Stock
	// Book, if set, levels the entries once they are closed and gives
	// the draw what both then hold (every entry the database keeps is
	// drawn, even one the stock store lost), and keeps each batch of
	// winners in the database before the stock store records them (a
	// heal puts them back from there).
	Book EntryBook
	// EntryBudget is the request budget of an entry: the draw reads the
	// entries only once two budgets have passed since it closed them, when
	// every entry answered before the close is in the database, or once
	// one is left before the sale ends (seckill.EntriesSettled). Zero
	// reads them at once.
	EntryBudget time.Duration
	// Owner names this node in the draw's lease.
	Owner string
	// Lease is how long a node may work on a draw before another may take
	// over. Default 30s.
	Lease time.Duration
	// Interval between passes. Default 1s.
	Interval time.Duration
	// Batch is how many winners one stock-store call reserves (at most
	// the store's batch limit). Default 256.
	Batch int
	// Pace is a pause between two batches of winners: it spreads the
	// draw's orders over time for the order writer. Default none.
	Pace time.Duration
	// NewID mints a winner's reservation id. Default
	// seckill.NewReservationID.
	NewID  func(saleID, userID string, qty int64, now time.Time) string
	Now    func() time.Time
	Logger *slog.Logger
	// OnDraw, if set, is told of every finished draw.
	OnDraw func(saleID string, entrants, winners int, took time.Duration)
	// OnAward, if set, is called before each batch of winners is
	// reserved (tests kill a node there).
	OnAward func(saleID string, batch int)
}

// Drawer runs the draws of the lottery sales.
type Drawer struct {
	cfg    Config
	worker startstop.Worker

	mu sync.Mutex
	// closed is when this node closed the entries of each sale whose
	// draw it has not finished, on the monotonic clock: request budgets
	// run on it, not on Now. A node that takes a draw over closes the
	// entries again and waits from then.
	closed map[string]time.Time
}

// New returns a Drawer.
func New(cfg Config) *Drawer {
	defaults.Positive(&cfg.Interval, DefaultInterval)
	defaults.Positive(&cfg.Lease, DefaultLease)
	defaults.Positive(&cfg.Batch, DefaultBatch)
	if cfg.NewID == nil {
		cfg.NewID = func(saleID, _ string, _ int64, now time.Time) string { return seckill.NewReservationID(saleID, now) }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Drawer{cfg: cfg, closed: make(map[string]time.Time)}
}

// Start runs a pass every Interval until Stop.
func (d *Drawer) Start(ctx context.Context) {
	d.worker.StartEvery(ctx, d.cfg.Interval, func(ctx context.Context) {
		if err := d.Pass(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logger.ErrorContext(ctx, "lottery pass", "err", err)
		}
	})
}

// Stop ends the loop, waiting for a pass in progress. Safe twice.
func (d *Drawer) Stop(ctx context.Context) error { return d.worker.StopNamed(ctx, "lottery drawer") }

// Pass works once on every lottery sale that has not ended: a draw that
// is due, or units to give to the waiting list.
func (d *Drawer) Pass(ctx context.Context) error {
	ids, err := d.cfg.Draws.OpenDraws(ctx, d.cfg.Now())
	if err != nil {
		return err
	}
	var first error
	for _, id := range ids {
		if err := d.RunSale(ctx, id); err != nil && first == nil {
			first = fmt.Errorf("sale %s: %w", id, err)
		}
	}
	return first
}

// RunSale does what the sale's lottery needs now, if this node gets the
// lease: the draw once it is due, then the waiting list.
func (d *Drawer) RunSale(ctx context.Context, saleID string) error {
	sale, err := d.cfg.Sales.Sale(ctx, saleID)
	if err != nil {
		return err
	}
	now := d.cfg.Now()
	if !seckill.DrawDue(sale, now) || !now.Before(sale.EndAt) {
		return nil
	}
	rec, err := d.cfg.Draws.EnsureDraw(ctx, saleID)
	if err != nil {
		return err
	}
	if rec.Drawn() {
		d.forget(saleID) // drawn by another node while this one waited
		level, err := d.cfg.Stock.Stock(ctx, saleID)
		if err != nil || level.Remaining() == 0 {
			return err // nothing came back: no lease needed
		}
	}
	ok, err := d.cfg.Draws.LeaseDraw(ctx, saleID, d.cfg.Owner, now, now.Add(d.cfg.Lease))
	if err != nil || !ok {
		return err
	}
	if !rec.Drawn() {
		return d.draw(ctx, sale, rec)
	}
	return d.giveBack(ctx, sale, rec)
}

// draw closes the entries, computes the winners and reserves their units,
// and records the draw.
func (d *Drawer) draw(ctx context.Context, sale *seckill.Sale, rec seckill.DrawRecord) error {
	if err := d.cfg.Entries.CloseEntries(ctx, sale.ID); err != nil {
		return err
	}
	if !d.settled(sale) {
		return nil // a later pass draws
	}
	start := time.Now()
	d.cfg.Logger.InfoContext(ctx, "lottery draw started", "sale_id", sale.ID, "owner", d.cfg.Owner)
	var entries []seckill.LotteryEntry
	var err error
	if d.cfg.Book != nil {
		entries, err = d.cfg.Book.Level(ctx, sale.ID)
	} else {
		entries, err = d.cfg.Entries.Entries(ctx, sale.ID)
	}
	if err != nil {
		return err
	}
	winners, _ := seckill.DrawWinners(seckill.DrawOrder(rec.Seed, entries), sale.Stock)
	if err := d.award(ctx, sale, winners); err != nil {
		return err
	}
	rec.DrawnAt, rec.Entrants, rec.Stock = d.cfg.Now(), int64(len(entries)), sale.Stock
	rec.Winners = make([]string, len(winners))
	for i, w := range winners {
		rec.Winners[i] = w.ID
	}
	if err := d.cfg.Draws.FinishDraw(ctx, rec); err != nil {
		return err
	}
	d.forget(sale.ID)
	if d.cfg.OnDraw != nil {
		d.cfg.OnDraw(sale.ID, len(entries), len(winners), time.Since(start))
	}
	d.cfg.Logger.InfoContext(ctx, "lottery drawn", "sale_id", sale.ID, "entrants", len(entries), "winners", len(winners))
	return nil
}

// settled reports whether the entries of sale, which this node has just
// closed (again), may be read: the first close starts the wait.
func (d *Drawer) settled(sale *seckill.Sale) bool {
	d.mu.Lock()
	closedAt, ok := d.closed[sale.ID]
	if !ok {
		closedAt = time.Now()
		d.closed[sale.ID] = closedAt
	}
	d.mu.Unlock()
	return seckill.EntriesSettled(time.Since(closedAt), sale.EndAt.Sub(d.cfg.Now()), d.cfg.EntryBudget)
}

// forget drops the close of a sale that is drawn.
func (d *Drawer) forget(saleID string) {
	d.mu.Lock()
	delete(d.closed, saleID)
	d.mu.Unlock()
}

// giveBack gives the units that came back to the waiting list: the
// entrants who have not won, in draw order, by the same walk as the draw.
func (d *Drawer) giveBack(ctx context.Context, sale *seckill.Sale, rec seckill.DrawRecord) error {
	level, err := d.cfg.Stock.Stock(ctx, sale.ID)
	if err != nil || level.Remaining() == 0 {
		return err
	}
	entries, err := d.cfg.Entries.Entries(ctx, sale.ID)
	if err != nil {
		return err
	}
	won, err := d.cfg.Entries.AllWon(ctx, sale.ID)
	if err != nil {
		return err
	}
	waiting := WaitingList(rec.Seed, entries, won)
	next, _ := seckill.DrawWinners(waiting, level.Remaining())
	return d.award(ctx, sale, next)
}

// WaitingList is the entries that have not won, in draw order.
func WaitingList(seed string, entries []seckill.LotteryEntry, won map[string]string) []seckill.LotteryEntry {
	var out []seckill.LotteryEntry
	for _, e := range seckill.DrawOrder(seed, entries) {
		if _, ok := won[e.UserID]; !ok {
			out = append(out, e)
		}
	}
	return out
}

// award reserves the winners' units, batch by batch, and records who won.
// A winner the stock store refuses (no units: the stock is not what the
// draw counted on) is left on the waiting list.
func (d *Drawer) award(ctx context.Context, sale *seckill.Sale, winners []seckill.LotteryEntry) error {
	for b := 0; b < len(winners); b += d.cfg.Batch {
		batch := winners[b:min(b+d.cfg.Batch, len(winners))]
		if b > 0 && d.cfg.Pace > 0 {
			if err := startstop.Sleep(ctx, d.cfg.Pace); err != nil {
				return err
			}
		}
		if d.cfg.OnAward != nil {
			d.cfg.OnAward(sale.ID, b/d.cfg.Batch)
		}
		now := d.cfg.Now()
		reqs := make([]seckill.ReserveRequest, len(batch))
		for i, w := range batch {
			reqs[i] = seckill.ReserveRequest{ReservationID: d.cfg.NewID(sale.ID, w.UserID, w.Qty, now),
				UserID: w.UserID, Qty: w.Qty, IdempotencyKey: IdempotencyKey}
		}
		results, err := d.cfg.Stock.ReserveAdmitted(ctx, sale.ID, reqs)
		if err != nil {
			return fmt.Errorf("award: %w", err)
		}
		won := make(map[string]string, len(batch))
		wait := false
		for i, r := range results {
			switch seckill.AwardOf(r.Outcome) {
			case seckill.AwardWon:
				won[batch[i].UserID] = r.ReservationID
			case seckill.AwardWait:
				wait = true
			default:
				d.cfg.Logger.WarnContext(ctx, "lottery winner not reserved", "sale_id", sale.ID, "entry_id", batch[i].ID, "outcome", r.Outcome.String())
			}
		}
		if d.cfg.Book != nil && len(won) > 0 {
			if err := d.cfg.Book.KeepWon(ctx, sale.ID, batch, won); err != nil {
				return err
			}
		}
		if err := d.cfg.Entries.RecordWon(ctx, sale.ID, won); err != nil {
			return err
		}
		if wait {
			// The next pass runs it again: the winners reserved so far
			// replay under the same idempotency key.
			return fmt.Errorf("award: %w", errSaleNotHeld)
		}
	}
	return nil
}

// errSaleNotHeld stops a draw while the stock store does not hold its sale
// (seckill.AwardWait).
var errSaleNotHeld = errors.New("the stock store does not hold the sale (not loaded, or lost and not yet healed): the draw waits for it")
