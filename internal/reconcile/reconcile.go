// Package reconcile checks that a sale's two ledgers agree: the stock
// store (Redis), which decides every claim, and the database, which is the
// source of truth for what was sold. It reads both once, a page at a time,
// writes nothing, and reports oversold units (must be 0), undersold units (tolerated,
// but each one is a unit nobody can buy) and every reservation that one
// side knows and the other does not. cmd/seckill serves the Report as
// `seckill reconcile`, as an admin endpoint and as Prometheus gauges.
//
// # What must hold
//
//  1. Stock store: reserved = Σ qty of its active reservation records.
//     The reserve script and the restore script change the counter and the
//     record in one step, so a difference means a bug or a hand edit
//     (ledger_mismatch). Its reserved must not exceed its total (oversold),
//     and its total must equal the sale's stock.
//  2. Database: stock − unsold = Σ qty of orders ordered or paid. A
//     cancelled order gave its units back; a failed order never took any.
//     unsold never goes below zero (the order writer's conditional update
//     and the CHECK refuse it): a negative value is negative_stock.
//  3. Every active stock-store record is explained by one of: an order
//     ordered or paid; a failed order (an operator was alerted; its units
//     stay held until refunded); being in flight, that is younger than
//     Options.InFlightGrace or still in the outbox; or a cancelled order
//     whose restore request is redis_pending (the database gave the units
//     back and the stock store will: undersold for now, not unexplained).
//     Anything else is reservation_without_order: a buyer was told
//     "claimed" and nothing in the database says so (promise 2).
//  4. Every order has a stock-store record (else order_without_reservation).
//     A cancelled order's record is restored unless its request is still
//     redis_pending (else lost_restore: its units are stuck, undersold
//     forever). An order ordered or paid whose record is restored is
//     restored_but_ordered, the dangerous one: the stock store offers the
//     unit again while the database counts it sold (potential oversell).
//  5. A restore request parked longer than the grace for a reservation
//     the stock store has no record of is restore_for_unknown_reservation:
//     nothing will ever land to apply it.
//  6. No buyer's orders ordered or paid hold more than the sale's limit
//     (else over_limit).
//
// # Memory that does not grow with the sale
//
// A sale may hold millions of reservations; the comparison holds one page
// of them. The database's totals are aggregates it computes in one
// read-only transaction (so equation 2 compares numbers of one moment).
// Then the stock store's records are read by HSCAN, a page at a time, and
// each page is looked up in the database (equations 1, 3, 4); then the
// database's orders, failed orders and restore requests are read by
// keyset paging on the reservation id and each page looked up in the
// stock store (one HMGET), which finds what the stock store has no record
// of (equations 4, 5). The report lists the first Options.MaxDiscrepancies
// discrepancies (by kind, then reservation id) and counts the rest.
//
// # An archived sale
//
// Once the archiver dropped an ended sale's Redis keys, the database
// speaks alone: it recorded, as the keys went, how many reservation
// records (claims) the stock store held. The report (Archived set) then
// checks equation 2, nothing oversold, nobody over the limit, and that
// the orders and failed orders number exactly those claims.
//
// # Reading two stores that move
//
// A live sale keeps changing while it is read, and nothing can read Redis
// and the database in one snapshot. Claims flow one way, stock store →
// outbox → broker → database, so the database is read first: a claim that
// lands during the read appears only on the stock-store side, young, and
// counts as in flight instead of as an order without a reservation. The
// outbox gives only a length; its entries are the newest unpersisted
// records (the relay publishes oldest first), so that many of the newest
// records with no order are taken as still in the outbox. The stock level
// is read before and after the (HSCAN, not atomic) record list, and
// equation 1 accepts any total between the two readings.
//
// The broker is not read. A reservation that sits in the broker (or
// behind a database outage) longer than the grace is reported as
// unexplained: it may still land. A restore that runs between the two
// reads can show once as restored_but_ordered. Both vanish on a second
// run; a real discrepancy does not.
package reconcile

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seckill-dev/seckill"
)

// DefaultInFlightGrace is how long a claim may take from the stock store
// to the database before its absence is unexplained: far above the
// relay → broker → writer latency, short enough to alert while the buyer
// is still polling.
const DefaultInFlightGrace = 2 * time.Minute

// Options tune a reconciliation.
type Options struct {
	// InFlightGrace: a reservation younger than this with no order yet is
	// in flight, not missing; a parked restore younger than this may
	// still meet its reservation. Zero means DefaultInFlightGrace.
	InFlightGrace time.Duration
	// PageSize is how many records or rows each read asks for. Zero
	// means DefaultPageSize.
	PageSize int
	// MaxDiscrepancies is how many discrepancies a report lists; the
	// rest are counted in Report.DiscrepanciesOmitted. Zero means
	// DefaultMaxDiscrepancies.
	MaxDiscrepancies int
}

