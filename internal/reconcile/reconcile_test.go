package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

var now = time.Date(2030, 1, 1, 12, 30, 0, 0, time.UTC)

// world is both sides of one sale, kept consistent by its helpers; a test
// breaks it on purpose.
type world struct {
	sale     *seckill.Sale
	orders   []*seckill.Order
	failed   []*seckill.FailedOrder
	restores []*seckill.RestoreRequest
	level    seckill.StockLevel
	loaded   bool
	records  []seckill.ReservationRecord
	outbox   int64
	archive  *seckill.SaleArchive
}

func newWorld(stock int64) *world {
	return &world{
		sale:   &seckill.Sale{ID: "tea", Name: "Tea", Stock: stock, Unsold: stock, PurchaseLimit: 2},
		level:  seckill.StockLevel{Total: stock},
		loaded: true,
	}
}

// reserve records an active reservation in the stock store.
func (w *world) reserve(id string, qty int64, at time.Time) {
	w.records = append(w.records, seckill.ReservationRecord{ReservationID: id, UserID: "u-" + id, Qty: qty, ReservedAt: at})
	w.level.Reserved += qty
}

// restoreRedis marks a record restored, as the restore script does.
func (w *world) restoreRedis(id string) {
	for i := range w.records {
		if w.records[i].ReservationID == id && !w.records[i].Restored {
			w.records[i].Restored = true
			w.level.Reserved -= w.records[i].Qty
		}
	}
}

// dropRecords deletes the active records whose id starts with prefix.
func (w *world) dropRecords(prefix string) {
	w.records = slices.DeleteFunc(w.records, func(r seckill.ReservationRecord) bool {
		if strings.HasPrefix(r.ReservationID, prefix) && !r.Restored {
			w.level.Reserved -= r.Qty
			return true
		}
		return false
	})
}

func (w *world) record(id string) *seckill.ReservationRecord {
	for i := range w.records {
		if w.records[i].ReservationID == id {
			return &w.records[i]
		}
	}
	return nil
}

func (w *world) order(id string) *seckill.Order {
	for _, o := range w.orders {
		if o.ReservationID == id {
			return o
		}
	}
	return nil
}

// persist turns a reservation into an order, taking database stock.
func (w *world) persist(id string, status seckill.OrderStatus) {
	rec := w.record(id)
	w.orders = append(w.orders, &seckill.Order{
		ID: seckill.OrderIDOf(id), ReservationID: id, SaleID: "tea", UserID: rec.UserID,
		Qty: rec.Qty, Status: status, ReservedAt: rec.ReservedAt,
	})
	w.sale.Unsold -= rec.Qty
	if status == seckill.OrderCancelled {
		panic("persist cancelled: use cancel")
	}
}

// cancel runs the database step of a restore: order cancelled, units back,
// request redis_pending.
func (w *world) cancel(id string) {
	o := w.order(id)
	o.Status, o.CancelReason = seckill.OrderCancelled, "payment timeout"
	w.sale.Unsold += o.Qty
	w.restores = append(w.restores, &seckill.RestoreRequest{
		ReservationID: id, SaleID: "tea", Reason: "payment timeout",
		State: seckill.RestoreStateRedisPending, CreatedAt: now.Add(-time.Hour),
	})
}

func (w *world) request(id string) *seckill.RestoreRequest {
	for _, q := range w.restores {
		if q.ReservationID == id {
			return q
		}
	}
	return nil
}

func (w *world) fail(id string) {
	rec := w.record(id)
	w.failed = append(w.failed, &seckill.FailedOrder{ReservationID: id, SaleID: "tea", UserID: rec.UserID, Qty: rec.Qty, Reason: "database lacked the stock", Attempts: 1})
}

// balanced is a sale of 250 with 200 units sold: 150 paid, 50 ordered;
// 30 more cancelled and restored on both sides; 5 failed orders (units
// still held) and one refunded; one cancelled with its Redis step
// pending; 10 in flight (6 recent, 4 older but still in the outbox), one
// of which has a parked restore waiting for it.
func balanced() *world {
	w := newWorld(250)
	old := now.Add(-20 * time.Minute)
	for i := range 150 {
		id := fmt.Sprintf("tea.paid-%03d", i)
		w.reserve(id, 1, old)
		w.persist(id, seckill.OrderPaid)
	}
	for i := range 50 {
		id := fmt.Sprintf("tea.ordered-%03d", i)
		w.reserve(id, 1, old)
		w.persist(id, seckill.OrderPlaced)
	}
	for i := range 30 {
		id := fmt.Sprintf("tea.cancelled-%03d", i)
		w.reserve(id, 1, old)
		w.persist(id, seckill.OrderPlaced)
		w.cancel(id)
		w.restoreRedis(id)
		w.request(id).State = seckill.RestoreStateDone
	}
	for i := range 5 {
		id := fmt.Sprintf("tea.failed-%03d", i)
		w.reserve(id, 1, old)
		w.fail(id)
	}
	w.reserve("tea.refunded", 1, old)
	w.fail("tea.refunded")
	w.restores = append(w.restores, &seckill.RestoreRequest{ReservationID: "tea.refunded", SaleID: "tea", State: seckill.RestoreStateDone, CreatedAt: old})
	w.restoreRedis("tea.refunded")

	w.reserve("tea.pending-restore", 1, old)
	w.persist("tea.pending-restore", seckill.OrderPlaced)
	w.cancel("tea.pending-restore")

	for i := range 4 {
		w.reserve(fmt.Sprintf("tea.outbox-%03d", i), 1, now.Add(-5*time.Minute))
	}
	for i := range 6 {
		w.reserve(fmt.Sprintf("tea.recent-%03d", i), 1, now.Add(-30*time.Second))
	}
	w.outbox = 10
	w.restores = append(w.restores, &seckill.RestoreRequest{ReservationID: "tea.recent-000", SaleID: "tea", State: seckill.RestoreStateParked, CreatedAt: now.Add(-10 * time.Second)})
	return w
}

