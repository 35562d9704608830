package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
	"github.com/seckill-dev/seckill/internal/jwt"
)

// fakeOrders is an in-memory seckill.OrderStore with the conditional
// updates of the contract. beforeWrite, if set, runs at the start of
// PayOrder and CancelOrder, before the condition is checked: a test uses
// it to let a concurrent request win.
type fakeOrders struct {
	mu          sync.Mutex
	orders      map[string]*seckill.Order
	failed      map[string]*seckill.FailedOrder
	failedList  []*seckill.FailedOrder
	err         error // returned by every call when set
	calls       atomic.Int64
	writes      atomic.Int64 // PayOrder and CancelOrder calls
	limits      []int        // FailedOrders calls
	filters     []seckill.FailedOrderFilter
	counts      []seckill.FailedOrderCount // FailedOrderCounts answers
	beforeWrite func(id string)
}

func newFakeOrders() *fakeOrders {
	return &fakeOrders{orders: map[string]*seckill.Order{}, failed: map[string]*seckill.FailedOrder{}}
}

func (f *fakeOrders) Order(_ context.Context, id string) (*seckill.Order, error) {
	return lookup(f, f.orders, id)
}

func (f *fakeOrders) FailedOrder(_ context.Context, id string) (*seckill.FailedOrder, error) {
	return lookup(f, f.failed, id)
}

// lookup is a read of the fake: counted, failing with f.err when set, and
// a copy of the row, so that the caller's changes never reach the store.
func lookup[T any](f *fakeOrders, rows map[string]*T, id string) (*T, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return fakestore.Copy(rows, id)
}

// FailedOrders filters failedList (kept newest first) by sale and state;
// its cursor is the index of the page's first row after the last page.
func (f *fakeOrders) FailedOrders(_ context.Context, filter seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = append(f.limits, filter.Limit)
	f.filters = append(f.filters, filter)
	if f.err != nil {
		return nil, "", f.err
	}
	from := 0
	if filter.Before != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(filter.Before, "c"))
		if err != nil || !strings.HasPrefix(filter.Before, "c") {
			return nil, "", seckill.Errorf(seckill.EINVALID, "before is not a cursor this list returned")
		}
		from = n
	}
	var out []*seckill.FailedOrder
	for i, fo := range f.failedList {
		if i < from || (filter.SaleID != "" && fo.SaleID != filter.SaleID) ||
			(filter.State == seckill.FailedOpen && fo.Resolution != nil) || (filter.State == seckill.FailedResolved && fo.Resolution == nil) {
			continue
		}
		if len(out) == filter.Limit {
			return out, "c" + strconv.Itoa(i), nil
		}
		c := *fo
		out = append(out, &c)
	}
	return out, "", nil
}

func (f *fakeOrders) FailedOrderCounts(context.Context) ([]seckill.FailedOrderCount, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts, f.err
}

func (f *fakeOrders) PayOrder(_ context.Context, id string, now time.Time) (*seckill.Order, error) {
	o, err := f.beginWrite(id)
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if o.Status != seckill.OrderPlaced || !now.Before(o.PayBy) {
		return nil, seckill.Errorf(seckill.ESTATECONFLICT, "order is %s", o.Status)
	}
	o.Status, o.UpdatedAt = seckill.OrderPaid, now
	c := *o
	return &c, nil
}

func (f *fakeOrders) CancelOrder(_ context.Context, id, reason string, now time.Time) (*seckill.Order, bool, error) {
	o, err := f.beginWrite(id)
	defer f.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	switch o.Status {
	case seckill.OrderCancelled:
		c := *o
		return &c, false, nil
	case seckill.OrderPaid:
		return nil, false, seckill.Errorf(seckill.ESTATECONFLICT, "order is paid")
	}
	o.Status, o.CancelReason, o.UpdatedAt = seckill.OrderCancelled, reason, now
	c := *o
	return &c, true, nil
}

// beginWrite starts PayOrder and CancelOrder: counted, beforeWrite run,
// then, under f.mu (which it leaves locked for the caller to unlock), the
// order found.
func (f *fakeOrders) beginWrite(id string) (*seckill.Order, error) {
	f.calls.Add(1)
	f.writes.Add(1)
	if f.beforeWrite != nil {
		f.beforeWrite(id)
	}
	f.mu.Lock()
	if f.err != nil {
		return nil, f.err
	}
	o, ok := f.orders[id]
	if !ok {
		return nil, seckill.ErrNotFound
	}
	return o, nil
}

// Restore is the restore service's contract on top of the fake: a
// restore is the conditional cancel; no order means parked.
func (f *fakeOrders) Restore(ctx context.Context, id, reason string) (seckill.RestoreResult, error) {
	_, changed, err := f.CancelOrder(ctx, id, reason, time.Now())
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return seckill.RestoreParked, nil
	case err != nil:
		return "", err
	case changed:
		return seckill.Restored, nil
	}
	return seckill.AlreadyRestored, nil
}

// set changes a stored order's status directly, as another node would.
func (f *fakeOrders) set(id string, status seckill.OrderStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders[id].Status = status
}

func (f *fakeOrders) get(t *testing.T, id string) seckill.Order {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.orders[id]
	if !ok {
		t.Fatalf("no order %s", id)
	}
	return *o
}

// snapshot is a deep copy of the stored state, to assert nothing changed.
func (f *fakeOrders) snapshot() (map[string]seckill.Order, map[string]seckill.FailedOrder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	orders := map[string]seckill.Order{}
	for id, o := range f.orders {
		orders[id] = *o
	}
	failed := map[string]seckill.FailedOrder{}
	for id, fo := range f.failed {
		failed[id] = *fo
	}
	return orders, failed
}

type pendingRecord struct {
	user   string
	qty    int64
	status string
}

type fakePending struct {
	mu      sync.Mutex
	records map[string]pendingRecord
	err     error
	calls   atomic.Int64
}

func (f *fakePending) Reservation(_ context.Context, id string) (string, int64, string, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", 0, "", f.err
	}
	r, ok := f.records[id]
	if !ok {
		return "", 0, "", seckill.ErrNotFound
	}
	return r.user, r.qty, r.status, nil
}