// Defaults of Options.
const (
	DefaultPageSize         = 1000
	DefaultMaxDiscrepancies = 1000
)

// Kind names one sort of discrepancy. The values are part of the JSON
// output and of the admin API: they never change meaning.
type Kind string

const (
	// An active stock-store record with no order and no failed order,
	// neither recent nor in the outbox: a claim the database never got.
	// Also a restored record that never reached the database.
	KindReservationWithoutOrder Kind = "reservation_without_order"
	// An order or failed order the stock store has no record of.
	KindOrderWithoutReservation Kind = "order_without_reservation"
	// A cancelled order (or a refunded failed order) whose record is
	// still active and no restore is redis_pending: its units are stuck.
	KindLostRestore Kind = "lost_restore"
	// An order ordered or paid whose record is restored: the stock store
	// offers again a unit the database counts sold.
	KindRestoredButOrdered Kind = "restored_but_ordered"
	// A restore request (parked longer than the grace) for a reservation
	// the stock store has no record of.
	KindRestoreForUnknownReservation Kind = "restore_for_unknown_reservation"
	// The database's unsold count is negative.
	KindNegativeStock Kind = "negative_stock"
	// The stock store lost writes it had acknowledged: it holds fewer
	// units than the database sold, it forgot orders' reservations, or
	// claims it forgot were recorded lost (see Report.LostWrites).
	KindStockStoreLostWrites Kind = "stock_store_lost_writes"
	// An equation does not hold, or a reservation's two sides disagree
	// (quantity, status); the detail gives the numbers.
	KindLedgerMismatch Kind = "ledger_mismatch"
	// Buyers whose orders ordered or paid hold more than the sale's
	// per-user limit.
	KindOverLimit Kind = "over_limit"
)

// kindRank orders the discrepancy list: sale-wide problems first, then
// the ones that threaten promise 1, then promise 2.
var kindRank = map[Kind]int{
	KindNegativeStock:                0,
	KindStockStoreLostWrites:         0,
	KindLedgerMismatch:               1,
	KindOverLimit:                    1,
	KindRestoredButOrdered:           2,
	KindReservationWithoutOrder:      3,
	KindOrderWithoutReservation:      4,
	KindLostRestore:                  5,
	KindRestoreForUnknownReservation: 6,
}

// Discrepancy is one thing that does not add up. ReservationID is empty
// for a sale-wide one (an equation).
type Discrepancy struct {
	Kind          Kind   `json:"kind"`
	ReservationID string `json:"reservation_id,omitempty"`
	Detail        string `json:"detail"`
}

// Tally counts reservations and the units they hold.
type Tally struct {
	Count int64 `json:"count"`
	Units int64 `json:"units"`
}

func (t *Tally) add(qty int64) { t.Count++; t.Units += qty }

// StockStoreSide is what the stock store holds.
type StockStoreSide struct {
	// Loaded is false when the sale is not in the stock store (not
	// preheated yet, or its keys are gone): Total and Reserved are 0.
	Loaded    bool  `json:"loaded"`
	Total     int64 `json:"total"`
	Reserved  int64 `json:"reserved"`
	Remaining int64 `json:"remaining"`
	// Active and Restored are the records by status.
	Active   Tally `json:"active"`
	Restored Tally `json:"restored"`
	// StockMoved reports that reserved changed while the records were
	// read (a live sale); equation 1 then allows the range between.
	StockMoved bool `json:"stock_moved,omitempty"`
}

// OrderCounts are the database's orders by status.
type OrderCounts struct {
	Ordered   Tally `json:"ordered"`
	Paid      Tally `json:"paid"`
	Cancelled Tally `json:"cancelled"`
}

// DatabaseSide is the sale row.
type DatabaseSide struct {
	Unsold int64 `json:"unsold"`
	// ImpliedSold is stock − unsold: what the database thinks it sold.
	ImpliedSold int64 `json:"implied_sold"`
}

// RestoreCounts are the restore requests by state.
type RestoreCounts struct {
	Parked       int64 `json:"parked"`
	RedisPending int64 `json:"redis_pending"`
	Done         int64 `json:"done"`
	// Alerted counts the requests not done that raised a stuck alert.
	Alerted int64 `json:"alerted"`
}

// InFlight are the active records with no order yet that are explained by
// time: younger than the grace, or still in the outbox.
type InFlight struct {
	// OutboxLen is the number of outbox entries not yet relayed.
	OutboxLen int64 `json:"outbox_len"`
	Tally
}