// fakeLedger is the database port over a world.
type fakeLedger struct {
	w     *world
	err   error
	calls *[]string
}

func (f fakeLedger) LedgerTotals(_ context.Context, saleID string) (*seckill.LedgerTotals, error) {
	*f.calls = append(*f.calls, "ledger")
	if f.err != nil {
		return nil, f.err
	}
	if saleID != f.w.sale.ID {
		return nil, seckill.ErrNotFound
	}
	s := *f.w.sale
	t := &seckill.LedgerTotals{Sale: &s, Archive: f.w.archive}
	add := func(c *seckill.LedgerCount, qty int64) { c.Count++; c.Units += qty }
	held := map[string]int64{}
	for _, o := range f.w.orders {
		switch o.Status {
		case seckill.OrderPlaced:
			add(&t.Ordered, o.Qty)
		case seckill.OrderPaid:
			add(&t.Paid, o.Qty)
		case seckill.OrderCancelled:
			add(&t.Cancelled, o.Qty)
		default:
			add(&t.Other, o.Qty)
		}
		if o.Status == seckill.OrderPlaced || o.Status == seckill.OrderPaid {
			held[o.UserID] += o.Qty
		}
	}
	for _, n := range held {
		if n > s.PurchaseLimit {
			t.OverLimitBuyers++
		}
	}
	for _, fo := range f.w.failed {
		add(&t.Failed, fo.Qty)
		if strings.HasPrefix(fo.Reason, seckill.ReasonLostInStockStore) {
			add(&t.LostClaims, fo.Qty)
		}
	}
	for _, q := range f.w.restores {
		switch q.State {
		case seckill.RestoreStateParked:
			t.Parked++
		case seckill.RestoreStateRedisPending:
			t.RedisPending++
		case seckill.RestoreStateDone:
			t.Done++
		default:
			t.OtherState++
		}
		if !q.AlertedAt.IsZero() && q.State != seckill.RestoreStateDone {
			t.Alerted++
		}
	}
	return t, nil
}

func (f fakeLedger) OrdersAfter(_ context.Context, _, after string, limit int) ([]*seckill.Order, error) {
	return servicetest.PageAfter(f.w.orders, func(o *seckill.Order) string { return o.ReservationID }, after, limit), f.err
}

func (f fakeLedger) FailedOrdersAfter(_ context.Context, _, after string, limit int) ([]*seckill.FailedOrder, error) {
	return servicetest.PageAfter(f.w.failed, func(o *seckill.FailedOrder) string { return o.ReservationID }, after, limit), f.err
}

func (f fakeLedger) RestoresAfter(_ context.Context, _, after string, limit int) ([]*seckill.RestoreRequest, error) {
	return servicetest.PageAfter(f.w.restores, func(o *seckill.RestoreRequest) string { return o.ReservationID }, after, limit), f.err
}

func (f fakeLedger) LedgerOf(_ context.Context, _ string, ids []string, parts seckill.LedgerParts) (*seckill.SaleLedger, error) {
	if f.err != nil {
		return nil, f.err
	}
	l := &seckill.SaleLedger{}
	for _, o := range f.w.orders {
		if slices.Contains(ids, o.ReservationID) && parts&seckill.LedgerOrders != 0 {
			l.Orders = append(l.Orders, o)
		}
	}
	for _, o := range f.w.failed {
		if slices.Contains(ids, o.ReservationID) && parts&seckill.LedgerFailed != 0 {
			l.Failed = append(l.Failed, o)
		}
	}
	for _, o := range f.w.restores {
		if slices.Contains(ids, o.ReservationID) && parts&seckill.LedgerRestores != 0 {
			l.Restores = append(l.Restores, o)
		}
	}
	return l, nil
}

// fakeStock is the stock-store port over a world. levels, if set, are
// answered to successive Stock calls instead of the world's level (a sale
// moving during the read).
type fakeStock struct {
	w      *world
	err    error
	levels []seckill.StockLevel
	calls  *[]string
}

