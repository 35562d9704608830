package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/seckill-dev/seckill"
)

// fakeBuyerClaims holds, per buyer, their orders and the units the stock
// store counts as theirs.
type fakeBuyerClaims struct {
	orders map[string][]*seckill.Order
	held   map[string]int64
	err    error
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
