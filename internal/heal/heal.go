// Package heal owns the engine's answer to a stock store that lost writes
// it had acknowledged (a power loss under AOF everysec, a failover to a
// lagging replica): it notices, and rebuilds the sale's state from the
// database without an operator or a restart. Left alone, Redis would sell
// again what the database sold, forget buyers' limits and forget claims.
//
// The Watcher reads each loaded sale's stock hash and database row on every
// tick, and heals a sale whose keys vanished (once it sold or was seen),
// whose `reserved` is below what the database sold, whose reserve sequence
// went backwards, or, for a while after the server's run_id changed, whose
// orders Redis has no record of (the whole ledger once, then each tick only
// claims made since InFlight before the change: a tick costs what changed,
// not the sale's size).
//
// A heal holds claims off (try_later), lets the events in flight land, then
// page by page restores the records of orders Redis forgot and releases the
// units of claims the database refused; `reserved` never goes below what the
// database and the records in flight account for. Each heal logs an ALERT
// and is counted. The whole story: docs/durability.md, "Loss detection and
// self-healing".
package heal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Stock is the part of the stock store (internal/redis) the watcher uses.
type Stock interface {
	ServerID(ctx context.Context) (string, error)
	SaleState(ctx context.Context, saleID string) (seckill.StockWatch, error)
	ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]seckill.ReservationRecord, error)
	BeginHeal(ctx context.Context, sale *seckill.Sale, token string) (recreated bool, err error)
	// HealPage applies one page of a heal and keeps claims refused;
	// ApplyHeal applies the last, counts the heal and lets claims in.
	HealPage(ctx context.Context, saleID, token string, add, release []seckill.ReservationRecord) (added, released int, err error)
	ApplyHeal(ctx context.Context, sale *seckill.Sale, token string, add, release []seckill.ReservationRecord) (added, released int, err error)
	AbortHeal(ctx context.Context, saleID, token string) error
}

// Database is the part of the database the watcher reads.
type Database interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
	OrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.Order, error)
	FailedOrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.FailedOrder, error)
}

// Sales lists the sales to watch: the preheat scheduler's loaded sales,
// each preheated by this node or seen preheated, so the stock store held
// it (a listed sale whose keys are gone vanished, even unseen by the
// watcher).
type Sales interface {
	Loaded() []*seckill.Sale
}

// Config tunes a Watcher. Zero values take the defaults.
type Config struct {
	// Interval between ticks. Default 1s.
	Interval time.Duration
	// Settle is how long a heal waits, with claims refused, for events in
	// flight to reach the database before it reads it. Default 2s.
	Settle time.Duration
	// Suspect is how long after a Redis restart or failover every tick
	// compares the ledger with the records. Default 1m.
	Suspect time.Duration
	// InFlight is how long before the restart a claim may have been made
	// whose order lands after the first comparison: later ticks compare
	// the orders of claims made since then only. Default 2m.
	InFlight time.Duration
	// Backlog, if set, counts the events still in the broker, not yet
	// settled by the order writer. A heal then waits for it to reach 0
	// (up to DrainMax) instead of Settle: a heal that judged before the
	// stream drained would let new claims take units the stream's
	// events hold, and the database would refuse them. It is for the
	// embedded store, whose outbox died with the process: every claim
	// still on its way is in the broker.
	Backlog func(ctx context.Context) (int64, error)
	// DrainMax bounds the wait for Backlog. Default 30s.
	DrainMax time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
	// Rebuild, if set, rebuilds what else of the sale the stock store
	// keeps (a lottery's entries, from the database) while the heal
	// holds the sale, after its records and before it lets requests in.
	// When it fails the sale stays held, and is healed again once the
	// heal is stale.
	Rebuild func(ctx context.Context, sale *seckill.Sale) error
	// OnHeal, if set, is told of every heal that finished (a metric).
	OnHeal func(saleID, reason string, added, released int)
	// OnRestart, if set, is told when the Redis server restarted or
	// failed over (its run_id changed): it may have lost writes that no
	// sale's state shows (the watcher never saw them).
	OnRestart func()
}