// resEnv is an env with the reservation routes, and one reservation of
// alice's at each stage.
type resEnv struct {
	*env
	orders  *fakeOrders
	pending *fakePending
	payBy   time.Time

	ordered, paid, cancelled, failed, pendingID, missing string
}

func newResEnv(t *testing.T, mod ...func(*Config)) *resEnv {
	t.Helper()
	e := &resEnv{
		orders:  newFakeOrders(),
		pending: &fakePending{records: map[string]pendingRecord{}},
		payBy:   t0.Add(15 * time.Minute),
	}
	e.env = newEnv(t, append([]func(*Config){func(c *Config) { c.Orders, c.Pending, c.Restorer, c.BuyerPay = e.orders, e.pending, e.orders, true }}, mod...)...)
	newID := func() string { return seckill.NewReservationID(testSaleID, t0) }
	e.ordered, e.paid, e.cancelled, e.failed, e.pendingID, e.missing = newID(), newID(), newID(), newID(), newID(), newID()
	for id, st := range map[string]seckill.OrderStatus{e.ordered: seckill.OrderPlaced, e.paid: seckill.OrderPaid, e.cancelled: seckill.OrderCancelled} {
		e.orders.orders[id] = &seckill.Order{
			ID: seckill.OrderIDOf(id), ReservationID: id, SaleID: testSaleID, UserID: "alice", Qty: 2,
			AmountCents: 19800, Status: st, PayBy: e.payBy, ReservedAt: t0, CreatedAt: t0, UpdatedAt: t0,
		}
	}
	e.orders.failed[e.failed] = &seckill.FailedOrder{
		ReservationID: e.failed, SaleID: testSaleID, UserID: "alice", Qty: 1,
		Reason: "insert orders: dial tcp 10.9.8.7:5432: connection refused", Attempts: 5, CreatedAt: t0,
	}
	e.pending.records[e.pendingID] = pendingRecord{user: "alice", qty: 3, status: "active"}
	// Every stage is also in the stock store, as in production: the
	// record stays there after the order is written.
	for _, id := range []string{e.ordered, e.paid, e.cancelled, e.failed} {
		e.pending.records[id] = pendingRecord{user: "alice", qty: 2, status: "active"}
	}
	return e
}

func (e *resEnv) get(user, id string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(req{method: "GET", path: "/api/v1/reservations/" + id, auth: "Bearer " + buyerToken(e.t, user)})
}

func (e *resEnv) post(user, id, action, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(req{method: "POST", path: "/api/v1/reservations/" + id + "/" + action, body: body, auth: "Bearer " + buyerToken(e.t, user)})
}

func (e *resEnv) storeCalls() int64 { return e.orders.calls.Load() + e.pending.calls.Load() }

// unchanged asserts that the order store holds what it held at before,
// and that no conditional update was attempted.
func (e *resEnv) unchanged(t *testing.T, beforeOrders map[string]seckill.Order, beforeFailed map[string]seckill.FailedOrder) {
	t.Helper()
	orders, failed := e.orders.snapshot()
	if !reflect.DeepEqual(orders, beforeOrders) || !reflect.DeepEqual(failed, beforeFailed) {
		t.Fatalf("the order store changed:\n got %+v\nwant %+v", orders, beforeOrders)
	}
	if n := e.orders.writes.Load(); n != 0 {
		t.Fatalf("%d pay/cancel calls reached the store", n)
	}
}

func TestReservationStatus(t *testing.T) {
	e := newResEnv(t)
	payBy := e.payBy
	order := func(id string, st seckill.OrderStatus) reservationView {
		return reservationView{ReservationID: id, SaleID: testSaleID, Qty: 2, Status: string(st), OrderID: "o-" + id, PayBy: &payBy}
	}
	cases := []struct {
		name string
		id   string
		want reservationView
	}{
		{"ordered", e.ordered, order(e.ordered, seckill.OrderPlaced)},
		{"paid", e.paid, order(e.paid, seckill.OrderPaid)},
		{"cancelled", e.cancelled, func() reservationView {
			v := order(e.cancelled, seckill.OrderCancelled)
			v.CancelledBy = "operator" // set up with no reason of the engine's own
			return v
		}()},
		{"failed", e.failed, reservationView{ReservationID: e.failed, SaleID: testSaleID, Qty: 1, Status: "failed"}},
		{"pending", e.pendingID, reservationView{ReservationID: e.pendingID, SaleID: testSaleID, Qty: 3, Status: "pending", PollAfterMS: 2000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := e.get("alice", c.id)
			var got reservationView
			decode(t, w, http.StatusOK, &got) // strict: no field beyond the view's
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("answer = %+v, want %+v", got, c.want)
			}
			if strings.Contains(w.Body.String(), "10.9.8.7") || strings.Contains(w.Body.String(), "reason") {
				t.Fatalf("a failure reason reached the buyer: %s", w.Body)
			}
		})
	}
	wantError(t, e.get("alice", e.missing), http.StatusNotFound, seckill.ENOTFOUND)

	for _, want := range []string{
		`seckill_reservation_polls_total{status="ordered"} 1`,
		`seckill_reservation_polls_total{status="paid"} 1`,
		`seckill_reservation_polls_total{status="cancelled"} 1`,
		`seckill_reservation_polls_total{status="failed"} 1`,
		`seckill_reservation_polls_total{status="pending"} 1`,
		`seckill_reservation_polls_total{status="not_found"} 1`,
		`seckill_reservation_polls_total{status="unauthorized"} 0`,
		`seckill_http_requests_total{route="GET /api/v1/reservations/{id}",status="200"} 5`,
		`seckill_http_requests_total{route="GET /api/v1/reservations/{id}",status="404"} 1`,
	} {
		assertMetric(t, e.env, want)
	}
}