func (f *fakeStock) Stock(context.Context, string) (seckill.StockLevel, error) {
	*f.calls = append(*f.calls, "stock")
	if f.err != nil {
		return seckill.StockLevel{}, f.err
	}
	if !f.w.loaded {
		return seckill.StockLevel{}, fmt.Errorf("stock: %w", seckill.ErrNotFound)
	}
	if len(f.levels) > 0 {
		l := f.levels[0]
		f.levels = f.levels[1:]
		return l, nil
	}
	return f.w.level, nil
}

func (f *fakeStock) Reservations(context.Context, string) ([]seckill.ReservationRecord, error) {
	*f.calls = append(*f.calls, "reservations")
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.w.records), nil
}

// ScanReservations pages the records newest first, as HSCAN gives
// them in no particular order.
func (f *fakeStock) ScanReservations(_ context.Context, _ string, count int, fn func([]seckill.ReservationRecord) error) error {
	*f.calls = append(*f.calls, "reservations")
	if f.err != nil {
		return f.err
	}
	recs := slices.Clone(f.w.records)
	slices.Reverse(recs)
	for len(recs) > 0 {
		n := min(count, len(recs))
		if err := fn(recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func (f *fakeStock) ReservationsOf(_ context.Context, _ string, ids []string) (map[string]seckill.ReservationRecord, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := map[string]seckill.ReservationRecord{}
	for _, r := range f.w.records {
		if slices.Contains(ids, r.ReservationID) {
			out[r.ReservationID] = r
		}
	}
	return out, nil
}

func (f *fakeStock) OutboxLen(context.Context, string) (int64, error) {
	*f.calls = append(*f.calls, "outbox")
	if f.err != nil {
		return 0, f.err
	}
	return f.w.outbox, nil
}

func reconcileWorld(t *testing.T, w *world) *Report {
	t.Helper()
	var calls []string
	r, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, calls: &calls}, &fakeStock{w: w, calls: &calls}, now, Options{})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return r
}

func kinds(r *Report) []string {
	var out []string
	for _, d := range r.Discrepancies {
		out = append(out, fmt.Sprintf("%s %s", d.Kind, d.ReservationID))
	}
	return out
}

func TestBalancedSale(t *testing.T) {
	r := reconcileWorld(t, balanced())
	if !r.Balanced || !r.OK() || len(r.Discrepancies) != 0 {
		t.Fatalf("balanced sale: Balanced=%v OK=%v discrepancies %q", r.Balanced, r.OK(), kinds(r))
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"stock", r.Stock, int64(250)},
		{"redis", [3]int64{r.StockStore.Total, r.StockStore.Reserved, r.StockStore.Remaining}, [3]int64{250, 216, 34}},
		{"redis active", r.StockStore.Active, Tally{216, 216}},
		{"redis restored", r.StockStore.Restored, Tally{31, 31}},
		{"ordered", r.Orders.Ordered, Tally{50, 50}},
		{"paid", r.Orders.Paid, Tally{150, 150}},
		{"cancelled", r.Orders.Cancelled, Tally{31, 31}},
		{"active units", r.ActiveUnits, int64(200)},
		{"database", r.Database, DatabaseSide{Unsold: 50, ImpliedSold: 200}},
		{"failed", r.FailedOrders, Tally{6, 6}},
		{"restores", r.Restores, RestoreCounts{Parked: 1, RedisPending: 1, Done: 31}},
		{"in flight", r.InFlight, InFlight{OutboxLen: 10, Tally: Tally{10, 10}}},
		{"unexplained", r.Unexplained, Tally{}},
		{"oversold", r.Oversold, int64(0)},
		{"potential oversold", r.PotentialOversold, int64(0)},
		{"undersold", r.Undersold, int64(6)},
		{"undersold by", r.UndersoldBy, Undersold{RestorePending: 1, FailedOrders: 5}},
		{"grace", r.InFlightGrace, "2m0s"},
		{"checked at", r.CheckedAt, now},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %+v; want %+v", c.name, c.got, c.want)
		}
	}
}