// Watcher watches loaded sales for lost writes and heals them.
type Watcher struct {
	stock Stock
	db    Database
	sales Sales
	cfg   Config

	// Owned by the loop goroutine (and by Tick in tests).
	serverID     string
	suspectUntil time.Time
	suspectFrom  time.Time        // claims made since are compared on every suspect tick
	compared     map[string]stamp // sales whose whole ledger was compared since the change, as they were then
	seen         map[string]seckill.StockWatch
	held         map[string]heldSale // by Hold, until their first heal
	comparisons  int                 // ledger comparisons of suspect ticks, for tests

	worker startstop.Worker
}

// New returns a Watcher; Start runs it.
func New(stock Stock, db Database, sales Sales, cfg Config) *Watcher {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 2 * time.Second
	}
	if cfg.Suspect <= 0 {
		cfg.Suspect = time.Minute
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = 2 * time.Minute
	}
	if cfg.DrainMax <= 0 {
		cfg.DrainMax = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{stock: stock, db: db, sales: sales, cfg: cfg, seen: map[string]seckill.StockWatch{}, held: map[string]heldSale{}}
}

// Hold makes each of sales that is still live refuse claims (try later)
// until the watcher's first heal of it, which then runs on the first
// tick whatever the sale's state looks like. It is for a stock store that
// starts empty (the embedded one, after the process died): its fresh
// state would otherwise take claims on units and buyers the database
// already has. Call it before Start and before claims can arrive. A heal
// that fails lets claims in again (as any heal does), so a held sale is
// never refused for longer than one heal attempt, unless what
// Config.Rebuild puts back could not be: then until a later heal takes it
// over. held counts the sales held; err joins the sales that could not
// be.
func (w *Watcher) Hold(ctx context.Context, sales []*seckill.Sale) (held int, err error) {
	now := w.cfg.Now()
	var errs []error
	for _, sale := range sales {
		if sale == nil || !now.Before(sale.EndAt) {
			continue
		}
		token := newToken(now)
		if _, err := w.stock.BeginHeal(ctx, sale, token); err != nil {
			errs = append(errs, err)
			continue
		}
		w.held[sale.ID] = heldSale{sale, token}
		held++
	}
	return held, errors.Join(errs...)
}

type heldSale struct {
	sale  *seckill.Sale
	token string
}

// Start runs the watcher until Stop (or ctx ends): a tick at once, then
// one every Interval.
func (w *Watcher) Start(ctx context.Context) {
	w.worker.StartEvery(ctx, w.cfg.Interval, w.Tick)
}

// Stop ends the watcher, waiting for a heal in progress (which, cut
// short, lets claims in again). Safe to call twice, and without Start.
func (w *Watcher) Stop(ctx context.Context) error {
	return w.worker.StopNamed(ctx, "heal watcher")
}

// Tick looks at every loaded sale once, healing those that lost writes.
func (w *Watcher) Tick(ctx context.Context) {
	id, err := w.stock.ServerID(ctx)
	if err != nil {
		return // Redis is down: nothing to compare yet
	}
	now := w.cfg.Now()
	if w.serverID != "" && id != w.serverID {
		w.cfg.Logger.Warn("heal watcher: the Redis server restarted or failed over; checking every live sale against the database",
			"was", w.serverID, "now", id)
		w.suspectUntil = now.Add(w.cfg.Suspect)
		w.suspectFrom = now.Add(-w.cfg.InFlight)
		w.compared = map[string]stamp{}
		if w.cfg.OnRestart != nil {
			w.cfg.OnRestart()
		}
	}
	w.serverID = id
	for _, sale := range w.sales.Loaded() {
		if ctx.Err() != nil {
			return
		}
		if !now.Before(sale.EndAt) {
			delete(w.seen, sale.ID)
			continue
		}
		if err := w.check(ctx, sale, now, true); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("heal watcher: check failed", "sale", sale.ID, "err", err)
		}
	}
	// Held sales the preheat scheduler has not listed (yet) are healed
	// all the same: nothing else would let their claims in.
	for id, h := range w.held {
		if ctx.Err() != nil {
			return
		}
		sale := h.sale
		if !now.Before(sale.EndAt) {
			delete(w.held, id)
			if err := w.stock.AbortHeal(ctx, id, h.token); err != nil {
				w.cfg.Logger.Warn("heal watcher: releasing an ended held sale failed", "sale", id, "err", err)
			}
			continue
		}
		if err := w.check(ctx, sale, now, false); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("heal watcher: check failed", "sale", id, "err", err)
		}
	}
}

