package reconcile

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// MaxTableDiscrepancies is how many discrepancies WriteTable prints; the
// JSON output has every one the report kept.
const MaxTableDiscrepancies = 50

// WriteTable writes r for a person: the numbers, a BALANCED or NOT
// BALANCED line, and the discrepancies (at most MaxTableDiscrepancies).
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", label, fmt.Sprintf(format, args...))
	}
	tally := func(t Tally) string { return fmt.Sprintf("%d (%s)", t.Count, units(t.Units)) }

	row("sale", "%s", r.SaleID)
	row("checked at", "%s", r.CheckedAt.UTC().Format(time.RFC3339))
	row("stock on sale", "%s", units(r.Stock))
	switch {
	case r.Archived != nil && !r.StockStore.Loaded:
		row("redis", "archived at %s with %d claims: checked from the database alone", r.Archived.ArchivedAt.UTC().Format(time.RFC3339), r.Archived.Claims)
	case r.StockStore.Loaded:
		moved := ""
		if r.StockStore.StockMoved {
			moved = " (moved while reading)"
		}
		row("redis", "total %d, reserved %d, remaining %d%s", r.StockStore.Total, r.StockStore.Reserved, r.StockStore.Remaining, moved)
	default:
		row("redis", "sale not loaded")
	}
	row("redis records", "active %s, restored %s", tally(r.StockStore.Active), tally(r.StockStore.Restored))
	row("orders ordered", "%s", tally(r.Orders.Ordered))
	row("orders paid", "%s", tally(r.Orders.Paid))
	row("orders cancelled", "%s", tally(r.Orders.Cancelled))
	row("active units", "%d (ordered + paid)", r.ActiveUnits)
	row("database", "unsold %d, implied sold %d", r.Database.Unsold, r.Database.ImpliedSold)
	row("failed orders", "%s", tally(r.FailedOrders))
	row("restore requests", "parked %d, redis_pending %d, done %d, alerted %d",
		r.Restores.Parked, r.Restores.RedisPending, r.Restores.Done, r.Restores.Alerted)
	row("in flight", "%s; outbox %d, grace %s", tally(r.InFlight.Tally), r.InFlight.OutboxLen, r.InFlightGrace)
	row("unexplained", "%s", tally(r.Unexplained))
	row("buyers over limit", "%d", r.OverLimitBuyers)
	o := r.OversoldBy
	row("oversold", "%s (orders %d, database %d, redis %d)", units(r.Oversold), o.Orders, o.Database, o.StockStore)
	row("potential oversold", "%s (restored but ordered, or ordered without a redis record)", units(r.PotentialOversold))
	if lw := r.LostWrites; lw.Detected {
		row("redis lost writes", "YES: %d orders without a record, reserved %d below sold, %s recorded lost, %d heals",
			lw.OrdersWithoutReservation.Count, lw.ReservedBelowSold, tally(lw.LostClaims), lw.Heals)
	}
	u := r.UndersoldBy
	row("undersold", "%s (restore pending %d, lost restore %d, failed orders %d, unexplained %d)",
		units(r.Undersold), u.RestorePending, u.LostRestore, u.FailedOrders, u.Unexplained)
	if err := tw.Flush(); err != nil {
		return err
	}

	if r.OK() {
		_, err := fmt.Fprintln(w, "\nBALANCED")
		return err
	}
	var why []string
	if r.Oversold > 0 {
		why = append(why, "oversold "+units(r.Oversold))
	}
	if r.PotentialOversold > 0 {
		why = append(why, "potential oversold "+units(r.PotentialOversold))
	}
	if r.LostWrites.Detected {
		why = append(why, "redis lost acknowledged writes")
	}
	if r.OverLimitBuyers > 0 {
		why = append(why, plural(int(r.OverLimitBuyers), "buyer", "buyers")+" over the limit")
	}
	why = append(why, plural(len(r.Discrepancies)+int(r.DiscrepanciesOmitted), "discrepancy", "discrepancies"))
	fmt.Fprintf(w, "\nNOT BALANCED: %s\n\n", strings.Join(why, ", "))

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tRESERVATION\tDETAIL")
	for i, d := range r.Discrepancies {
		if i == MaxTableDiscrepancies {
			break
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Kind, orEmpty(d.ReservationID, "-"), d.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(r.Discrepancies) - MaxTableDiscrepancies; n > 0 {
		if _, err := fmt.Fprintf(w, "… and %d more (--json lists them)\n", n); err != nil {
			return err
		}
	}
	if r.DiscrepanciesOmitted > 0 {
		_, err := fmt.Fprintf(w, "… and %d not listed (the report keeps the first %d)\n", r.DiscrepanciesOmitted, len(r.Discrepancies))
		return err
	}
	return nil
}

func units(n int64) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d unit", n)
	}
	return fmt.Sprintf("%d units", n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Gauge is one number of a Report for a metrics system: cmd/seckill
// exports each as a gauge labelled with the sale id. This package imports
// no metrics library.
type Gauge struct {
	Name  string
	Help  string
	Value float64
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Gauges returns r's numbers under stable metric names.
func (r *Report) Gauges() []Gauge {
	b := 0.0
	if r.Balanced {
		b = 1
	}
	return []Gauge{
		{"seckill_reconcile_balanced", "1 when the last reconciliation of the sale found nothing oversold and no discrepancy, else 0.", b},
		{"seckill_reconcile_oversold_units", "Units sold beyond the stock (must be 0; page on any other value).", float64(r.Oversold)},
		{"seckill_reconcile_potential_oversold_units", "Units of orders ordered or paid whose stock-store reservation was restored or is missing: on offer again.", float64(r.PotentialOversold)},
		{"seckill_reconcile_stock_store_lost_writes", "1 when the stock store lost acknowledged writes of the sale (orders it has no record of, reserved below sold, claims recorded lost, heals), else 0.", b2f(r.LostWrites.Detected)},
		{"seckill_reconcile_undersold_units", "Units neither sold nor available (restores pending or lost, failed orders, unexplained reservations).", float64(r.Undersold)},
		{"seckill_reconcile_unexplained_reservations", "Active stock-store reservations with no order or failed order, past the in-flight grace.", float64(r.Unexplained.Count)},
		{"seckill_reconcile_in_flight_reservations", "Active stock-store reservations not yet in the database, within the grace or in the outbox.", float64(r.InFlight.Count)},
		{"seckill_reconcile_discrepancies", "Discrepancies found by the last reconciliation.", float64(len(r.Discrepancies))},
		{"seckill_reconcile_failed_orders", "Failed orders of the sale.", float64(r.FailedOrders.Count)},
		{"seckill_reconcile_restores_parked", "Restore requests parked, waiting for their order.", float64(r.Restores.Parked)},
		{"seckill_reconcile_restores_alerted", "Restore requests not done that raised a stuck alert.", float64(r.Restores.Alerted)},
		{"seckill_reconcile_outbox_entries", "Reservations in the outbox, not yet relayed (the metric keeps its name from when an outbox entry was one reservation).", float64(r.InFlight.OutboxLen)},
		{"seckill_reconcile_last_run_timestamp_seconds", "When the sale was last reconciled (Unix time).", float64(r.CheckedAt.UnixNano()) / 1e9},
	}
}