func TestPlantedDiscrepancies(t *testing.T) {
	tests := []struct {
		name  string
		plant func(w *world)
		// want are "kind reservation-id" lines, in report order.
		want              []string
		ok                bool
		oversold          int64
		potentialOversold int64
		undersold         int64
		unexplained       int64
	}{
		{
			name: "reservation without order past the grace",
			plant: func(w *world) {
				w.reserve("tea.lost", 1, now.Add(-10*time.Minute))
			},
			want:        []string{"reservation_without_order tea.lost"},
			undersold:   7,
			unexplained: 1,
		},
		{
			name: "reservation without order within the grace is in flight",
			plant: func(w *world) {
				w.dropRecords("tea.outbox-") // relayed and persisted...
				w.outbox = 0
				w.reserve("tea.new", 1, now.Add(-time.Minute)) // ...and this one relayed, not yet persisted
			},
			ok:        true,
			undersold: 6,
		},
		{
			name: "a new reservation still in the outbox",
			plant: func(w *world) {
				w.reserve("tea.new", 1, now.Add(-time.Minute))
				w.outbox++
			},
			ok:        true,
			undersold: 6,
		},
		{
			name: "a new reservation relayed out of turn leaves the oldest unexplained",
			plant: func(w *world) {
				// 11 unpersisted, 10 in the outbox: the relay publishes
				// oldest first, so the oldest is the one not in it.
				w.reserve("tea.new", 1, now.Add(-time.Minute))
			},
			want:        []string{"reservation_without_order tea.outbox-000"},
			undersold:   7,
			unexplained: 1,
		},
		{
			name:        "outbox drained: older records are no longer in flight",
			plant:       func(w *world) { w.outbox = 2 },
			want:        []string{"reservation_without_order tea.outbox-000", "reservation_without_order tea.outbox-001", "reservation_without_order tea.outbox-002", "reservation_without_order tea.outbox-003"},
			undersold:   10,
			unexplained: 4,
		},
		{
			name: "outbox holding more than the recent records covers the older ones",
			plant: func(w *world) {
				w.outbox = 11
				w.reserve("tea.stuck-in-outbox", 1, now.Add(-time.Hour))
			},
			ok:        true,
			undersold: 6,
		},
		{
			name: "order without reservation",
			plant: func(w *world) {
				w.orders = append(w.orders, &seckill.Order{ID: "o-tea.ghost", ReservationID: "tea.ghost", SaleID: "tea", Qty: 1, Status: seckill.OrderPaid})
				w.sale.Unsold--
			},
			// The stock store does not count its unit: it may sell it
			// again, and it lost a write.
			want:              []string{"stock_store_lost_writes ", "order_without_reservation tea.ghost"},
			potentialOversold: 1,
			undersold:         6,
		},
		{
			name: "claim recorded lost in the stock store",
			plant: func(w *world) {
				w.failed = append(w.failed, &seckill.FailedOrder{ReservationID: "tea.lost", SaleID: "tea", Qty: 1, Reason: seckill.ReasonLostInStockStore + ": gone"})
			},
			want:      []string{"stock_store_lost_writes ", "order_without_reservation tea.lost"},
			undersold: 6,
		},
		{
			name: "failed order without reservation",
			plant: func(w *world) {
				w.failed = append(w.failed, &seckill.FailedOrder{ReservationID: "tea.poison", SaleID: "tea", Qty: 1, Reason: "malformed"})
			},
			want:      []string{"order_without_reservation tea.poison"},
			undersold: 6,
		},
		{
			name: "lost restore: cancelled, record active, no request",
			plant: func(w *world) {
				w.record("tea.cancelled-007").Restored = false
				w.level.Reserved++
				w.restores = slices.DeleteFunc(w.restores, func(q *seckill.RestoreRequest) bool { return q.ReservationID == "tea.cancelled-007" })
			},
			want:      []string{"lost_restore tea.cancelled-007"},
			undersold: 7,
		},
		{
			name: "lost restore: cancelled, record active, request done",
			plant: func(w *world) {
				w.record("tea.cancelled-008").Restored = false
				w.level.Reserved++
			},
			want:      []string{"lost_restore tea.cancelled-008"},
			undersold: 7,
		},
		{
			name: "lost restore: refunded failed order still held",
			plant: func(w *world) {
				w.record("tea.refunded").Restored = false
				w.level.Reserved++
			},
			want:      []string{"lost_restore tea.refunded"},
			undersold: 7,
		},
		{
			name:      "negative database stock",
			plant:     func(w *world) { w.sale.Unsold = -1 },
			want:      []string{"negative_stock ", "ledger_mismatch "},
			oversold:  1,
			undersold: 6,
		},
		{
			name:              "restored but ordered",
			plant:             func(w *world) { w.restoreRedis("tea.paid-042") },
			want:              []string{"restored_but_ordered tea.paid-042"},
			potentialOversold: 1,
			undersold:         6,
		},
		{
			name:      "ledger mismatch: redis reserved without records",
			plant:     func(w *world) { w.level.Reserved += 3 },
			want:      []string{"ledger_mismatch "},
			undersold: 6,
		},
		{
			name:      "ledger mismatch: records without redis reserved",
			plant:     func(w *world) { w.level.Reserved -= 2 },
			want:      []string{"ledger_mismatch "},
			undersold: 6,
		},
		{
			name:      "ledger mismatch: database unsold off",
			plant:     func(w *world) { w.sale.Unsold += 2 },
			want:      []string{"ledger_mismatch "},
			undersold: 6,
		},
		{
			name:      "ledger mismatch: quantities differ",
			plant:     func(w *world) { w.order("tea.paid-001").Qty = 2; w.sale.Unsold-- },
			want:      []string{"ledger_mismatch tea.paid-001"},
			undersold: 6,
		},
		{
			name: "oversold in redis",
			plant: func(w *world) {
				w.level.Total = 210 // a bad preheat: 216 reserved of 210
			},
			want:      []string{"ledger_mismatch ", "ledger_mismatch "},
			oversold:  6,
			undersold: 6,
		},
		{
			name: "parked restore for an unknown reservation",
			plant: func(w *world) {
				w.restores = append(w.restores, &seckill.RestoreRequest{ReservationID: "tea.nobody", SaleID: "tea", Reason: "operator", State: seckill.RestoreStateParked, CreatedAt: now.Add(-10 * time.Minute)})
			},
			want:      []string{"restore_for_unknown_reservation tea.nobody"},
			undersold: 6,
		},
		{
			name: "recent parked restore for an unknown reservation may still meet it",
			plant: func(w *world) {
				w.restores = append(w.restores, &seckill.RestoreRequest{ReservationID: "tea.soon", SaleID: "tea", State: seckill.RestoreStateParked, CreatedAt: now.Add(-time.Minute)})
			},
			ok:        true,
			undersold: 6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := balanced()
			tt.plant(w)
			r := reconcileWorld(t, w)
			if got := kinds(r); !slices.Equal(got, tt.want) {
				t.Errorf("discrepancies = %q; want %q\n%s", got, tt.want, details(r))
			}
			if r.OK() != tt.ok || r.Balanced != tt.ok {
				t.Errorf("OK() = %v, Balanced = %v; want %v", r.OK(), r.Balanced, tt.ok)
			}
			if r.PotentialOversold != tt.potentialOversold {
				t.Errorf("PotentialOversold = %d; want %d", r.PotentialOversold, tt.potentialOversold)
			}
			if r.Undersold != tt.undersold {
				t.Errorf("Undersold = %d (%+v); want %d", r.Undersold, r.UndersoldBy, tt.undersold)
			}
			if r.Unexplained.Count != tt.unexplained {
				t.Errorf("Unexplained = %+v; want count %d", r.Unexplained, tt.unexplained)
			}
			if r.Oversold != tt.oversold {
				t.Errorf("Oversold = %d (%+v); want %d", r.Oversold, r.OversoldBy, tt.oversold)
			}
		})
	}
}