// Oversold splits the oversold units by the measure that saw them.
type Oversold struct {
	// Orders: units of orders ordered or paid beyond the stock.
	Orders int64 `json:"orders"`
	// Database: units below zero in the sale's unsold count.
	Database int64 `json:"database"`
	// StockStore: units reserved beyond the stock store's total.
	StockStore int64 `json:"stock_store"`
}

// Undersold splits the units that are neither sold nor available: the
// stock store holds them for reservations the database does not count
// as sold.
type Undersold struct {
	// RestorePending: cancelled (or refunded) with the database step done,
	// the stock-store step pending. They come back by themselves.
	RestorePending int64 `json:"restore_pending"`
	// LostRestore: cancelled, but no restore will give them back.
	LostRestore int64 `json:"lost_restore"`
	// FailedOrders: held for failed orders an operator has not refunded.
	FailedOrders int64 `json:"failed_orders"`
	// Unexplained: held for reservations with no order (see Report.Unexplained).
	Unexplained int64 `json:"unexplained"`
}

// LostWrites is the evidence that the stock store lost writes it had
// acknowledged (Redis with AOF everysec on a power loss, a failover to a
// replica that lagged). Any of it makes the sale unbalanced.
type LostWrites struct {
	// Detected is true when any count below is not zero.
	Detected bool `json:"detected"`
	// OrdersWithoutReservation are orders ordered or paid the stock store
	// has no record of: it does not count their units, so it may sell
	// them again (they count toward PotentialOversold too).
	OrdersWithoutReservation Tally `json:"orders_without_reservation"`
	// ReservedBelowSold is by how many units the stock store's reserved
	// is below what the database sold.
	ReservedBelowSold int64 `json:"reserved_below_sold"`
	// LostClaims are failed orders recorded for claims the stock store
	// forgot before they reached the database (seckill.ReasonLostInStockStore).
	LostClaims Tally `json:"lost_claims"`
	// Heals is how often the engine rebuilt the sale's stock-store state
	// from the database after a loss.
	Heals int64 `json:"heals"`
}

// Report is the result of one reconciliation.
type Report struct {
	SaleID        string    `json:"sale_id"`
	CheckedAt     time.Time `json:"checked_at"`
	InFlightGrace string    `json:"in_flight_grace"`
	// Stock is the units put on sale.
	Stock      int64          `json:"stock"`
	StockStore StockStoreSide `json:"redis"`
	Orders     OrderCounts    `json:"orders"`
	// ActiveUnits are the units of orders ordered or paid.
	ActiveUnits  int64         `json:"active_units"`
	Database     DatabaseSide  `json:"database"`
	FailedOrders Tally         `json:"failed_orders"`
	Restores     RestoreCounts `json:"restores"`
	InFlight     InFlight      `json:"in_flight"`
	// Unexplained are active records with no order or failed order that
	// are not in flight (each is also a discrepancy).
	Unexplained Tally `json:"unexplained"`
	// Oversold must be 0. It is the largest of the three measures in
	// OversoldBy, not their sum: they usually see the same units.
	Oversold   int64    `json:"oversold"`
	OversoldBy Oversold `json:"oversold_by"`
	// PotentialOversold are units not sold twice yet but on offer again:
	// of restored_but_ordered reservations, and of orders ordered or paid
	// the stock store has no record of.
	PotentialOversold int64 `json:"potential_oversold"`
	// LostWrites names a stock store that lost acknowledged writes.
	LostWrites  LostWrites `json:"stock_store_lost_writes"`
	Undersold   int64      `json:"undersold"`
	UndersoldBy Undersold  `json:"undersold_by"`
	// OverLimitBuyers are buyers holding more than the limit (must be 0).
	OverLimitBuyers int64 `json:"over_limit_buyers"`
	// Archived is set when the sale's stock-store keys were archived: the
	// report is the database's alone (see "An archived sale").
	Archived *seckill.SaleArchive `json:"archived,omitempty"`
	// Balanced is OK() at the time of the check: nothing oversold and no
	// discrepancy (every broken equation is one).
	Balanced      bool          `json:"balanced"`
	Discrepancies []Discrepancy `json:"discrepancies"`
	// DiscrepanciesOmitted counts those beyond Options.MaxDiscrepancies.
	DiscrepanciesOmitted int64 `json:"discrepancies_omitted,omitempty"`
}

// OK reports whether the sale passes: nothing oversold (or on offer to be)
// and nothing unexplained. A command exits non-zero when it is false.
func (r *Report) OK() bool {
	return r.Oversold == 0 && r.PotentialOversold == 0 && r.Unexplained.Count == 0 && len(r.Discrepancies) == 0 &&
		r.DiscrepanciesOmitted == 0 && r.OverLimitBuyers == 0 && !r.LostWrites.Detected
}