// check looks at one sale; preheated says the preheat scheduler lists it
// as loaded (StockCheck.Preheated).
func (w *Watcher) check(ctx context.Context, sale *seckill.Sale, now time.Time, preheated bool) error {
	// The database first: claims flow Redis → database, so a claim made
	// between the two reads shows in reserved only, never in sold alone.
	row, sold, st, err := w.read(ctx, sale.ID)
	if err != nil {
		return err
	}
	if !now.Before(row.EndAt) {
		// The loaded list may be a preheat pass behind the database: a
		// sale ended early on another node is still listed with its old
		// end, and its keys going (archived) are no lost writes to
		// rebuild.
		delete(w.seen, sale.ID)
		if h, ok := w.held[sale.ID]; ok {
			delete(w.held, sale.ID)
			return w.stock.AbortHeal(ctx, sale.ID, h.token)
		}
		return nil
	}
	prev, seen := w.seen[sale.ID]
	var reason string
	c := seckill.StockCheck{Prev: prev, Seen: seen, Now: st, Sold: sold, At: now, StaleHeal: w.cfg.Settle + staleHeal, Preheated: preheated}
	switch loss := seckill.JudgeStockStore(c); {
	case w.held[sale.ID].sale != nil:
		// Claims are refused since Hold; the heal below lets them in
		// again, healed or (if it fails) not.
		delete(w.held, sale.ID)
		reason = "the stock store started empty (the embedded store does not outlive its process)"
	case loss == seckill.StockNotLoaded:
		return nil // not preheated yet
	case loss == seckill.StockBelowSold:
		// A loss stays; a restore between the two reads does not.
		_ = startstop.Sleep(ctx, 50*time.Millisecond) // a ctx ended fails the read below
		if _, c.Sold, c.Now, err = w.read(ctx, sale.ID); err != nil {
			return err
		}
		if st = c.Now; st.Reserved < c.Sold {
			reason = loss.Reason(c)
		}
	case loss != seckill.StockFine:
		reason = loss.Reason(c)
	case now.Before(w.suspectUntil):
		at := stamp{version: row.Version, seq: st.Seq, reserved: st.Reserved}
		last, compared := w.compared[sale.ID]
		if compared && last == at {
			break // nothing changed on either side since its last comparison
		}
		var add, release int
		from := ""
		if compared {
			from = seckill.ReservationIDFloor(sale.ID, w.suspectFrom)
		}
		w.comparisons++
		err := w.plan(ctx, sale.ID, from, func(a, r []seckill.ReservationRecord) error {
			// A cancelled order's missing record is no sign of a loss
			// on its own: only records that hold units are counted.
			for _, rec := range a {
				if !rec.Restored {
					add++
				}
			}
			release += len(r)
			return nil
		})
		if err != nil {
			return err
		}
		w.compared[sale.ID] = at
		if add > 0 || release > 0 {
			reason = fmt.Sprintf("after a Redis restart or failover, %d orders have no record and %d refused claims hold units", add, release)
		}
	}
	if reason != "" {
		if err := w.heal(ctx, row, reason); err != nil {
			return err
		}
		if st, err = w.stock.SaleState(ctx, sale.ID); err != nil {
			delete(w.seen, sale.ID)
			return err
		}
	}
	w.seen[sale.ID] = st
	return nil
}