func details(r *Report) string {
	var b strings.Builder
	for _, d := range r.Discrepancies {
		fmt.Fprintf(&b, "  %s %s: %s\n", d.Kind, d.ReservationID, d.Detail)
	}
	return b.String()
}

// The three oversold measures usually see the same units: the report
// takes the worst, not the sum.
func TestOversoldIsTheWorstMeasure(t *testing.T) {
	w := newWorld(2)
	w.level.Total = 3 // a bad preheat let Redis sell 3
	for i := range 3 {
		id := fmt.Sprintf("tea.r%d", i)
		w.reserve(id, 1, now.Add(-time.Hour))
		w.persist(id, seckill.OrderPaid)
	}
	r := reconcileWorld(t, w)
	want := []string{"negative_stock ", "ledger_mismatch ", "ledger_mismatch "}
	if got := kinds(r); !slices.Equal(got, want) {
		t.Errorf("discrepancies = %q; want %q\n%s", got, want, details(r))
	}
	if r.OversoldBy != (Oversold{Orders: 1, Database: 1}) || r.Oversold != 1 || r.OK() {
		t.Errorf("Oversold = %d by %+v, OK = %v; want 1 by orders 1 and database 1, not OK", r.Oversold, r.OversoldBy, r.OK())
	}
}

// A live sale moves between the two stock reads around the HSCAN: any
// record total between them is consistent.
func TestStockMovedWhileReading(t *testing.T) {
	w := balanced() // 216 reserved
	for _, tt := range []struct {
		name         string
		before, late int64
		ok           bool
	}{
		{"records between the readings", 214, 218, true},
		{"records below both readings", 217, 220, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			st := &fakeStock{w: w, calls: &calls, levels: []seckill.StockLevel{{Total: 250, Reserved: tt.before}, {Total: 250, Reserved: tt.late}}}
			r, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, calls: &calls}, st, now, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !r.StockStore.StockMoved || r.StockStore.Reserved != tt.late {
				t.Errorf("StockMoved = %v, Reserved = %d; want true, %d", r.StockStore.StockMoved, r.StockStore.Reserved, tt.late)
			}
			if r.OK() != tt.ok {
				t.Errorf("OK() = %v; want %v\n%s", r.OK(), tt.ok, details(r))
			}
		})
	}
}

// Claims flow from the stock store to the database, so the database is
// read first: a claim landing in between shows as in flight, not as an
// order without a reservation.
func TestReadsTheDatabaseFirst(t *testing.T) {
	var calls []string
	w := balanced()
	if _, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, calls: &calls}, &fakeStock{w: w, calls: &calls}, now, Options{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ledger", "outbox", "stock", "reservations", "stock"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls = %q; want %q", calls, want)
	}
}