// Reconcile compares one sale's database ledger with its stock-store side
// (see the package doc for the order of the reads and the equations), a
// page at a time. Errors of either store are returned wrapped; a sale the
// database does not know is seckill.ErrNotFound. A sale not loaded in the
// stock store is not an error: it reconciles against an empty stock
// store, or, once archived, from the database alone.
func Reconcile(ctx context.Context, saleID string, db LedgerPages, stock StockLedger, now time.Time, opts Options) (*Report, error) {
	if opts.InFlightGrace <= 0 {
		opts.InFlightGrace = DefaultInFlightGrace
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.MaxDiscrepancies <= 0 {
		opts.MaxDiscrepancies = DefaultMaxDiscrepancies
	}
	// The database first: see "Reading two stores that move".
	tot, err := db.LedgerTotals(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: database: %w", saleID, err)
	}
	if tot == nil || tot.Sale == nil {
		return nil, fmt.Errorf("reconcile %s: database: %w", saleID, seckill.ErrNotFound)
	}
	c := newComparison(saleID, tot, now, opts)
	if c.outboxLen, err = stock.OutboxLen(ctx, saleID); err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return nil, fmt.Errorf("reconcile %s: outbox: %w", saleID, err)
	}
	before, loaded, err := readStock(ctx, stock, saleID)
	if err != nil {
		return nil, err
	}
	if !loaded && tot.Archive != nil {
		// Archived: the database speaks alone (see "An archived sale").
		c.r.Archived = tot.Archive
		if err := c.databasePass(ctx, db, nil); err != nil {
			return nil, fmt.Errorf("reconcile %s: %w", saleID, err)
		}
		return c.finish(before, before, false), nil
	}
	// Each page of records is looked up in the database after it was
	// read, each page of the database's rows in the stock store after;
	// up to lookups pages at a time, the reads being round trips.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookups)
	err = stock.ScanReservations(gctx, saleID, opts.PageSize, func(page []seckill.ReservationRecord) error {
		page = slices.Clone(page) // the scan reuses it
		g.Go(func() error { return c.records(gctx, db, page) })
		return nil
	})
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return nil, fmt.Errorf("reconcile %s: reservations: %w", saleID, err)
	}
	after, loadedAfter, err := readStock(ctx, stock, saleID)
	if err != nil {
		return nil, err
	}
	if err := c.databasePass(ctx, db, stock); err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", saleID, err)
	}
	return c.finish(before, after, loaded || loadedAfter), nil
}

func readStock(ctx context.Context, stock StockLedger, saleID string) (seckill.StockLevel, bool, error) {
	lvl, err := stock.Stock(ctx, saleID)
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return seckill.StockLevel{}, false, nil
	case err != nil:
		return seckill.StockLevel{}, false, fmt.Errorf("reconcile %s: stock: %w", saleID, err)
	}
	return lvl, true, nil
}

// comparison is one reconciliation in progress. What it holds does not
// grow with the sale: the totals, one page, the discrepancies kept (at
// most twice Options.MaxDiscrepancies) and the unmatched records old
// enough to need the outbox to explain them (at most its length).
type comparison struct {
	r         *Report
	tot       *seckill.LedgerTotals
	saleID    string
	now       time.Time
	grace     time.Duration
	pageSize  int
	keep      int
	outboxLen int64
	// parts are the tables a page of records is looked up in: those the
	// totals say have rows of the sale (most sales have no failed order
	// and many no restore, and each is a query per page).
	parts seckill.LedgerParts
	// mu guards what follows and r: pages are looked up concurrently,
	// and each is then weighed under it.
	mu sync.Mutex
	// young counts the unmatched records younger than the grace; old are
	// the newest outboxLen unmatched records older than it, oldest on top.
	young int64
	old   oldestFirst
}

// lookups is how many pages a comparison looks up in the other store at
// once: each lookup is a round trip or three, and a sale of a million
// reservations is a thousand pages each way.
const lookups = 4

func newComparison(saleID string, tot *seckill.LedgerTotals, now time.Time, opts Options) *comparison {
	sale := tot.Sale
	r := &Report{
		SaleID:        saleID,
		CheckedAt:     now,
		InFlightGrace: opts.InFlightGrace.String(),
		Stock:         sale.Stock,
		Orders:        OrderCounts{Ordered: tally(tot.Ordered), Paid: tally(tot.Paid), Cancelled: tally(tot.Cancelled)},
		Database:      DatabaseSide{Unsold: sale.Unsold, ImpliedSold: sale.Stock - sale.Unsold},
		FailedOrders:  tally(tot.Failed),
		Restores: RestoreCounts{
			Parked: tot.Parked, RedisPending: tot.RedisPending, Done: tot.Done, Alerted: tot.Alerted,
		},
		OverLimitBuyers: tot.OverLimitBuyers,
		Discrepancies:   []Discrepancy{},
	}
	r.ActiveUnits = r.Orders.Ordered.Units + r.Orders.Paid.Units
	r.LostWrites.LostClaims = tally(tot.LostClaims)
	parts := seckill.LedgerOrders
	if tot.Failed.Count > 0 {
		parts |= seckill.LedgerFailed
	}
	if tot.Parked+tot.RedisPending+tot.Done+tot.OtherState > 0 {
		parts |= seckill.LedgerRestores
	}
	return &comparison{r: r, tot: tot, saleID: saleID, now: now, grace: opts.InFlightGrace, pageSize: opts.PageSize, keep: opts.MaxDiscrepancies, parts: parts}
}

