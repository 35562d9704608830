package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// fakeBuyerClaims holds, per buyer, their orders and the units the stock
// store counts as theirs.
type fakeBuyerClaims struct {
	orders map[string][]*seckill.Order
	failed map[string][]*seckill.FailedOrder
	held   map[string]int64
	err    error
}

func (f *fakeBuyerClaims) BuyerFailedOrders(_ context.Context, _, user string) ([]*seckill.FailedOrder, error) {
	return f.failed[user], f.err
}

func (f *fakeBuyerClaims) BuyerOrders(_ context.Context, _, user string) ([]*seckill.Order, error) {
	return f.orders[user], f.err
}

func (f *fakeBuyerClaims) Held(_ context.Context, _, user string) (int64, error) {
	return f.held[user], f.err
}

// TestMyClaims: a buyer who lost an answer sees their own orders of the
// sale and the units still on their way, never another buyer's; an
// unknown sale is 404, a missing token 401, a store outage 503.
func TestMyClaims(t *testing.T) {
	bc := &fakeBuyerClaims{
		orders: map[string][]*seckill.Order{"ann": {{ID: "o-" + testSaleID + ".r1", ReservationID: testSaleID + ".r1", SaleID: testSaleID, UserID: "ann", Qty: 1, Status: seckill.OrderPlaced}}},
		held:   map[string]int64{"ann": 2, "bob": 1},
	}
	e := newEnv(t, func(c *Config) { c.BuyerClaims = bc })
	e.sales.Put(testSale())
	path := "/api/v1/sales/" + testSaleID + "/reservations/mine"
	get := func(user string) (int, myClaimsResponse) {
		auth := ""
		if user != "" {
			auth = "Bearer " + buyerToken(t, user)
		}
		rec := e.do(req{method: "GET", path: path, auth: auth})
		var resp myClaimsResponse
		_ = json.Unmarshal(rec.Body.Bytes(), &resp)
		return rec.Code, resp
	}
	if code, r := get("ann"); code != http.StatusOK || len(r.Reservations) != 1 || r.Reservations[0].ReservationID != testSaleID+".r1" ||
		r.Reservations[0].Status != "ordered" || r.PendingUnits != 1 || r.PollAfterMS == 0 {
		t.Errorf("ann: %d %+v; want her order and 1 unit pending", code, r)
	}
	if code, r := get("bob"); code != http.StatusOK || len(r.Reservations) != 0 || r.PendingUnits != 1 {
		t.Errorf("bob: %d %+v; want no order and 1 unit pending", code, r)
	}
	if code, r := get("cy"); code != http.StatusOK || len(r.Reservations) != 0 || r.PendingUnits != 0 || r.PollAfterMS != 0 {
		t.Errorf("cy: %d %+v; want nothing", code, r)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d; want 401", code)
	}
	if rec := e.do(req{method: "GET", path: "/api/v1/sales/nosuch/reservations/mine", auth: "Bearer " + buyerToken(t, "ann")}); rec.Code != http.StatusNotFound {
		t.Errorf("unknown sale: %d; want 404", rec.Code)
	}
	bc.err = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "down"}
	if code, _ := get("ann"); code != http.StatusServiceUnavailable {
		t.Errorf("store down: %d; want 503", code)
	}
}

// TestMyClaimsListsFailedReservations: a buyer whose reservation failed
// finds it on a later read, as failed (with the reason only when it is a
// code the buyer may hear), not as units still on their way; a re-driven
// one is its order.
func TestMyClaimsListsFailedReservations(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	r1, r2, r3 := testSaleID+".r1", testSaleID+".r2", testSaleID+".r3"
	bc := &fakeBuyerClaims{
		orders: map[string][]*seckill.Order{"ann": {{ID: seckill.OrderIDOf(r3), ReservationID: r3, SaleID: testSaleID, UserID: "ann", Qty: 1,
			Status: seckill.OrderPlaced, PayBy: t0.Add(time.Hour), CreatedAt: t0.Add(3 * time.Minute)}}},
		failed: map[string][]*seckill.FailedOrder{"ann": {
			{ReservationID: r1, SaleID: testSaleID, UserID: "ann", Qty: 2, Reason: seckill.ReasonOverLimit + ": qty 2, buyer holds 1 of 2", CreatedAt: t0.Add(time.Minute)},
			{ReservationID: r2, SaleID: testSaleID, UserID: "ann", Qty: 1, Reason: "attempts exhausted: dial tcp 10.0.0.7:3306: connection refused", CreatedAt: t0.Add(2 * time.Minute)},
			{ReservationID: r3, SaleID: testSaleID, UserID: "ann", Qty: 1, Reason: "attempts exhausted", CreatedAt: t0}, // re-driven
		}},
		held: map[string]int64{"ann": 4}, // r2 and r3, and r1 not yet released
	}
	e := newEnv(t, func(c *Config) { c.BuyerClaims = bc })
	e.sales.Put(testSale())
	rec := e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID + "/reservations/mine", auth: "Bearer " + buyerToken(t, "ann")})
	var got myClaimsResponse
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
		t.Fatalf("ann: %d %s", rec.Code, rec.Body)
	}
	want := []reservationView{
		{ReservationID: r1, SaleID: testSaleID, Qty: 2, Status: "failed", Reason: seckill.EPURCHASELIMIT},
		{ReservationID: r2, SaleID: testSaleID, Qty: 1, Status: "failed"},
		{ReservationID: r3, SaleID: testSaleID, Qty: 1, Status: "ordered", OrderID: seckill.OrderIDOf(r3)},
	}
	if len(got.Reservations) != len(want) {
		t.Fatalf("ann's claims: %+v; want %+v", got.Reservations, want)
	}
	for i, w := range want {
		g := got.Reservations[i]
		g.PayBy = nil
		if g != w {
			t.Errorf("claim %d: %+v; want %+v", i, g, w)
		}
	}
	if got.PendingUnits != 0 || got.PollAfterMS != 0 {
		t.Errorf("ann: %d units pending (poll after %d ms); want none: her failed claims are not on their way", got.PendingUnits, got.PollAfterMS)
	}
	if strings.Contains(rec.Body.String(), "10.0.0.7") || strings.Contains(rec.Body.String(), "holds 1 of 2") {
		t.Errorf("the answer shows a failed order's internal reason: %s", rec.Body)
	}
}