func TestInFlightGraceOption(t *testing.T) {
	w := balanced()
	w.outbox = 0
	var calls []string
	r, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, calls: &calls}, &fakeStock{w: w, calls: &calls}, now, Options{InFlightGrace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// 30 s old is past a 10 s grace: all ten are unexplained now.
	if r.Unexplained.Count != 10 || r.InFlight.Count != 0 || r.InFlightGrace != "10s" {
		t.Errorf("unexplained %+v, in flight %+v, grace %s; want 10, 0, 10s", r.Unexplained, r.InFlight, r.InFlightGrace)
	}
	// The parked restore of tea.recent-000 is noted on its discrepancy.
	for _, d := range r.Discrepancies {
		if d.ReservationID == "tea.recent-000" && !strings.Contains(d.Detail, "parked") {
			t.Errorf("detail of tea.recent-000 = %q; want it to mention the parked restore", d.Detail)
		}
	}
}

// TestLostWrites: a stock store rolled back (Redis lost its last writes)
// forgot reservations whose orders the database has: reserved is below
// what the database sold, the orders count as potential oversell, and the
// sale is unbalanced with a field that names the loss.
func TestLostWrites(t *testing.T) {
	w := balanced()
	for i := range 20 {
		id := fmt.Sprintf("tea.paid-%03d", i)
		w.records = slices.DeleteFunc(w.records, func(r seckill.ReservationRecord) bool { return r.ReservationID == id })
		w.level.Reserved--
	}
	r := reconcileWorld(t, w)
	lw := r.LostWrites
	if !lw.Detected || lw.OrdersWithoutReservation.Count != 20 || lw.ReservedBelowSold != r.ActiveUnits-r.StockStore.Reserved || lw.ReservedBelowSold <= 0 {
		t.Errorf("lost writes %+v (reserved %d, active units %d); want detected, 20 orders without a record, reserved below sold",
			lw, r.StockStore.Reserved, r.ActiveUnits)
	}
	if r.PotentialOversold != 20 || r.OK() || r.Balanced {
		t.Errorf("potential oversold %d, OK %v, balanced %v; want 20, false, false", r.PotentialOversold, r.OK(), r.Balanced)
	}
	if got := kinds(r); len(got) != 21 || got[0] != "stock_store_lost_writes " {
		t.Errorf("discrepancies = %q; want stock_store_lost_writes first, then 20 orders without reservation", got)
	}
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil || !strings.Contains(table.String(), "redis lost acknowledged writes") {
		t.Errorf("table (%v) does not name the loss:\n%s", err, table.String())
	}

	// After a heal the records are back, but the heal is still reported.
	w = balanced()
	w.level.Heals = 1
	if r := reconcileWorld(t, w); !r.LostWrites.Detected || r.LostWrites.Heals != 1 || r.OK() {
		t.Errorf("healed sale: lost writes %+v, OK %v; want detected with 1 heal, not OK", r.LostWrites, r.OK())
	}
}

func TestSaleNotInStockStore(t *testing.T) {
	t.Run("nothing sold yet", func(t *testing.T) {
		w := newWorld(100)
		w.loaded, w.level = false, seckill.StockLevel{}
		r := reconcileWorld(t, w)
		if !r.OK() || r.StockStore.Loaded {
			t.Errorf("OK = %v, Loaded = %v; want true, false\n%s", r.OK(), r.StockStore.Loaded, details(r))
		}
	})
	t.Run("orders but no stock store", func(t *testing.T) {
		w := newWorld(100)
		w.reserve("tea.a", 1, now.Add(-time.Hour))
		w.persist("tea.a", seckill.OrderPaid)
		w.loaded, w.level, w.records = false, seckill.StockLevel{}, nil
		r := reconcileWorld(t, w)
		if got, want := kinds(r), []string{"stock_store_lost_writes ", "order_without_reservation tea.a"}; !slices.Equal(got, want) || r.OK() {
			t.Errorf("discrepancies = %q, OK = %v; want %q, false", got, r.OK(), want)
		}
		if lw := r.LostWrites; !lw.Detected || lw.ReservedBelowSold != 1 || r.PotentialOversold != 1 {
			t.Errorf("lost writes %+v, potential oversold %d; want detected, reserved 1 below sold, 1", lw, r.PotentialOversold)
		}
	})
}

func TestStoreErrors(t *testing.T) {
	boom := errors.New("boom")
	w := balanced()
	var calls []string
	if _, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, err: boom, calls: &calls}, &fakeStock{w: w, calls: &calls}, now, Options{}); !errors.Is(err, boom) {
		t.Errorf("database error: got %v; want it wrapped", err)
	}
	if _, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, calls: &calls}, &fakeStock{w: w, err: boom, calls: &calls}, now, Options{}); !errors.Is(err, boom) {
		t.Errorf("stock store error: got %v; want it wrapped", err)
	}
	if _, err := Reconcile(context.Background(), "coffee", fakeLedger{w: w, calls: &calls}, &fakeStock{w: w, calls: &calls}, now, Options{}); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("unknown sale: got %v; want ErrNotFound", err)
	}
}