func tally(c seckill.LedgerCount) Tally { return Tally{Count: c.Count, Units: c.Units} }

// flag records a discrepancy. Past twice the number a report lists, the
// list is cut back to its first (by kind, then reservation id).
func (c *comparison) flag(k Kind, id, format string, args ...any) {
	c.r.Discrepancies = append(c.r.Discrepancies, Discrepancy{Kind: k, ReservationID: id, Detail: fmt.Sprintf(format, args...)})
	if len(c.r.Discrepancies) >= 2*c.keep {
		c.trim()
	}
}

func (c *comparison) trim() {
	slices.SortStableFunc(c.r.Discrepancies, func(a, b Discrepancy) int {
		return cmp.Or(cmp.Compare(kindRank[a.Kind], kindRank[b.Kind]), cmp.Compare(a.ReservationID, b.ReservationID))
	})
	if n := len(c.r.Discrepancies); n > c.keep {
		c.r.DiscrepanciesOmitted += int64(n - c.keep)
		c.r.Discrepancies = c.r.Discrepancies[:c.keep]
	}
}

// records checks one page of stock-store records against the database
// (equations 1, 3 and 4 from the stock store's side).
func (c *comparison) records(ctx context.Context, db LedgerPages, page []seckill.ReservationRecord) error {
	r := c.r
	ids := make([]string, len(page))
	for i, rec := range page {
		ids[i] = rec.ReservationID
	}
	l, err := db.LedgerOf(ctx, c.saleID, ids, c.parts)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	orders, failed, restores := indexLedger(l)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rec := range page {
		if rec.Restored {
			r.StockStore.Restored.add(rec.Qty)
		} else {
			r.StockStore.Active.add(rec.Qty)
		}
		id := rec.ReservationID
		o, f, q := orders[id], failed[id], restores[id]
		if o != nil && f != nil {
			c.flag(KindLedgerMismatch, id, "both an order (%s) and a failed order: a reservation must end as one", o.Status)
		}
		switch {
		case o != nil:
			if o.Qty != rec.Qty {
				c.flag(KindLedgerMismatch, id, "order has qty %d, stock-store record %d", o.Qty, rec.Qty)
			}
			switch {
			case o.Status.Holds() && rec.Restored:
				r.PotentialOversold += o.Qty
				c.flag(KindRestoredButOrdered, id, "order is %s (qty %d) but the stock store restored it: the units are on offer again (potential oversell)", o.Status, o.Qty)
			case !o.Status.Holds() && !rec.Restored:
				if q != nil && q.State == seckill.RestoreStateRedisPending {
					r.UndersoldBy.RestorePending += rec.Qty
				} else {
					r.UndersoldBy.LostRestore += rec.Qty
					c.flag(KindLostRestore, id, "order cancelled (%s) but the stock store still holds its %d units and %s", orEmpty(o.CancelReason, "no reason"), rec.Qty, restoreState(q))
				}
			}
		case f != nil:
			if f.Qty != rec.Qty {
				c.flag(KindLedgerMismatch, id, "failed order has qty %d, stock-store record %d", f.Qty, rec.Qty)
			}
			switch {
			case rec.Restored:
			case q != nil && q.State == seckill.RestoreStateRedisPending:
				r.UndersoldBy.RestorePending += rec.Qty
			case q != nil && q.State == seckill.RestoreStateDone:
				r.UndersoldBy.LostRestore += rec.Qty
				c.flag(KindLostRestore, id, "failed order refunded (restore done) but the stock store still holds its %d units", rec.Qty)
			default:
				r.UndersoldBy.FailedOrders += rec.Qty
			}
		default:
			c.unmatched(unmatchedRecord{rec, q})
		}
	}
	return nil
}