// TestReservationOwnership: another buyer's reservation, at any stage,
// answers exactly like one that does not exist, and nothing changes.
func TestReservationOwnership(t *testing.T) {
	e := newResEnv(t)
	missing := map[string]string{}
	for _, action := range []string{"", "pay", "cancel"} {
		w := e.do(ownReq(t, "mallory", e.missing, action))
		wantError(t, w, http.StatusNotFound, seckill.ENOTFOUND)
		missing[action] = w.Body.String()
	}
	beforeOrders, beforeFailed := e.orders.snapshot()
	for _, id := range []string{e.ordered, e.paid, e.cancelled, e.failed, e.pendingID} {
		for _, action := range []string{"", "pay", "cancel"} {
			w := e.do(ownReq(t, "mallory", id, action))
			if w.Code != http.StatusNotFound || w.Body.String() != missing[action] {
				t.Errorf("mallory %q on alice's %s: %d %s; want the missing answer %s", action, id, w.Code, w.Body, missing[action])
			}
			if len(w.Header()) != 1 { // Content-Type only: no Retry-After, no hint
				t.Errorf("mallory %q on alice's %s: headers %v", action, id, w.Header())
			}
		}
	}
	e.unchanged(t, beforeOrders, beforeFailed)
	if e.logs.String() != "" {
		t.Fatalf("ownership failures were logged: %s", e.logs)
	}
	// The control: alice can.
	if w := e.post("alice", e.ordered, "pay", ""); w.Code != http.StatusOK {
		t.Fatalf("alice pays her own: %d %s", w.Code, w.Body)
	}
}

func ownReq(t *testing.T, user, id, action string) req {
	t.Helper()
	if action == "" {
		return req{method: "GET", path: "/api/v1/reservations/" + id, auth: "Bearer " + buyerToken(t, user)}
	}
	return req{method: "POST", path: "/api/v1/reservations/" + id + "/" + action, auth: "Bearer " + buyerToken(t, user)}
}

func TestReservationBadIDs(t *testing.T) {
	good := seckill.NewReservationID(testSaleID, t0)
	suffix := good[len(testSaleID)+1:]
	for name, id := range map[string]string{
		"no dot":           "tea-2030",
		"short suffix":     testSaleID + "." + suffix[:25],
		"long suffix":      testSaleID + "." + suffix + "0",
		"lower case":       testSaleID + "." + strings.ToLower(suffix),
		"excluded letter":  testSaleID + ".U" + suffix[1:],
		"bad sale id":      "tea%7B2030%7D." + suffix,
		"sale id too long": strings.Repeat("a", 65) + "." + suffix,
		"empty sale id":    "." + suffix,
	} {
		t.Run(name, func(t *testing.T) {
			e := newResEnv(t)
			for _, action := range []string{"", "pay", "cancel"} {
				wantError(t, e.do(ownReq(t, "alice", id, action)), http.StatusNotFound, seckill.ENOTFOUND)
			}
			if n := e.storeCalls(); n != 0 {
				t.Fatalf("a malformed id reached the stores (%d calls)", n)
			}
		})
	}
}