// stamp is what a suspect tick compares to skip a sale that did not
// change: the database row's version, which every write of its orders,
// failed orders and restores bumps, and the stock hash's reserve sequence
// and reserved units.
type stamp struct{ version, seq, reserved int64 }

// staleHeal is how long past its Settle a heal may run before another
// node takes it over.
const staleHeal = 10 * time.Second

// read reads the sale's database row, then its stock hash.
func (w *Watcher) read(ctx context.Context, saleID string) (*seckill.Sale, int64, seckill.StockWatch, error) {
	row, err := w.db.Sale(ctx, saleID)
	if err != nil {
		return nil, 0, seckill.StockWatch{}, err
	}
	st, err := w.stock.SaleState(ctx, saleID)
	if err != nil {
		return nil, 0, seckill.StockWatch{}, err
	}
	return row, row.Stock - row.Unsold, st, nil
}

// heal rebuilds one sale (see the package doc).
func (w *Watcher) heal(ctx context.Context, sale *seckill.Sale, reason string) error {
	token := newToken(w.cfg.Now())
	recreated, err := w.stock.BeginHeal(ctx, sale, token)
	if err != nil {
		return fmt.Errorf("heal %s: %w", sale.ID, err)
	}
	abort := func(err error) error {
		// A fresh context: claims must come back even when ctx ended.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if aerr := w.stock.AbortHeal(actx, sale.ID, token); aerr != nil {
			return fmt.Errorf("heal %s: %w (and claims stay refused until the next heal: %w)", sale.ID, err, aerr)
		}
		return fmt.Errorf("heal %s: %w", sale.ID, err)
	}
	if err := w.settle(ctx, sale.ID); err != nil {
		return abort(err)
	}
	// A page at a time, claims refused throughout; the last call counts
	// the heal and lets them in.
	var added, released int
	err = w.plan(ctx, sale.ID, "", func(add, release []seckill.ReservationRecord) error {
		a, r, err := w.stock.HealPage(ctx, sale.ID, token, add, release)
		added, released = added+a, released+r
		return err
	})
	if err != nil {
		return abort(err)
	}
	if w.cfg.Rebuild != nil {
		if err := w.cfg.Rebuild(ctx, sale); err != nil {
			// Not aborted: what Rebuild puts back is not there yet, so
			// the sale stays held until a later heal takes this one
			// over (stale, StaleHeal) and rebuilds it all.
			return fmt.Errorf("heal %s: %w (the sale stays held until the heal is taken over)", sale.ID, err)
		}
	}
	a, r, err := w.stock.ApplyHeal(ctx, sale, token, nil, nil)
	if err != nil {
		return abort(err)
	}
	added, released = added+a, released+r
	w.cfg.Logger.Error("ALERT stock store lost acknowledged writes; sale healed from the database",
		"sale", sale.ID, "reason", reason, "keys_recreated", recreated,
		"records_added", added, "refused_claims_released", released)
	if w.cfg.OnHeal != nil {
		w.cfg.OnHeal(sale.ID, reason, added, released)
	}
	return nil
}

// settle waits for the events in flight to land: Settle, or until the
// broker's backlog is drained (see Config.Backlog).
func (w *Watcher) settle(ctx context.Context, saleID string) error {
	if w.cfg.Backlog == nil {
		return startstop.Sleep(ctx, w.cfg.Settle)
	}
	deadline := time.Now().Add(w.cfg.DrainMax)
	for {
		n, err := w.cfg.Backlog(ctx)
		if err == nil && n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			w.cfg.Logger.Warn("heal: the broker's backlog did not drain; healing with events still on their way",
				"sale", saleID, "backlog", n, "err", err, "waited", w.cfg.DrainMax)
			return nil
		}
		if err := startstop.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// newToken is a heal's token: when it began, and random.
func newToken(now time.Time) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(now.UnixMilli(), 10) + ":" + hex.EncodeToString(b[:])
}

