// Package reconcile checks that a sale's two ledgers agree: the stock
// store (Redis), which decides every claim, and the database, which is the
// source of truth for what was sold. It reads both once, writes nothing,
// and reports oversold units (must be 0), undersold units (tolerated,
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
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
}

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
)

// kindRank orders the discrepancy list: sale-wide problems first, then
// the ones that threaten promise 1, then promise 2.
var kindRank = map[Kind]int{
	KindNegativeStock:                0,
	KindStockStoreLostWrites:         0,
	KindLedgerMismatch:               1,
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
	// Balanced is OK() at the time of the check: nothing oversold and no
	// discrepancy (every broken equation is one).
	Balanced      bool          `json:"balanced"`
	Discrepancies []Discrepancy `json:"discrepancies"`
}

// OK reports whether the sale passes: nothing oversold (or on offer to be)
// and nothing unexplained. A command exits non-zero when it is false.
func (r *Report) OK() bool {
	return r.Oversold == 0 && r.PotentialOversold == 0 && r.Unexplained.Count == 0 && len(r.Discrepancies) == 0 && !r.LostWrites.Detected
}

// Reconcile reads one sale's database ledger, then its stock-store side,
// and compares them (see the package doc for the order and the
// equations). Errors of either store are returned wrapped; a sale the
// database does not know is seckill.ErrNotFound. A sale not loaded in the
// stock store is not an error: it reconciles against an empty stock store.
func Reconcile(ctx context.Context, saleID string, db seckill.LedgerStore, stock seckill.StockLedger, now time.Time, opts Options) (*Report, error) {
	if opts.InFlightGrace <= 0 {
		opts.InFlightGrace = DefaultInFlightGrace
	}
	s := snapshot{now: now, grace: opts.InFlightGrace}
	var err error
	// The database first: see "Reading two stores that move".
	if s.ledger, err = db.SaleLedger(ctx, saleID); err != nil {
		return nil, fmt.Errorf("reconcile %s: database: %w", saleID, err)
	}
	if s.ledger == nil || s.ledger.Sale == nil {
		return nil, fmt.Errorf("reconcile %s: database: %w", saleID, seckill.ErrNotFound)
	}
	if s.outboxLen, err = stock.OutboxLen(ctx, saleID); err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return nil, fmt.Errorf("reconcile %s: outbox: %w", saleID, err)
	}
	if s.before, s.loaded, err = readStock(ctx, stock, saleID); err != nil {
		return nil, err
	}
	if s.records, err = stock.Reservations(ctx, saleID); err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return nil, fmt.Errorf("reconcile %s: reservations: %w", saleID, err)
	}
	var loadedAfter bool
	if s.after, loadedAfter, err = readStock(ctx, stock, saleID); err != nil {
		return nil, err
	}
	s.loaded = s.loaded || loadedAfter
	return s.report(saleID), nil
}

func readStock(ctx context.Context, stock seckill.StockLedger, saleID string) (seckill.StockLevel, bool, error) {
	lvl, err := stock.Stock(ctx, saleID)
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return seckill.StockLevel{}, false, nil
	case err != nil:
		return seckill.StockLevel{}, false, fmt.Errorf("reconcile %s: stock: %w", saleID, err)
	}
	return lvl, true, nil
}

// snapshot is what Reconcile read.
type snapshot struct {
	now           time.Time
	grace         time.Duration
	ledger        *seckill.SaleLedger
	loaded        bool
	before, after seckill.StockLevel
	records       []seckill.ReservationRecord
	outboxLen     int64
}