func indexLedger(l *seckill.SaleLedger) (map[string]*seckill.Order, map[string]*seckill.FailedOrder, map[string]*seckill.RestoreRequest) {
	orders := map[string]*seckill.Order{}
	failed := map[string]*seckill.FailedOrder{}
	restores := map[string]*seckill.RestoreRequest{}
	if l == nil {
		return orders, failed, restores
	}
	for _, o := range l.Orders {
		if o != nil {
			orders[o.ReservationID] = o
		}
	}
	for _, f := range l.Failed {
		if f != nil {
			failed[f.ReservationID] = f
		}
	}
	for _, q := range l.Restores {
		if q != nil {
			restores[q.ReservationID] = q
		}
	}
	return orders, failed, restores
}

// unmatchedRecord is a record with no order and no failed order.
type unmatchedRecord struct {
	rec seckill.ReservationRecord
	q   *seckill.RestoreRequest
}

// newer orders unmatched records newest first, as the outbox holds them.
func newer(a, b seckill.ReservationRecord) bool {
	return cmp.Or(a.ReservedAt.Compare(b.ReservedAt), cmp.Compare(a.ReservationID, b.ReservationID)) > 0
}

// oldestFirst is a heap of unmatched records, the oldest on top.
type oldestFirst []unmatchedRecord