func TestReservationAuth(t *testing.T) {
	e := newResEnv(t)
	for name, auth := range map[string]string{
		"missing":     "",
		"garbage":     "Bearer not.a.jwt",
		"admin token": admin(),
	} {
		for _, r := range []req{
			{method: "GET", path: "/api/v1/reservations/" + e.ordered},
			{method: "POST", path: "/api/v1/reservations/" + e.ordered + "/pay"},
			{method: "POST", path: "/api/v1/reservations/" + e.ordered + "/cancel"},
		} {
			r.auth = auth
			t.Run(name+" "+r.path, func(t *testing.T) {
				wantError(t, e.do(r), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
			})
		}
	}
	if n := e.storeCalls(); n != 0 {
		t.Fatalf("unauthenticated requests reached the stores (%d calls)", n)
	}
	assertMetric(t, e.env, `seckill_reservation_polls_total{status="unauthorized"} 3`)
	assertMetric(t, e.env, `seckill_order_actions_total{action="pay",result="unauthorized"} 3`)
}

func TestPay(t *testing.T) {
	e := newResEnv(t)
	w := e.post("alice", e.ordered, "pay", "")
	var got reservationView
	decode(t, w, http.StatusOK, &got)
	if got.Status != "paid" || got.OrderID != "o-"+e.ordered || got.ReservationID != e.ordered || got.Qty != 2 {
		t.Fatalf("answer = %+v, want the paid order", got)
	}
	if o := e.orders.get(t, e.ordered); o.Status != seckill.OrderPaid || !o.UpdatedAt.Equal(t0) {
		t.Fatalf("stored %+v, want paid at the server's clock", o)
	}
	// Paying again is answered like the first time, without a write: a
	// client that lost the answer may retry.
	writes := e.orders.writes.Load()
	w2 := e.post("alice", e.ordered, "pay", "{}")
	if w2.Code != http.StatusOK || w2.Body.String() != w.Body.String() {
		t.Fatalf("second pay: %d %s, want %s", w2.Code, w2.Body, w.Body)
	}
	if e.orders.writes.Load() != writes {
		t.Fatal("a second pay wrote again")
	}
	// And the poll shows it.
	decode(t, e.get("alice", e.ordered), http.StatusOK, &got)
	if got.Status != "paid" {
		t.Fatalf("poll after pay: %+v", got)
	}
	assertMetric(t, e.env, `seckill_order_actions_total{action="pay",result="done"} 1`)
	assertMetric(t, e.env, `seckill_order_actions_total{action="pay",result="unchanged"} 1`)
	assertMetric(t, e.env, `seckill_http_requests_total{route="POST /api/v1/reservations/{id}/pay",status="200"} 2`)
}

func TestCancel(t *testing.T) {
	e := newResEnv(t)
	var got reservationView
	decode(t, e.post("alice", e.ordered, "cancel", ""), http.StatusOK, &got)
	if got.Status != "cancelled" || got.OrderID != "o-"+e.ordered {
		t.Fatalf("answer = %+v, want the cancelled order", got)
	}
	if o := e.orders.get(t, e.ordered); o.Status != seckill.OrderCancelled || o.CancelReason != "cancelled by buyer" {
		t.Fatalf("stored %+v, want cancelled by buyer", o)
	}
	decode(t, e.post("alice", e.ordered, "cancel", ""), http.StatusOK, &got)
	if got.Status != "cancelled" {
		t.Fatalf("second cancel: %+v", got)
	}
	// An order past its deadline that the sweeper has not reached yet may
	// still be cancelled by its buyer: the outcome is the same.
	e.clock.Set(e.payBy.Add(time.Minute))
	id := seckill.NewReservationID(testSaleID, t0)
	o := e.orders.get(t, e.paid)
	o.ID, o.ReservationID, o.Status = seckill.OrderIDOf(id), id, seckill.OrderPlaced
	e.orders.mu.Lock()
	e.orders.orders[id] = &o
	e.orders.mu.Unlock()
	decode(t, e.post("alice", id, "cancel", ""), http.StatusOK, &got)
	if got.Status != "cancelled" {
		t.Fatalf("cancel past the deadline: %+v", got)
	}
	assertMetric(t, e.env, `seckill_order_actions_total{action="cancel",result="done"} 2`)
	assertMetric(t, e.env, `seckill_order_actions_total{action="cancel",result="unchanged"} 1`)
}

// TestCancelAfterOperatorRestore: an operator's restore gave the units
// back before the buyer's cancel arrived. The cancel stays idempotent
// (200 cancelled, nothing written twice) and its answer says that an
// earlier call, the operator's, gave the stock back.
func TestCancelAfterOperatorRestore(t *testing.T) {
	e := newResEnv(t)
	w := e.do(req{method: "POST", path: "/admin/v1/restores", auth: admin(),
		body: `{"reservation_id":"` + e.ordered + `","reason":"refund by support"}`})
	if w.Code != http.StatusOK {
		t.Fatalf("admin restore: %d %s", w.Code, w.Body)
	}
	writes := e.orders.writes.Load()
	var got reservationView
	decode(t, e.post("alice", e.ordered, "cancel", ""), http.StatusOK, &got)
	if got.Status != "cancelled" || got.Restore != seckill.AlreadyRestored || got.CancelledBy != "operator" {
		t.Fatalf("cancel after an operator's restore = %+v; want cancelled, restore already_restored, cancelled_by operator", got)
	}
	if strings.Contains(fmt.Sprintf("%+v", got), "refund by support") {
		t.Fatalf("the operator's own reason reached the buyer: %+v", got)
	}
	if n := e.orders.writes.Load(); n != writes {
		t.Fatalf("the buyer's cancel wrote %d times after the restore; want none", n-writes)
	}
	// The buyer's own cancel says it did the work, and who cancelled.
	id := seckill.NewReservationID(testSaleID, t0)
	o := e.orders.get(t, e.ordered)
	o.ID, o.ReservationID, o.Status, o.CancelReason = seckill.OrderIDOf(id), id, seckill.OrderPlaced, ""
	e.orders.mu.Lock()
	e.orders.orders[id] = &o
	e.orders.mu.Unlock()
	decode(t, e.post("alice", id, "cancel", ""), http.StatusOK, &got)
	if got.Restore != seckill.Restored || got.CancelledBy != "buyer" {
		t.Fatalf("the buyer's own cancel = %+v; want restore restored, cancelled_by buyer", got)
	}
	got = reservationView{}
	decode(t, e.get("alice", id), http.StatusOK, &got)
	if got.Restore != "" || got.CancelledBy != "buyer" {
		t.Fatalf("poll of a cancelled order = %+v; want cancelled_by buyer and no restore field", got)
	}
}

func TestPayCancelConflicts(t *testing.T) {
	type tc struct {
		name    string
		action  string
		id      func(e *resEnv) string
		setup   func(e *resEnv)
		message string // a word the 409's message must hold
		writes  int64
	}
	raceTo := func(st seckill.OrderStatus) func(e *resEnv) {
		return func(e *resEnv) {
			e.orders.beforeWrite = func(id string) { e.orders.set(id, st) }
		}
	}
	cases := []tc{
		{name: "pay a cancelled order", action: "pay", id: func(e *resEnv) string { return e.cancelled }, message: "cancelled"},
		{name: "cancel a paid order", action: "cancel", id: func(e *resEnv) string { return e.paid }, message: "paid"},
		{name: "pay loses to a concurrent cancel", action: "pay", id: func(e *resEnv) string { return e.ordered },
			setup: raceTo(seckill.OrderCancelled), message: "cancelled", writes: 1},
		{name: "cancel loses to a concurrent pay", action: "cancel", id: func(e *resEnv) string { return e.ordered },
			setup: raceTo(seckill.OrderPaid), message: "paid", writes: 1},
		{name: "pay after the deadline", action: "pay", id: func(e *resEnv) string { return e.ordered },
			setup: func(e *resEnv) { e.clock.Set(e.payBy) }, message: "deadline", writes: 1},
		{name: "pay a failed reservation", action: "pay", id: func(e *resEnv) string { return e.failed }, message: "failed"},
		{name: "cancel a failed reservation", action: "cancel", id: func(e *resEnv) string { return e.failed }, message: "failed"},
		{name: "pay before the order exists", action: "pay", id: func(e *resEnv) string { return e.pendingID }, message: "not created yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newResEnv(t)
			if c.setup != nil {
				c.setup(e)
			}
			id := c.id(e)
			before, _ := e.orders.snapshot()
			w := e.post("alice", id, c.action, "")
			wantError(t, w, http.StatusConflict, seckill.ESTATECONFLICT)
			if !strings.Contains(w.Body.String(), c.message) {
				t.Fatalf("409 message %s does not name %q", w.Body, c.message)
			}
			if n := e.orders.writes.Load(); n != c.writes {
				t.Fatalf("store writes = %d, want %d", n, c.writes)
			}
			if c.writes == 0 {
				if after, _ := e.orders.snapshot(); !reflect.DeepEqual(after, before) {
					t.Fatalf("the order store changed on a refused %s", c.action)
				}
			}
			if c.message == "not created yet" && w.Header().Get("Retry-After") != "2" {
				t.Fatalf("Retry-After = %q, want 2", w.Header().Get("Retry-After"))
			}
			if e.logs.String() != "" {
				t.Fatalf("a state conflict was logged: %s", e.logs)
			}
		})
	}
}