// planPage is how many orders (or failed orders) plan reads at a time.
const planPage = 1000

// plan compares the database's orders and failed orders (those whose
// ids sort after from, all when it is "") with the stock store's records
// a page at a time, and calls fn with each page's add (the orders ordered
// or paid without a record, and the cancelled ones made under an
// Idempotency-Key without one, as Restored records) and release (the
// active records of claims the database refused), when either is not
// empty.
func (w *Watcher) plan(ctx context.Context, saleID, from string, fn func(add, release []seckill.ReservationRecord) error) error {
	live := func(o *seckill.Order) bool { return o.Status.Holds() }
	// An order that gave its units back (cancelled) keeps its
	// Idempotency-Key: its record comes back restored, holding nothing,
	// so that a retry of the key is answered with it as before the loss.
	recorded := func(o *seckill.Order) bool { return live(o) || o.KeyDigest != "" }
	err := eachPage(ctx, w, w.db.OrdersAfter, saleID, from, func(o *seckill.Order) string { return o.ReservationID }, recorded,
		func(orders []*seckill.Order, recs map[string]seckill.ReservationRecord) error {
			var add []seckill.ReservationRecord
			for _, o := range orders {
				if _, ok := recs[o.ReservationID]; !ok && recorded(o) {
					add = append(add, seckill.ReservationRecord{ReservationID: o.ReservationID, UserID: o.UserID, Qty: o.Qty,
						Restored: !live(o), ReservedAt: o.ReservedAt, KeyDigest: o.KeyDigest})
				}
			}
			if len(add) == 0 {
				return nil
			}
			return fn(add, nil)
		})
	if err != nil {
		return err
	}
	refused := func(f *seckill.FailedOrder) bool { return refusedByDatabase(f.Reason) }
	return eachPage(ctx, w, w.db.FailedOrdersAfter, saleID, from, func(f *seckill.FailedOrder) string { return f.ReservationID }, refused,
		func(failed []*seckill.FailedOrder, recs map[string]seckill.ReservationRecord) error {
			var release []seckill.ReservationRecord
			for _, f := range failed {
				if r, ok := recs[f.ReservationID]; ok && refused(f) && !r.Restored {
					release = append(release, r)
				}
			}
			if len(release) == 0 {
				return nil
			}
			return fn(nil, release)
		})
}

// eachPage reads one table of the sale a keyset page of planPage rows at
// a time, in order, until a page comes back empty or an error. For each
// page it reads the stock store's records of the rows that lookUp picks,
// and hands fn the page with them.
func eachPage[T any](ctx context.Context, w *Watcher, read func(ctx context.Context, saleID, after string, limit int) ([]*T, error),
	saleID, from string, idOf func(*T) string, lookUp func(*T) bool, fn func(page []*T, recs map[string]seckill.ReservationRecord) error) error {
	for after := from; ; {
		page, err := read(ctx, saleID, after, planPage)
		if err != nil || len(page) == 0 {
			return err
		}
		after = idOf(page[len(page)-1])
		ids := make([]string, 0, len(page))
		for _, row := range page {
			if lookUp(row) {
				ids = append(ids, idOf(row))
			}
		}
		recs, err := w.stock.ReservationsOf(ctx, saleID, ids)
		if err != nil {
			return err
		}
		if err := fn(page, recs); err != nil {
			return err
		}
	}
}

// refusedByDatabase reports whether a failed order's claim was refused by
// the database itself, so its units are sold nowhere: its stock-store
// record must not keep them.
func refusedByDatabase(reason string) bool {
	for _, p := range []string{seckill.ReasonInsufficientStock, seckill.ReasonOverLimit, seckill.ReasonLostInStockStore} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}