// wantTable writes the table of w's reconciliation, checks that it has
// each of lines, and returns it.
func wantTable(t *testing.T, w *world, lines ...string) string {
	t.Helper()
	var b bytes.Buffer
	if err := reconcileWorld(t, w).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range lines {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	return out
}

func TestWriteTable(t *testing.T) {
	t.Run("balanced", func(t *testing.T) {
		out := wantTable(t, balanced(),
			"sale                tea\n",
			"redis               total 250, reserved 216, remaining 34\n",
			"orders paid         150 (150 units)\n",
			"database            unsold 50, implied sold 200\n",
			"in flight           10 (10 units); outbox 10, grace 2m0s\n",
			"oversold            0 units (orders 0, database 0, redis 0)\n",
			"undersold           6 units (restore pending 1, lost restore 0, failed orders 5, unexplained 0)\n",
			"\nBALANCED\n",
		)
		if strings.Contains(out, "NOT BALANCED") || strings.Contains(out, "KIND") {
			t.Errorf("balanced table shows discrepancies:\n%s", out)
		}
	})
	t.Run("not balanced, capped", func(t *testing.T) {
		w := balanced()
		w.sale.Stock, w.sale.Unsold, w.level.Total = 350, 150, 350 // room for the lost ones
		for i := range MaxTableDiscrepancies + 10 {
			w.reserve(fmt.Sprintf("tea.lost-%03d", i), 1, now.Add(-time.Hour))
		}
		w.restoreRedis("tea.paid-000")
		out := wantTable(t, w,
			"\nNOT BALANCED: potential oversold 1 unit, 61 discrepancies\n",
			"KIND                       RESERVATION   DETAIL\n",
			"restored_but_ordered       tea.paid-000  order is paid",
			"reservation_without_order  tea.lost-000  active in the stock store (qty 1, reserved 1h0m0s ago, user u-tea.lost-000)",
			"… and 11 more (--json lists them)\n",
		)
		if strings.Contains(out, "tea.lost-049") {
			t.Errorf("table printed past the cap:\n%s", out)
		}
	})
}

func TestJSONRoundTrip(t *testing.T) {
	w := balanced()
	w.reserve("tea.lost", 2, now.Add(-time.Hour))
	r := reconcileWorld(t, w)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, r) {
		t.Errorf("round trip changed the report:\n got %+v\nwant %+v", back, *r)
	}
	if back.OK() {
		t.Error("decoded report is OK; want not OK (the verdict must survive the round trip)")
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"sale_id", "stock", "redis", "orders", "active_units", "database", "failed_orders", "restores", "in_flight", "unexplained", "oversold", "undersold", "balanced", "discrepancies"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON lacks %q: %s", key, b)
		}
	}
	if got := m["in_flight"].(map[string]any); got["outbox_len"] != 10.0 || got["count"] != 10.0 {
		t.Errorf("in_flight = %v; want outbox_len 10, count 10", got)
	}
	d := m["discrepancies"].([]any)[0].(map[string]any)
	if d["kind"] != "reservation_without_order" || d["reservation_id"] != "tea.lost" {
		t.Errorf("discrepancy = %v", d)
	}

	// A balanced report lists no discrepancies as [], not null.
	b, _ = json.Marshal(reconcileWorld(t, balanced()))
	if !bytes.Contains(b, []byte(`"discrepancies":[]`)) || !bytes.Contains(b, []byte(`"balanced":true`)) {
		t.Errorf("balanced JSON: %s", b)
	}
}

func TestGauges(t *testing.T) {
	w := balanced()
	w.restoreRedis("tea.paid-000")
	gs := reconcileWorld(t, w).Gauges()
	byName := map[string]float64{}
	for _, g := range gs {
		if _, dup := byName[g.Name]; dup || !strings.HasPrefix(g.Name, "seckill_reconcile_") || g.Help == "" {
			t.Errorf("gauge %+v: duplicate, unprefixed or without help", g)
		}
		byName[g.Name] = g.Value
	}
	for name, want := range map[string]float64{
		"seckill_reconcile_balanced":                   0,
		"seckill_reconcile_potential_oversold_units":   1,
		"seckill_reconcile_discrepancies":              1,
		"seckill_reconcile_undersold_units":            6,
		"seckill_reconcile_in_flight_reservations":     10,
		"seckill_reconcile_last_run_timestamp_seconds": float64(now.Unix()),
	} {
		if got, ok := byName[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v); want %v", name, got, ok, want)
		}
	}
}

