package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
	"github.com/seckill-dev/seckill/internal/lostclaim"
)

// RecordFailedOrder completes fakeOrders as the lost-claim resolver's
// store: refused when the reservation already ended either way.
func (f *fakeOrders) RecordFailedOrder(_ context.Context, fo *seckill.FailedOrder) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.orders[fo.ReservationID]; ok {
		return seckill.ErrDuplicate
	}
	if _, ok := f.failed[fo.ReservationID]; ok {
		return seckill.ErrDuplicate
	}
	c := *fo
	f.failed[fo.ReservationID] = &c
	return nil
}

// TestForgottenClaimIsNeverNotFound: a claim the stock store forgot (no
// record, no order) reads pending while it may still land, then failed
// with reason lost_in_stock_store, alerted, and stays so; an id not issued
// to the buyer is 404 as before; one that landed meanwhile reads ordered.
func TestForgottenClaimIsNeverNotFound(t *testing.T) {
	orders := newFakeOrders()
	pending := &fakePending{records: map[string]pendingRecord{}}
	ids := claimid.NewMinter([]byte("claim key"))
	var lost int
	e := &resEnv{orders: orders, pending: pending}
	e.env = newEnv(t, func(c *Config) {
		c.Orders, c.Pending, c.Restorer, c.ClaimIDs = orders, pending, orders, ids
		c.Lost = lostclaim.New(orders, ids, lostclaim.Config{
			After: time.Minute, Now: c.Now, Logger: c.Logger,
			OnLost: func(*seckill.FailedOrder) { lost++ },
		})
	})
	e.sales.Put(testSale())
	e.stock.Levels[testSaleID] = seckill.StockLevel{Total: 10}
	e.reserver.set(func(_ string, r seckill.ReserveRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: r.ReservationID, Qty: r.Qty}, nil
	})
	var acc acceptedResponse
	decode(t, e.reserve("alice", testSaleID, `{"qty":2}`, nil), http.StatusAccepted, &acc)
	if _, _, ok := ids.Verify(acc.ReservationID, "alice"); !ok {
		t.Fatalf("the 202's id %s is not signed for its buyer", acc.ReservationID)
	}
	// Redis forgot it: nothing anywhere has the id.
	var v reservationView
	decode(t, e.get("alice", acc.ReservationID), http.StatusOK, &v)
	if v.Status != statusPending || v.Qty != 2 {
		t.Errorf("forgotten claim at once: %+v, want pending qty 2", v)
	}
	wantError(t, e.get("bob", acc.ReservationID), http.StatusNotFound, seckill.ENOTFOUND)
	wantError(t, e.get("alice", seckill.NewReservationID(testSaleID, t0)), http.StatusNotFound, seckill.ENOTFOUND)

	e.clock.Advance(time.Minute)
	for range 2 { // the second poll reads the failed order recorded by the first
		decode(t, e.get("alice", acc.ReservationID), http.StatusOK, &v)
		if v.Status != statusFailed || v.Reason != seckill.ReasonLostInStockStore || v.Qty != 2 {
			t.Errorf("forgotten claim after the bound: %+v, want failed, reason %s, qty 2", v, seckill.ReasonLostInStockStore)
		}
	}
	if lost != 1 || !strings.Contains(e.logs.String(), "ALERT lost claim") {
		t.Errorf("lost claims counted %d, log %q; want 1 and an ALERT line", lost, e.logs.String())
	}
	f := orders.failed[acc.ReservationID]
	if f == nil || f.UserID != "alice" || f.SaleID != testSaleID || !strings.HasPrefix(f.Reason, seckill.ReasonLostInStockStore) {
		t.Errorf("failed order %+v, want alice's, reason %s…", f, seckill.ReasonLostInStockStore)
	}

	// One that landed as an order after Redis forgot it reads ordered.
	decode(t, e.reserve("alice", testSaleID, `{"qty":1}`, nil), http.StatusAccepted, &acc)
	orders.orders[acc.ReservationID] = &seckill.Order{ID: seckill.OrderIDOf(acc.ReservationID), ReservationID: acc.ReservationID,
		SaleID: testSaleID, UserID: "alice", Qty: 1, Status: seckill.OrderPlaced, PayBy: t0.Add(time.Hour)}
	e.clock.Advance(time.Hour)
	decode(t, e.get("alice", acc.ReservationID), http.StatusOK, &v)
	if v.Status != string(seckill.OrderPlaced) {
		t.Errorf("forgotten claim whose order landed: %+v, want ordered", v)
	}
}