// TestPayRaceSameBuyer: two pays of one buyer race; the loser answers
// like the winner.
// TestCancelBeforeTheOrderExists: a buyer's cancel of a reservation still
// on its way to the database is parked through the restore path (202),
// and the order will be created cancelled when it lands.
func TestCancelBeforeTheOrderExists(t *testing.T) {
	e := newResEnv(t)
	w := e.post("alice", e.pendingID, "cancel", "")
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"cancellation":"parked"`) {
		t.Fatalf("cancel of a pending reservation: %d %s, want 202 parked", w.Code, w.Body)
	}
	if n := e.orders.writes.Load(); n != 1 {
		t.Fatalf("restore path called %d times, want 1", n)
	}
	// Someone else's pending reservation is still a 404, and nothing is parked.
	if w := e.post("mallory", e.pendingID, "cancel", ""); w.Code != http.StatusNotFound {
		t.Fatalf("another buyer's cancel: %d", w.Code)
	}
	if n := e.orders.writes.Load(); n != 1 {
		t.Fatalf("another buyer's cancel reached the store (%d calls)", n)
	}
}

func TestPayRaceSameBuyer(t *testing.T) {
	e := newResEnv(t)
	e.orders.beforeWrite = func(id string) { e.orders.set(id, seckill.OrderPaid) }
	var got reservationView
	decode(t, e.post("alice", e.ordered, "pay", ""), http.StatusOK, &got)
	if got.Status != "paid" {
		t.Fatalf("answer = %+v", got)
	}
	assertMetric(t, e.env, `seckill_order_actions_total{action="pay",result="unchanged"} 1`)
}

func TestOrderActionRejectsBodies(t *testing.T) {
	cases := []struct {
		name, body, contentType string
		status                  int
		code                    string
	}{
		{name: "a field", body: `{"amount_cents":1}`, status: 400, code: seckill.EINVALID},
		{name: "null", body: `null`, status: 400, code: seckill.EINVALID},
		{name: "array", body: `[]`, status: 400, code: seckill.EINVALID},
		{name: "malformed", body: `{`, status: 400, code: seckill.EINVALID},
		{name: "trailing", body: `{}{}`, status: 400, code: seckill.EINVALID},
		{name: "not json", body: `pay=1`, status: 400, code: seckill.EINVALID},
		{name: "nbsp only", body: "\u00a0", status: 400, code: seckill.EINVALID},
		{name: "content type", body: `{}`, contentType: "text/plain", status: 400, code: seckill.EINVALID},
		{name: "over 8 KiB", body: `{"x":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, status: 413, code: seckill.ETOOLARGE},
		{name: "over 8 KiB of space", body: strings.Repeat(" ", MaxBodyBytes+1), status: 413, code: seckill.ETOOLARGE},
	}
	for _, action := range []string{"pay", "cancel"} {
		for _, c := range cases {
			t.Run(action+" "+c.name, func(t *testing.T) {
				e := newResEnv(t)
				before, beforeFailed := e.orders.snapshot()
				r := req{method: "POST", path: "/api/v1/reservations/" + e.ordered + "/" + action, body: c.body, auth: "Bearer " + buyerToken(t, "alice")}
				if c.contentType != "" {
					r.headers = map[string][]string{"Content-Type": {c.contentType}}
				}
				wantError(t, e.do(r), c.status, c.code)
				e.unchanged(t, before, beforeFailed)
				if n := e.storeCalls(); n != 0 {
					t.Fatalf("a rejected body reached the stores (%d calls)", n)
				}
			})
		}
	}
	// Tolerated: nothing, whitespace, an empty object.
	for _, body := range []string{"", " \r\n\t", "{}", " { } "} {
		e := newResEnv(t)
		if w := e.post("alice", e.ordered, "cancel", body); w.Code != http.StatusOK {
			t.Errorf("cancel with body %q: %d %s", body, w.Code, w.Body)
		}
	}
}