// messy is balanced() with a discrepancy of every kind the pages must
// agree on: unexplained records older than the outbox's newest (some
// restored), orders and failed orders the stock store forgot, a lost
// restore, a restored record whose order is active, a restore request for
// a reservation nobody has, and an order of an unknown status.
func messy() *world {
	w := balanced()
	for i := range 12 {
		w.reserve(fmt.Sprintf("tea.lost-%03d", i), 1, now.Add(-time.Duration(10+i)*time.Minute))
	}
	w.restoreRedis("tea.lost-003")
	w.dropRecords("tea.ordered-01")
	w.dropRecords("tea.failed-002")
	w.level.Reserved++ // tea.failed-002's unit stays counted
	w.order("tea.paid-007").Status = seckill.OrderCancelled
	w.restoreRedis("tea.ordered-040")
	w.restores = append(w.restores, &seckill.RestoreRequest{ReservationID: "tea.nobody", SaleID: "tea", State: seckill.RestoreStateParked, CreatedAt: now.Add(-time.Hour)})
	w.order("tea.paid-100").Status = "lost"
	return w
}

// The comparison reads both stores a page at a time: any page size gives
// the report one page gives.
func TestPagesGiveTheSameReport(t *testing.T) {
	w := messy()
	reportWith := func(o Options) *Report {
		t.Helper()
		var calls []string
		r, err := Reconcile(context.Background(), "tea", fakeLedger{w: w, calls: &calls}, &fakeStock{w: w, calls: &calls}, now, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one := reportWith(Options{PageSize: 100000})
	if one.OK() || one.Unexplained.Count == 0 || one.LostWrites.OrdersWithoutReservation.Count == 0 || one.PotentialOversold == 0 {
		t.Fatalf("the messy sale should show every kind of trouble:\n%s", details(one))
	}
	for _, size := range []int{1, 7, 100} {
		if got := reportWith(Options{PageSize: size}); !reflect.DeepEqual(got, one) {
			t.Errorf("page size %d: report differs from one page's:\n%s\nwant\n%s", size, details(got), details(one))
		}
	}

	// A report lists the first discrepancies and counts the rest.
	capped := reportWith(Options{PageSize: 7, MaxDiscrepancies: 3})
	if len(capped.Discrepancies) != 3 || !reflect.DeepEqual(capped.Discrepancies, one.Discrepancies[:3]) ||
		capped.DiscrepanciesOmitted != int64(len(one.Discrepancies)-3) || capped.OK() {
		t.Errorf("capped at 3: %d listed (%q), %d omitted, OK %v; want the first 3 of %d, the rest omitted, not OK",
			len(capped.Discrepancies), kinds(capped), capped.DiscrepanciesOmitted, capped.OK(), len(one.Discrepancies))
	}
}

// An archived sale (its Redis keys gone) is reconciled from the database
// alone: its orders and failed orders must number the claims recorded at
// the archive, nothing oversold, nobody over the limit.
func TestArchivedSaleFromTheDatabase(t *testing.T) {
	archived := func() *world {
		w := balanced()
		// Settled: what was in flight landed, what was pending is done.
		for _, id := range []string{"tea.outbox-000", "tea.outbox-001", "tea.outbox-002", "tea.outbox-003"} {
			w.persist(id, seckill.OrderPaid)
		}
		for i := range 6 {
			w.persist(fmt.Sprintf("tea.recent-%03d", i), seckill.OrderPaid)
		}
		w.restores = w.restores[:len(w.restores)-1]
		w.request("tea.pending-restore").State = seckill.RestoreStateDone
		w.archive = &seckill.SaleArchive{ArchivedAt: now.Add(-time.Hour), Claims: int64(len(w.records))}
		w.records, w.loaded, w.outbox = nil, false, 0
		return w
	}
	r := reconcileWorld(t, archived())
	if !r.OK() || r.Archived == nil || r.Archived.Claims != 247 || r.StockStore.Loaded {
		t.Fatalf("archived sale: OK %v, archived %+v, loaded %v; want OK, 247 claims, not loaded\n%s", r.OK(), r.Archived, r.StockStore.Loaded, details(r))
	}

	for _, tt := range []struct {
		name  string
		plant func(w *world)
		want  []string
	}{
		{"a claim without its order", func(w *world) { w.archive.Claims++ }, []string{"ledger_mismatch "}},
		{"a buyer over the limit", func(w *world) {
			for _, id := range []string{"tea.paid-000", "tea.paid-001", "tea.paid-002"} {
				w.order(id).UserID = "greedy"
			}
		}, []string{"over_limit "}},
		{"oversold", func(w *world) {
			w.sale.Unsold -= 60
			for i := range 60 {
				id := fmt.Sprintf("tea.extra-%03d", i)
				w.orders = append(w.orders, &seckill.Order{ID: "o-" + id, ReservationID: id, SaleID: "tea", UserID: "u-" + id, Qty: 1, Status: seckill.OrderPaid})
			}
			w.archive.Claims += 60
		}, []string{"negative_stock ", "ledger_mismatch "}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := archived()
			tt.plant(w)
			r := reconcileWorld(t, w)
			if got := kinds(r); r.OK() || !slices.Equal(got, tt.want) {
				t.Errorf("kinds = %q (OK %v); want %q\n%s", got, r.OK(), tt.want, details(r))
			}
		})
	}
}