// report computes the Report of s. It is pure: tests and callers with
// their own reads may rely on it doing no I/O.
func (s *snapshot) report(saleID string) *Report {
	sale := s.ledger.Sale
	r := &Report{
		SaleID:        saleID,
		CheckedAt:     s.now,
		InFlightGrace: s.grace.String(),
		Stock:         sale.Stock,
		StockStore: StockStoreSide{
			Loaded:     s.loaded,
			Total:      s.after.Total,
			Reserved:   s.after.Reserved,
			Remaining:  s.after.Remaining(),
			StockMoved: s.before != s.after,
		},
		Database:      DatabaseSide{Unsold: sale.Unsold, ImpliedSold: sale.Stock - sale.Unsold},
		InFlight:      InFlight{OutboxLen: s.outboxLen},
		Discrepancies: []Discrepancy{},
	}
	flag := func(k Kind, id, format string, args ...any) {
		r.Discrepancies = append(r.Discrepancies, Discrepancy{Kind: k, ReservationID: id, Detail: fmt.Sprintf(format, args...)})
	}

	// Index both sides by reservation id.
	orders := map[string]*seckill.Order{}
	for _, o := range s.ledger.Orders {
		if o == nil {
			continue
		}
		orders[o.ReservationID] = o
		switch o.Status {
		case seckill.OrderPlaced:
			r.Orders.Ordered.add(o.Qty)
		case seckill.OrderPaid:
			r.Orders.Paid.add(o.Qty)
		case seckill.OrderCancelled:
			r.Orders.Cancelled.add(o.Qty)
		default:
			flag(KindLedgerMismatch, o.ReservationID, "order %s has unknown status %q", o.ID, o.Status)
		}
	}
	r.ActiveUnits = r.Orders.Ordered.Units + r.Orders.Paid.Units
	failed := map[string]*seckill.FailedOrder{}
	for _, f := range s.ledger.Failed {
		if f == nil {
			continue
		}
		failed[f.ReservationID] = f
		r.FailedOrders.add(f.Qty)
	}
	restores := map[string]*seckill.RestoreRequest{}
	for _, q := range s.ledger.Restores {
		if q == nil {
			continue
		}
		restores[q.ReservationID] = q
		switch q.State {
		case seckill.RestoreStateParked:
			r.Restores.Parked++
		case seckill.RestoreStateRedisPending:
			r.Restores.RedisPending++
		case seckill.RestoreStateDone:
			r.Restores.Done++
		default:
			flag(KindLedgerMismatch, q.ReservationID, "restore request in unknown state %q", q.State)
		}
		if !q.AlertedAt.IsZero() && q.State != seckill.RestoreStateDone {
			r.Restores.Alerted++
		}
	}
	records := map[string]seckill.ReservationRecord{}
	for _, rec := range s.records {
		records[rec.ReservationID] = rec
	}
	for _, rec := range records {
		if rec.Restored {
			r.StockStore.Restored.add(rec.Qty)
		} else {
			r.StockStore.Active.add(rec.Qty)
		}
	}

	// Equation 1 and the stock store's own bounds.
	lo, hi := min(s.before.Reserved, s.after.Reserved), max(s.before.Reserved, s.after.Reserved)
	if sum := r.StockStore.Active.Units; sum < lo || sum > hi {
		reserved := fmt.Sprint(s.after.Reserved)
		if lo != hi {
			reserved = fmt.Sprintf("between %d and %d", lo, hi)
		}
		flag(KindLedgerMismatch, "", "stock store: reserved is %s but its %d active reservations hold %d units", reserved, r.StockStore.Active.Count, sum)
	}
	if s.loaded && s.after.Total != sale.Stock {
		flag(KindLedgerMismatch, "", "stock store: total is %d but the sale has %d units on sale", s.after.Total, sale.Stock)
	}
	if over := s.after.Reserved - s.after.Total; s.loaded && over > 0 {
		r.OversoldBy.StockStore = over
		flag(KindLedgerMismatch, "", "stock store: reserved %d exceeds its total %d: oversold by %d", s.after.Reserved, s.after.Total, over)
	}

	// Equation 2 and the database's bounds.
	if r.Database.ImpliedSold != r.ActiveUnits {
		flag(KindLedgerMismatch, "", "database: stock − unsold = %d − %d = %d but orders ordered or paid hold %d units",
			sale.Stock, sale.Unsold, r.Database.ImpliedSold, r.ActiveUnits)
	}
	if sale.Unsold < 0 {
		r.OversoldBy.Database = -sale.Unsold
		flag(KindNegativeStock, "", "database: unsold is %d: the sale row went %d below zero", sale.Unsold, -sale.Unsold)
	}
	if over := r.ActiveUnits - sale.Stock; over > 0 {
		r.OversoldBy.Orders = over
		flag(KindLedgerMismatch, "", "database: orders ordered or paid hold %d units of %d on sale: oversold by %d", r.ActiveUnits, sale.Stock, over)
	}
	r.Oversold = max(r.OversoldBy.Orders, r.OversoldBy.Database, r.OversoldBy.StockStore)

	// Equations 3 and 4, record by record.
	var unmatched []seckill.ReservationRecord
	for _, id := range sortedKeys(records) {
		rec := records[id]
		o, f, q := orders[id], failed[id], restores[id]
		if o != nil && f != nil {
			flag(KindLedgerMismatch, id, "both an order (%s) and a failed order: a reservation must end as one", o.Status)
		}
		switch {
		case o != nil:
			if o.Qty != rec.Qty {
				flag(KindLedgerMismatch, id, "order has qty %d, stock-store record %d", o.Qty, rec.Qty)
			}
			switch {
			case o.Status != seckill.OrderCancelled && rec.Restored:
				r.PotentialOversold += o.Qty
				flag(KindRestoredButOrdered, id, "order is %s (qty %d) but the stock store restored it: the units are on offer again (potential oversell)", o.Status, o.Qty)
			case o.Status == seckill.OrderCancelled && !rec.Restored:
				if q != nil && q.State == seckill.RestoreStateRedisPending {
					r.UndersoldBy.RestorePending += rec.Qty
				} else {
					r.UndersoldBy.LostRestore += rec.Qty
					flag(KindLostRestore, id, "order cancelled (%s) but the stock store still holds its %d units and %s", orEmpty(o.CancelReason, "no reason"), rec.Qty, restoreState(q))
				}
			}
		case f != nil:
			if f.Qty != rec.Qty {
				flag(KindLedgerMismatch, id, "failed order has qty %d, stock-store record %d", f.Qty, rec.Qty)
			}
			switch {
			case rec.Restored:
			case q != nil && q.State == seckill.RestoreStateRedisPending:
				r.UndersoldBy.RestorePending += rec.Qty
			case q != nil && q.State == seckill.RestoreStateDone:
				r.UndersoldBy.LostRestore += rec.Qty
				flag(KindLostRestore, id, "failed order refunded (restore done) but the stock store still holds its %d units", rec.Qty)
			default:
				r.UndersoldBy.FailedOrders += rec.Qty
			}
		default:
			unmatched = append(unmatched, rec)
		}
	}

	// In flight: the outbox holds the newest unpersisted records, and
	// anything younger than the grace may be between outbox and database.
	slices.SortFunc(unmatched, func(a, b seckill.ReservationRecord) int {
		return cmp.Or(b.ReservedAt.Compare(a.ReservedAt), cmp.Compare(b.ReservationID, a.ReservationID))
	})
	for i, rec := range unmatched {
		age := s.now.Sub(rec.ReservedAt)
		if int64(i) < s.outboxLen || (!rec.ReservedAt.IsZero() && age < s.grace) {
			if !rec.Restored {
				r.InFlight.add(rec.Qty)
			}
			continue
		}
		note := ""
		if q := restores[rec.ReservationID]; q != nil {
			note = "; " + restoreState(q)
		}
		if rec.Restored {
			flag(KindReservationWithoutOrder, rec.ReservationID, "restored in the stock store (qty %d, reserved %s ago) but never reached the database: the buyer's claim is lost%s", rec.Qty, ageString(rec.ReservedAt, age), note)
			continue
		}
		r.Unexplained.add(rec.Qty)
		r.UndersoldBy.Unexplained += rec.Qty
		flag(KindReservationWithoutOrder, rec.ReservationID, "active in the stock store (qty %d, reserved %s ago, user %s) with no order or failed order, and not in the outbox%s", rec.Qty, ageString(rec.ReservedAt, age), rec.UserID, note)
	}

	// Equation 4 from the database side.
	// An order the stock store does not count may be sold again.
	lw := &r.LostWrites
	for _, id := range sortedKeys(orders) {
		if _, ok := records[id]; !ok {
			o := orders[id]
			if o.Status != seckill.OrderCancelled {
				lw.OrdersWithoutReservation.add(o.Qty)
				r.PotentialOversold += o.Qty
			}
			flag(KindOrderWithoutReservation, id, "order %s is %s (qty %d) but the stock store has no record of the reservation", o.ID, o.Status, o.Qty)
		}
	}
	for _, id := range sortedKeys(failed) {
		f := failed[id]
		if strings.HasPrefix(f.Reason, seckill.ReasonLostInStockStore) {
			lw.LostClaims.add(f.Qty)
		}
		if _, ok := records[id]; !ok {
			flag(KindOrderWithoutReservation, id, "failed order (qty %d, %q) but the stock store has no record of the reservation", f.Qty, f.Reason)
		}
	}
	if below := r.ActiveUnits - s.after.Reserved; below > 0 {
		lw.ReservedBelowSold = below
	}
	lw.Heals = s.after.Heals
	lw.Detected = lw.OrdersWithoutReservation.Count > 0 || lw.ReservedBelowSold > 0 || lw.LostClaims.Count > 0 || lw.Heals > 0
	if lw.Detected {
		flag(KindStockStoreLostWrites, "", "the stock store lost acknowledged writes: %d orders (%d units) it has no record of, reserved %d below the %d units the database sold, %d claims recorded lost (%d units), %d heals",
			lw.OrdersWithoutReservation.Count, lw.OrdersWithoutReservation.Units, lw.ReservedBelowSold, r.ActiveUnits, lw.LostClaims.Count, lw.LostClaims.Units, lw.Heals)
	}

	// Equation 5.
	for _, id := range sortedKeys(restores) {
		q := restores[id]
		if _, ok := records[id]; ok || s.now.Sub(q.CreatedAt) < s.grace {
			continue
		}
		if q.State == seckill.RestoreStateParked || (orders[id] == nil && failed[id] == nil) {
			flag(KindRestoreForUnknownReservation, id, "restore request %s since %s (%s) for a reservation the stock store has no record of", q.State, q.CreatedAt.UTC().Format(time.RFC3339), orEmpty(q.Reason, "no reason"))
		}
	}

	u := r.UndersoldBy
	r.Undersold = u.RestorePending + u.LostRestore + u.FailedOrders + u.Unexplained
	slices.SortStableFunc(r.Discrepancies, func(a, b Discrepancy) int {
		return cmp.Or(cmp.Compare(kindRank[a.Kind], kindRank[b.Kind]), cmp.Compare(a.ReservationID, b.ReservationID))
	})
	r.Balanced = r.OK()
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
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