func TestReservationStoreErrors(t *testing.T) {
	t.Run("order store down", func(t *testing.T) {
		e := newResEnv(t)
		e.orders.err = errors.New("dial tcp 10.0.0.9:5432: connection refused")
		for _, action := range []string{"", "pay", "cancel"} {
			w := e.do(ownReq(t, "alice", e.ordered, action))
			wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
			if strings.Contains(w.Body.String(), "10.0.0.9") {
				t.Fatalf("internal detail leaked: %s", w.Body)
			}
		}
		if !strings.Contains(e.logs.String(), "10.0.0.9") {
			t.Fatalf("internal error not logged: %q", e.logs)
		}
		assertMetric(t, e.env, `seckill_reservation_polls_total{status="error"} 1`)
		assertMetric(t, e.env, `seckill_order_actions_total{action="cancel",result="error"} 1`)
	})
	t.Run("stock store down", func(t *testing.T) {
		e := newResEnv(t)
		e.pending.err = seckill.Errorf(seckill.EUNAVAILABLE, "The stock store is unreachable; retry shortly.")
		wantError(t, e.get("alice", e.pendingID), http.StatusServiceUnavailable, seckill.EUNAVAILABLE)
		// Orders are answered from the database alone.
		if w := e.get("alice", e.ordered); w.Code != http.StatusOK {
			t.Fatalf("an ordered reservation needs the stock store: %d %s", w.Code, w.Body)
		}
	})
	t.Run("unknown order status", func(t *testing.T) {
		e := newResEnv(t)
		e.orders.set(e.ordered, "chargeback")
		wantError(t, e.get("alice", e.ordered), http.StatusInternalServerError, seckill.EINTERNAL)
		wantError(t, e.post("alice", e.ordered, "pay", ""), http.StatusInternalServerError, seckill.EINTERNAL)
		if e.orders.writes.Load() != 0 {
			t.Fatal("wrote to an order of unknown status")
		}
		if !strings.Contains(e.logs.String(), "chargeback") {
			t.Fatalf("unknown status not logged: %q", e.logs)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		e := newResEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e.orders.err = context.Canceled
		r := newRequest("GET", "/api/v1/reservations/"+e.ordered, "").WithContext(ctx)
		r.Header.Set("Authorization", "Bearer "+buyerToken(t, "alice"))
		if w := serve(e.h, r); w.Body.Len() != 0 {
			t.Fatalf("answered a gone client: %d %s", w.Code, w.Body)
		}
		if e.logs.String() != "" {
			t.Fatalf("a hang-up was logged: %s", e.logs)
		}
		assertMetric(t, e.env, `seckill_reservation_polls_total{status="client_closed"} 1`)
	})
}

func TestFailedOrders(t *testing.T) {
	e := newResEnv(t)
	for i := range 3 {
		e.orders.failedList = append(e.orders.failedList, &seckill.FailedOrder{
			ReservationID: seckill.NewReservationID(testSaleID, t0), SaleID: testSaleID, UserID: "u" + strconv.Itoa(i),
			Qty: 1, Reason: "stock exhausted in database", Attempts: 1, Payload: []byte(`{"secret":"payload"}`), CreatedAt: t0,
		})
	}
	var got struct {
		FailedOrders []seckill.FailedOrder `json:"failed_orders"`
		Next         string                `json:"next"`
	}
	w := e.do(req{method: "GET", path: "/admin/v1/failed-orders", auth: admin()})
	decode(t, w, http.StatusOK, &got)
	if len(got.FailedOrders) != 3 || got.FailedOrders[0].ReservationID != e.orders.failedList[0].ReservationID ||
		got.FailedOrders[2].Reason != "stock exhausted in database" || got.FailedOrders[1].UserID != "u1" {
		t.Fatalf("answer = %+v", got)
	}
	if strings.Contains(w.Body.String(), "payload") {
		t.Fatalf("the raw payload was listed: %s", w.Body)
	}
	decode(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders?limit=2&_=123", auth: admin()}), http.StatusOK, &got)
	if len(got.FailedOrders) != 2 || got.Next == "" {
		t.Fatalf("limit=2 of 3 gave %d, next %q", len(got.FailedOrders), got.Next)
	}
	e.do(req{method: "GET", path: "/admin/v1/failed-orders?limit=1000", auth: admin()})
	e.do(req{method: "GET", path: "/admin/v1/failed-orders?limit=0001", auth: admin()})
	if want := []int{100, 2, 1000, 1}; !reflect.DeepEqual(e.orders.limits, want) {
		t.Fatalf("store limits = %v, want %v", e.orders.limits, want)
	}

	// An empty list is [], not null.
	e.orders.failedList = nil
	if w := e.do(req{method: "GET", path: "/admin/v1/failed-orders", auth: admin()}); w.Body.String() != "{\"failed_orders\":[]}\n" {
		t.Fatalf("empty list: %s", w.Body)
	}
}

func TestFailedOrdersRejects(t *testing.T) {
	for name, query := range map[string]string{
		"empty":     "limit=",
		"zero":      "limit=0",
		"negative":  "limit=-1",
		"plus":      "limit=%2B5",
		"over max":  "limit=1001",
		"huge":      "limit=99999999999999999999999",
		"word":      "limit=all",
		"float":     "limit=1.5",
		"exponent":  "limit=1e3",
		"space":     "limit=%2010",
		"hex":       "limit=0x10",
		"two":       "limit=5&limit=6",
		"bad query": "limit=%zz",
		"semicolon": "limit=5;x=1",
	} {
		t.Run(name, func(t *testing.T) {
			e := newResEnv(t)
			wantError(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders?" + query, auth: admin()}), http.StatusBadRequest, seckill.EINVALID)
			if n := e.orders.calls.Load(); n != 0 {
				t.Fatalf("a bad limit reached the store (%d calls)", n)
			}
		})
	}
	t.Run("not admin", func(t *testing.T) {
		e := newResEnv(t)
		for _, auth := range []string{"", "Bearer " + buyerToken(t, "alice"), "Bearer wrong"} {
			wantError(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders", auth: auth}), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
		}
		if n := e.orders.calls.Load(); n != 0 {
			t.Fatalf("an unauthorised request reached the store (%d calls)", n)
		}
	})
	t.Run("store down", func(t *testing.T) {
		e := newResEnv(t)
		e.orders.err = errors.New("pq: relation failed_orders does not exist")
		w := e.do(req{method: "GET", path: "/admin/v1/failed-orders", auth: admin()})
		wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
		if !strings.Contains(e.logs.String(), "failed_orders does not exist") {
			t.Fatalf("not logged: %q", e.logs)
		}
	})
}

// TestFailedOrderFilters: sale_id, state and limit reach the store, next
// is given while a page follows and omitted on the last, and before
// follows it; without parameters the store is asked as before the
// filters were (every sale, both states, the default limit).
func TestFailedOrderFilters(t *testing.T) {
	e := newResEnv(t)
	other := "other-sale"
	resolved := &seckill.Resolution{Action: seckill.ResolveRefunded, Actor: "ops", ResolvedAt: t0}
	for i := range 6 {
		f := &seckill.FailedOrder{ReservationID: seckill.NewReservationID(testSaleID, t0), SaleID: testSaleID,
			UserID: "u" + strconv.Itoa(i), Qty: 1, Reason: "r", Attempts: 1, CreatedAt: t0}
		if i%2 == 1 {
			f.SaleID, f.ReservationID = other, seckill.NewReservationID(other, t0)
		}
		if i == 4 {
			f.Resolution = resolved
		}
		e.orders.failedList = append(e.orders.failedList, f)
	}
	type page struct {
		FailedOrders []seckill.FailedOrder `json:"failed_orders"`
		Next         *string               `json:"next"`
	}
	get := func(query string) page {
		t.Helper()
		var p page
		decode(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders?" + query, auth: admin()}), http.StatusOK, &p)
		return p
	}
	// The open ones of testSaleID (0 and 2; 4 is resolved), a page of one
	// at a time.
	p := get("sale_id=" + testSaleID + "&state=open&limit=1&_=1")
	if len(p.FailedOrders) != 1 || p.FailedOrders[0].UserID != "u0" || p.Next == nil || *p.Next == "" {
		t.Fatalf("first page: %+v", p)
	}
	p = get("sale_id=" + testSaleID + "&state=open&limit=1&before=" + url.QueryEscape(*p.Next))
	if len(p.FailedOrders) != 1 || p.FailedOrders[0].UserID != "u2" || p.Next != nil {
		t.Fatalf("last page: %+v; want u2 and no next", p)
	}
	if p := get("sale_id=" + testSaleID + "&state=resolved"); len(p.FailedOrders) != 1 || p.FailedOrders[0].UserID != "u4" {
		t.Fatalf("resolved: %+v", p)
	}
	if p := get("sale_id=" + other + "&state=all"); len(p.FailedOrders) != 3 {
		t.Fatalf("all of %s: %+v", other, p)
	}
	if p := get(""); len(p.FailedOrders) != 6 || p.Next != nil {
		t.Fatalf("no parameters: %+v", p)
	}
	want := []seckill.FailedOrderFilter{
		{SaleID: testSaleID, State: seckill.FailedOpen, Limit: 1},
		{SaleID: testSaleID, State: seckill.FailedOpen, Limit: 1, Before: "c2"},
		{SaleID: testSaleID, State: seckill.FailedResolved, Limit: DefaultFailedOrdersLimit},
		{SaleID: other, State: seckill.FailedAll, Limit: DefaultFailedOrdersLimit},
		{State: seckill.FailedAll, Limit: DefaultFailedOrdersLimit},
	}
	if !reflect.DeepEqual(e.orders.filters, want) {
		t.Fatalf("store filters:\n got %+v\nwant %+v", e.orders.filters, want)
	}
}

func TestFailedOrderFiltersReject(t *testing.T) {
	for name, tt := range map[string]struct {
		query     string
		reachable bool // the store is asked, and says EINVALID
		message   string
	}{
		"empty sale":     {query: "sale_id=", message: "sale_id"},
		"two sales":      {query: "sale_id=a&sale_id=b", message: "sale_id"},
		"empty state":    {query: "state=", message: "state"},
		"unknown state":  {query: "state=pending", message: "state"},
		"state capitals": {query: "state=OPEN", message: "state"},
		"two states":     {query: "state=open&state=all", message: "state"},
		"empty before":   {query: "before=", message: "before"},
		"two befores":    {query: "before=c1&before=c2", message: "before"},
		"bad limit":      {query: "sale_id=a&limit=0", message: "limit"},
		"not a cursor":   {query: "sale_id=a&before=garbage", reachable: true, message: "before"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newResEnv(t)
			w := e.do(req{method: "GET", path: "/admin/v1/failed-orders?" + tt.query, auth: admin()})
			wantError(t, w, http.StatusBadRequest, seckill.EINVALID)
			if !strings.Contains(w.Body.String(), tt.message) {
				t.Errorf("message %s: want it to name %s", w.Body, tt.message)
			}
			if n := e.orders.calls.Load(); (n != 0) != tt.reachable {
				t.Fatalf("%d store calls; want the store asked: %v", n, tt.reachable)
			}
		})
	}
}

func TestFailedOrderCounts(t *testing.T) {
	e := newResEnv(t)
	w := e.do(req{method: "GET", path: "/admin/v1/failed-orders/counts", auth: admin()})
	if w.Code != http.StatusOK || w.Body.String() != "{\"counts\":[]}\n" {
		t.Fatalf("no failed orders: %d %s", w.Code, w.Body)
	}
	e.orders.counts = []seckill.FailedOrderCount{
		{SaleID: "tea", Open: 3, Resolved: 1, Newest: t0},
		{SaleID: "", Open: 1, Newest: t0.Add(-time.Hour)},
	}
	var got struct {
		Counts []seckill.FailedOrderCount `json:"counts"`
	}
	decode(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders/counts?_=5", auth: admin()}), http.StatusOK, &got)
	if len(got.Counts) != 2 || got.Counts[0].SaleID != "tea" || got.Counts[0].Open != 3 || got.Counts[0].Resolved != 1 ||
		!got.Counts[0].Newest.Equal(t0) || got.Counts[1].SaleID != "" || got.Counts[1].Open != 1 {
		t.Fatalf("counts = %+v", got.Counts)
	}
	wantError(t, e.do(req{method: "POST", path: "/admin/v1/failed-orders/counts", auth: admin()}), http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)

	calls := e.orders.calls.Load()
	for _, auth := range []string{"", "Bearer " + buyerToken(t, "alice"), "Bearer wrong"} {
		wantError(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders/counts", auth: auth}), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
	}
	if n := e.orders.calls.Load(); n != calls {
		t.Fatalf("an unauthorised request reached the store (%d calls)", n-calls)
	}
	e.orders.err = errors.New("pq: relation failed_orders does not exist")
	wantError(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders/counts", auth: admin()}), http.StatusInternalServerError, seckill.EINTERNAL)
}

func TestReservationRouting(t *testing.T) {
	e := newResEnv(t)
	w := e.do(req{method: "DELETE", path: "/api/v1/reservations/" + e.ordered, auth: "Bearer " + buyerToken(t, "alice")})
	wantError(t, w, http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)
	if got := w.Header().Get("Allow"); got != "GET, HEAD" {
		t.Fatalf("Allow = %q", got)
	}
	w = e.do(req{method: "GET", path: "/api/v1/reservations/" + e.ordered + "/pay", auth: "Bearer " + buyerToken(t, "alice")})
	wantError(t, w, http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)
	if got := w.Header().Get("Allow"); got != "POST" {
		t.Fatalf("Allow = %q", got)
	}
	wantError(t, e.do(req{method: "POST", path: "/api/v1/reservations/" + e.ordered + "/refund", auth: "Bearer " + buyerToken(t, "alice")}),
		http.StatusNotFound, seckill.ENOTFOUND)
	if e.orders.writes.Load() != 0 {
		t.Fatal("a misrouted request wrote")
	}
}

// Without an order store the routes do not exist (the API before orders),
// and half a configuration is refused.
func TestReservationRoutesOptional(t *testing.T) {
	e := newEnv(t)
	id := seckill.NewReservationID(testSaleID, t0)
	w := e.do(req{method: "GET", path: "/api/v1/reservations/" + id, auth: "Bearer " + buyerToken(t, "alice")})
	wantError(t, w, http.StatusNotFound, seckill.ENOTFOUND)
	wantError(t, e.do(req{method: "GET", path: "/admin/v1/failed-orders", auth: admin()}), http.StatusNotFound, seckill.ENOTFOUND)
	assertMetric(t, e, `seckill_http_requests_total{route="unmatched",status="404"} 2`)
	if strings.Contains(e.scrape(), "seckill_reservation_polls_total") {
		t.Fatal("reservation metrics registered without the routes")
	}

	full := Config{Sales: fakestore.NewSales(), Stock: fakestore.NewStock(), Reserver: &fakeReserver{}, Verifier: jwt.NewVerifier(testSecret)}
	for name, mod := range map[string]func(*Config){
		"orders only":  func(c *Config) { c.Orders = newFakeOrders() },
		"pending only": func(c *Config) { c.Pending = &fakePending{} },
	} {
		c := full
		mod(&c)
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "Pending") {
			t.Errorf("New with %s: err = %v, want one naming Orders and Pending", name, err)
		}
	}
}

// FuzzParseLimit: any query is either refused as invalid_request or gives
// a limit in range.
func FuzzParseLimit(f *testing.F) {
	for _, seed := range []string{"", "limit=5", "limit=1000", "limit=1001", "limit=0", "limit=-1", "limit=%2B1",
		"limit=", "limit=1&limit=2", "limit=%zz", "a=b;c", "limit=99999999999999999999", "limit=0100", "x=1&limit=7"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		n, err := parseLimit(q)
		if err != nil {
			if code := seckill.ErrorCode(err); code != seckill.EINVALID {
				t.Fatalf("parseLimit(%q): code %q", q, code)
			}
			return
		}
		if n < 1 || n > MaxFailedOrdersLimit {
			t.Fatalf("parseLimit(%q) = %d, out of range", q, n)
		}
	})
}

// FuzzDecodeNoFields: a pay or cancel body is accepted only when it is
// empty or an empty object; every rejection is a client error.
func FuzzDecodeNoFields(f *testing.F) {
	for _, seed := range []string{"", " ", "{}", " {} ", "{ }", "null", "[]", `{"a":1}`, "{", "{}{}", "\xff", "\u00a0", `{"":0}`} {
		f.Add([]byte(seed))
	}
	r := httptest.NewRequest("POST", "/", nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		err := decodeNoFields(r, body)
		if err != nil {
			if code := seckill.ErrorCode(err); code != seckill.EINVALID {
				t.Fatalf("decodeNoFields(%q): code %q", body, code)
			}
			return
		}
		trimmed := strings.Trim(string(body), " \t\r\n")
		if trimmed != "" && strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(trimmed, " ", ""), "\t", ""), "\r", ""), "\n", "") != "{}" {
			t.Fatalf("accepted %q", body)
		}
	})
}

// TestBuyerPayIsOffByDefault: without Config.BuyerPay a buyer cannot pay
// by saying so: the route does not exist, and the order stays unpaid.
func TestBuyerPayIsOffByDefault(t *testing.T) {
	orders := newFakeOrders()
	e := newEnv(t, func(c *Config) {
		c.Orders, c.Pending, c.Restorer = orders, &fakePending{records: map[string]pendingRecord{}}, orders
	})
	id := seckill.NewReservationID(testSaleID, t0)
	orders.orders[id] = &seckill.Order{ID: seckill.OrderIDOf(id), ReservationID: id, SaleID: testSaleID, UserID: "alice", Qty: 1,
		AmountCents: 100, Status: seckill.OrderPlaced, PayBy: t0.Add(time.Minute)}
	w := e.do(req{method: "POST", path: "/api/v1/reservations/" + id + "/pay", auth: "Bearer " + buyerToken(t, "alice")})
	if w.Code != http.StatusNotFound {
		t.Fatalf("buyer pay: %d %s, want 404", w.Code, w.Body)
	}
	if orders.orders[id].Status != seckill.OrderPlaced || orders.writes.Load() != 0 {
		t.Fatalf("the order moved: %s", orders.orders[id].Status)
	}
}

// TestPayURL: an order the buyer may still pay carries the shop's payment
// page, filled in; a paid one, or one past its deadline, does not; a
// template that names no order or is not an http(s) URL is refused.
func TestPayURL(t *testing.T) {
	e := newResEnv(t)
	e.srv.pay.urlTemplate = "https://shop.example/pay?reservation={id}&order={order_id}&cents={amount_cents}"
	var v reservationView
	decode(t, e.get("alice", e.ordered), http.StatusOK, &v)
	if want := "https://shop.example/pay?reservation=" + e.ordered + "&order=o-" + e.ordered + "&cents=19800"; v.PayURL != want {
		t.Fatalf("pay_url = %q, want %q", v.PayURL, want)
	}
	v = reservationView{}
	decode(t, e.get("alice", e.paid), http.StatusOK, &v)
	if v.PayURL != "" {
		t.Fatalf("a paid order has pay_url %q", v.PayURL)
	}
	e.clock.Set(e.payBy)
	v = reservationView{}
	decode(t, e.get("alice", e.ordered), http.StatusOK, &v)
	if v.PayURL != "" {
		t.Fatalf("an order at its deadline has pay_url %q", v.PayURL)
	}
	for tpl, ok := range map[string]bool{
		"": true, "https://shop.example/pay?r={id}": true, "http://localhost:3000/pay/{order_id}": true,
		"https://shop.example/pay": false, "javascript:alert({id})": false, "/pay?r={id}": false, "https://{id}": true,
	} {
		if err := CheckPaymentURLTemplate(tpl); (err == nil) != ok {
			t.Errorf("CheckPaymentURLTemplate(%q) = %v, want ok %v", tpl, err, ok)
		}
	}
	if _, err := New(Config{Sales: fakestore.NewSales(), Stock: fakestore.NewStock(), Reserver: &fakeReserver{},
		Verifier: jwt.NewVerifier(testSecret), PaymentURLTemplate: "ftp://x/{id}"}); err == nil {
		t.Fatal("New accepted an ftp payment URL template")
	}
}