func (h oldestFirst) Len() int           { return len(h) }
func (h oldestFirst) Less(i, j int) bool { return newer(h[j].rec, h[i].rec) }
func (h oldestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *oldestFirst) Push(x any)        { *h = append(*h, x.(unmatchedRecord)) }
func (h *oldestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// unmatched sorts a record with no order out: in flight (younger than the
// grace, or among the newest outboxLen of them: the outbox holds the
// newest unpersisted records, and the young are the newest of all) or
// unexplained. The young are only counted; of the old, the newest
// outboxLen are kept until the end, when the number of young is known.
func (c *comparison) unmatched(u unmatchedRecord) {
	if age := c.now.Sub(u.rec.ReservedAt); !u.rec.ReservedAt.IsZero() && age < c.grace {
		c.young++
		if !u.rec.Restored {
			c.r.InFlight.add(u.rec.Qty)
		}
		return
	}
	heap.Push(&c.old, u)
	if int64(c.old.Len()) > c.outboxLen {
		c.unexplained(heap.Pop(&c.old).(unmatchedRecord))
	}
}

func (c *comparison) unexplained(u unmatchedRecord) {
	rec, r := u.rec, c.r
	age := c.now.Sub(rec.ReservedAt)
	note := ""
	if u.q != nil {
		note = "; " + restoreState(u.q)
	}
	if rec.Restored {
		c.flag(KindReservationWithoutOrder, rec.ReservationID, "restored in the stock store (qty %d, reserved %s ago) but never reached the database: the buyer's claim is lost%s", rec.Qty, ageString(rec.ReservedAt, age), note)
		return
	}
	r.Unexplained.add(rec.Qty)
	r.UndersoldBy.Unexplained += rec.Qty
	c.flag(KindReservationWithoutOrder, rec.ReservationID, "active in the stock store (qty %d, reserved %s ago, user %s) with no order or failed order, and not in the outbox%s", rec.Qty, ageString(rec.ReservedAt, age), rec.UserID, note)
}

// databasePass walks the database's orders, failed orders and restore
// requests by reservation id, a page at a time, and looks each page up in
// the stock store (equations 4 and 5 from the database's side), up to
// lookups pages at once. stock is nil for an archived sale: then no
// record is looked for.
func (c *comparison) databasePass(ctx context.Context, db LedgerPages, stock StockLedger) error {
	recordsOf := func(ctx context.Context, ids []string) (map[string]seckill.ReservationRecord, error) {
		if stock == nil || len(ids) == 0 {
			return nil, nil
		}
		recs, err := stock.ReservationsOf(ctx, c.saleID, ids)
		if err != nil {
			return nil, fmt.Errorf("reservations: %w", err)
		}
		return recs, nil
	}
	if err := eachPage(ctx, db.OrdersAfter, c.saleID, c.pageSize, func(o *seckill.Order) string { return o.ReservationID },
		func(ctx context.Context, page []*seckill.Order, ids []string) error {
			recs, err := recordsOf(ctx, ids)
			if err != nil {
				return err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.orderPage(page, recs, stock != nil)
			return nil
		}); err != nil {
		return err
	}
	if stock != nil {
		if err := eachPage(ctx, db.FailedOrdersAfter, c.saleID, c.pageSize, func(f *seckill.FailedOrder) string { return f.ReservationID },
			func(ctx context.Context, page []*seckill.FailedOrder, ids []string) error {
				recs, err := recordsOf(ctx, ids)
				if err != nil {
					return err
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, f := range page {
					if _, ok := recs[f.ReservationID]; !ok {
						c.flag(KindOrderWithoutReservation, f.ReservationID, "failed order (qty %d, %q) but the stock store has no record of the reservation", f.Qty, f.Reason)
					}
				}
				return nil
			}); err != nil {
			return err
		}
	}
	// Equation 5: a restore request parked longer than the grace for a
	// reservation the stock store has no record of.
	return eachPage(ctx, db.RestoresAfter, c.saleID, c.pageSize, func(q *seckill.RestoreRequest) string { return q.ReservationID },
		func(ctx context.Context, page []*seckill.RestoreRequest, _ []string) error {
			var old []string
			for _, q := range page {
				if c.now.Sub(q.CreatedAt) >= c.grace {
					old = append(old, q.ReservationID)
				}
			}
			recs, err := recordsOf(ctx, old)
			if err != nil {
				return err
			}
			var unknown []*seckill.RestoreRequest
			var unknownIDs []string
			for _, q := range page {
				if _, ok := recs[q.ReservationID]; ok || c.now.Sub(q.CreatedAt) < c.grace {
					continue
				}
				unknown, unknownIDs = append(unknown, q), append(unknownIDs, q.ReservationID)
			}
			var l *seckill.SaleLedger
			if len(unknown) > 0 {
				if l, err = db.LedgerOf(ctx, c.saleID, unknownIDs, seckill.LedgerOrders|seckill.LedgerFailed); err != nil {
					return fmt.Errorf("database: %w", err)
				}
			}
			orders, failed, _ := indexLedger(l)
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, q := range page {
				switch q.State {
				case seckill.RestoreStateParked, seckill.RestoreStateRedisPending, seckill.RestoreStateDone:
				default:
					c.flag(KindLedgerMismatch, q.ReservationID, "restore request in unknown state %q", q.State)
				}
			}
			for _, q := range unknown {
				id := q.ReservationID
				if q.State == seckill.RestoreStateParked || (orders[id] == nil && failed[id] == nil) {
					c.flag(KindRestoreForUnknownReservation, id, "restore request %s since %s (%s) for a reservation the stock store has no record of", q.State, q.CreatedAt.UTC().Format(time.RFC3339), orEmpty(q.Reason, "no reason"))
				}
			}
			return nil
		})
}

// orderPage weighs one page of orders against their records (c.mu held).
func (c *comparison) orderPage(page []*seckill.Order, recs map[string]seckill.ReservationRecord, withStock bool) {
	r, lw := c.r, &c.r.LostWrites
	for _, o := range page {
		if !o.Status.Known() {
			c.flag(KindLedgerMismatch, o.ReservationID, "order %s has unknown status %q", o.ID, o.Status)
		}
		if !withStock {
			continue
		}
		// An order the stock store does not count may be sold again.
		if _, ok := recs[o.ReservationID]; ok {
			continue
		}
		if o.Status.Holds() {
			lw.OrdersWithoutReservation.add(o.Qty)
			r.PotentialOversold += o.Qty
		}
		c.flag(KindOrderWithoutReservation, o.ReservationID, "order %s is %s (qty %d) but the stock store has no record of the reservation", o.ID, o.Status, o.Qty)
	}
}

// eachPage reads the keyset pages of one table of the sale in order and
// hands each to weigh, with its reservation ids, up to lookups at once;
// it returns when every page has been weighed.
func eachPage[T any](ctx context.Context, read func(ctx context.Context, saleID, after string, limit int) ([]*T, error), saleID string, size int,
	idOf func(*T) string, weigh func(ctx context.Context, page []*T, ids []string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookups)
	var err error
	for after := ""; gctx.Err() == nil; {
		var page []*T
		if page, err = read(gctx, saleID, after, size); err != nil {
			err = fmt.Errorf("database: %w", err)
			break
		}
		if len(page) == 0 {
			break
		}
		ids := make([]string, len(page))
		for i, row := range page {
			ids[i] = idOf(row)
		}
		after = ids[len(ids)-1]
		g.Go(func() error { return weigh(gctx, page, ids) })
	}
	if werr := g.Wait(); werr != nil {
		return werr
	}
	return err
}

// finish settles the records kept for the outbox and checks the
// sale-wide equations. before and after are the stock levels read around
// the records.
func (c *comparison) finish(before, after seckill.StockLevel, loaded bool) *Report {
	r, tot, sale := c.r, c.tot, c.tot.Sale
	for keep := max(c.outboxLen-c.young, 0); int64(c.old.Len()) > keep; {
		c.unexplained(heap.Pop(&c.old).(unmatchedRecord))
	}
	for _, u := range c.old {
		if !u.rec.Restored {
			r.InFlight.add(u.rec.Qty)
		}
	}
	c.old = nil
	r.InFlight.OutboxLen = c.outboxLen
	r.StockStore.Loaded = loaded
	r.StockStore.Total, r.StockStore.Reserved, r.StockStore.Remaining = after.Total, after.Reserved, after.Remaining()
	r.StockStore.StockMoved = before != after

	if tot.Other.Count > 0 {
		c.flag(KindLedgerMismatch, "", "database: %d orders (%d units) have an unknown status", tot.Other.Count, tot.Other.Units)
	}
	if tot.OtherState > 0 {
		c.flag(KindLedgerMismatch, "", "database: %d restore requests are in an unknown state", tot.OtherState)
	}
	if tot.OverLimitBuyers > 0 {
		c.flag(KindOverLimit, "", "database: %d buyers hold more than the limit of %d units in orders ordered or paid", tot.OverLimitBuyers, sale.PurchaseLimit)
	}

	if r.Archived != nil {
		// An archived sale: the claims the stock store held when its keys
		// went must each be an order or a failed order.
		recorded := tot.Ordered.Count + tot.Paid.Count + tot.Cancelled.Count + tot.Other.Count + tot.Failed.Count
		if recorded != r.Archived.Claims {
			c.flag(KindLedgerMismatch, "", "database: orders + failed orders = %d but the stock store held %d claims when the sale was archived", recorded, r.Archived.Claims)
		}
	} else {
		// Equation 1 and the stock store's own bounds.
		lo, hi := min(before.Reserved, after.Reserved), max(before.Reserved, after.Reserved)
		if sum := r.StockStore.Active.Units; sum < lo || sum > hi {
			reserved := fmt.Sprint(after.Reserved)
			if lo != hi {
				reserved = fmt.Sprintf("between %d and %d", lo, hi)
			}
			c.flag(KindLedgerMismatch, "", "stock store: reserved is %s but its %d active reservations hold %d units", reserved, r.StockStore.Active.Count, sum)
		}
		if loaded && after.Total != sale.Stock {
			c.flag(KindLedgerMismatch, "", "stock store: total is %d but the sale has %d units on sale", after.Total, sale.Stock)
		}
		if over := after.Reserved - after.Total; loaded && over > 0 {
			r.OversoldBy.StockStore = over
			c.flag(KindLedgerMismatch, "", "stock store: reserved %d exceeds its total %d: oversold by %d", after.Reserved, after.Total, over)
		}
	}

	// Equation 2 and the database's bounds.
	if r.Database.ImpliedSold != r.ActiveUnits {
		c.flag(KindLedgerMismatch, "", "database: stock − unsold = %d − %d = %d but orders ordered or paid hold %d units",
			sale.Stock, sale.Unsold, r.Database.ImpliedSold, r.ActiveUnits)
	}
	if sale.Unsold < 0 {
		r.OversoldBy.Database = -sale.Unsold
		c.flag(KindNegativeStock, "", "database: unsold is %d: the sale row went %d below zero", sale.Unsold, -sale.Unsold)
	}
	if over := r.ActiveUnits - sale.Stock; over > 0 {
		r.OversoldBy.Orders = over
		c.flag(KindLedgerMismatch, "", "database: orders ordered or paid hold %d units of %d on sale: oversold by %d", r.ActiveUnits, sale.Stock, over)
	}
	r.Oversold = max(r.OversoldBy.Orders, r.OversoldBy.Database, r.OversoldBy.StockStore)

	lw := &r.LostWrites
	if below := r.ActiveUnits - after.Reserved; below > 0 && r.Archived == nil {
		lw.ReservedBelowSold = below
	}
	lw.Heals = after.Heals
	lw.Detected = lw.OrdersWithoutReservation.Count > 0 || lw.ReservedBelowSold > 0 || lw.LostClaims.Count > 0 || lw.Heals > 0
	if lw.Detected {
		c.flag(KindStockStoreLostWrites, "", "the stock store lost acknowledged writes: %d orders (%d units) it has no record of, reserved %d below the %d units the database sold, %d claims recorded lost (%d units), %d heals",
			lw.OrdersWithoutReservation.Count, lw.OrdersWithoutReservation.Units, lw.ReservedBelowSold, r.ActiveUnits, lw.LostClaims.Count, lw.LostClaims.Units, lw.Heals)
	}

	u := r.UndersoldBy
	r.Undersold = u.RestorePending + u.LostRestore + u.FailedOrders + u.Unexplained
	c.trim()
	r.Balanced = r.OK()
	return r
}

func restoreState(q *seckill.RestoreRequest) string {
	if q == nil {
		return "no restore request"
	}
	return fmt.Sprintf("its restore request is %s", q.State)
}

func ageString(at time.Time, age time.Duration) string {
	if at.IsZero() {
		return "an unknown time"
	}
	return age.Round(time.Second).String()
}

func orEmpty(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
