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

func (e *resEnv) restore(auth, body string) (int, map[string]any) {
	e.t.Helper()
	w := e.do(req{method: "POST", path: "/admin/v1/restores", body: body, auth: auth,
		headers: map[string][]string{"Content-Type": {"application/json"}}})
	var m map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	return w.Code, m
}

func TestAdminRestore(t *testing.T) {
	e := newResEnv(t)
	admin := "Bearer " + testAdminToken
	body := func(id string) string { return `{"reservation_id":"` + id + `","reason":"refund"}` }

	tests := []struct {
		name   string
		auth   string
		body   string
		status int
		answer string // status field or error code
	}{
		{"an ordered order", admin, body(e.ordered), 200, "restored"},
		{"the same again", admin, body(e.ordered), 200, "already_restored"},
		{"a cancelled order", admin, body(e.cancelled), 200, "already_restored"},
		{"no order yet", admin, body(e.pendingID), 202, "parked"},
		{"a paid order", admin, body(e.paid), 409, seckill.ESTATECONFLICT},
		{"not a reservation id", admin, body("nope"), 400, seckill.EINVALID},
		{"no reason", admin, `{"reservation_id":"` + e.ordered + `"}`, 400, seckill.EINVALID},
		{"unknown field", admin, `{"reservation_id":"` + e.ordered + `","reason":"x","qty":1}`, 400, seckill.EINVALID},
		{"a buyer's token", "Bearer " + buyerToken(t, "alice"), body(e.ordered), 401, seckill.EUNAUTHORIZED},
		{"no token", "", body(e.ordered), 401, seckill.EUNAUTHORIZED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m := e.restore(tt.auth, tt.body)
			got, _ := m["status"].(string)
			if errObj, ok := m["error"].(map[string]any); ok {
				got, _ = errObj["code"].(string)
			}
			if status != tt.status || got != tt.answer {
				t.Fatalf("got %d %q, want %d %q (%v)", status, got, tt.status, tt.answer, m)
			}
		})
	}
	if o := e.orders.get(t, e.ordered); o.Status != seckill.OrderCancelled || o.CancelReason != "refund" {
		t.Fatalf("restored order: %+v", o)
	}
	if o := e.orders.get(t, e.paid); o.Status != seckill.OrderPaid {
		t.Fatalf("a paid order changed: %+v", o)
	}
}

type fakeRestores struct{ list []*seckill.RestoreRequest }

func (f *fakeRestores) RestoreRequests(_ context.Context, state seckill.RestoreState, limit int) ([]*seckill.RestoreRequest, error) {
	var out []*seckill.RestoreRequest
	for _, r := range f.list {
		if r.State == state && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func TestRestoreListAndReconciliation(t *testing.T) {
	restores := &fakeRestores{list: []*seckill.RestoreRequest{
		{ReservationID: "a", State: seckill.RestoreStateParked},
		{ReservationID: "b", State: seckill.RestoreStateParked, AlertedAt: time.Now()},
		{ReservationID: "c", State: seckill.RestoreStateDone},
	}}
	calls := 0
	e := newEnv(t, func(c *Config) {
		c.Restores = restores
		c.Reconcile = func(_ context.Context, id string) (any, error) {
			calls++
			if id != testSaleID {
				return nil, seckill.ErrNotFound
			}
			return map[string]any{"sale_id": id, "balanced": true, "oversold": 0}, nil
		}
	})
	admin := "Bearer " + testAdminToken
	get := func(path, auth string) (int, string) {
		w := e.do(req{method: "GET", path: path, auth: auth})
		return w.Code, w.Body.String()
	}
	for _, tt := range []struct {
		path, auth string
		status     int
		contains   string
	}{
		{"/admin/v1/restores", admin, 200, `"reservation_id":"a"`},
		{"/admin/v1/restores?state=alerted", admin, 200, `"reservation_id":"b"`},
		{"/admin/v1/restores?state=done", admin, 200, `"reservation_id":"c"`},
		{"/admin/v1/restores?state=bogus", admin, 400, "invalid_request"},
		{"/admin/v1/restores?limit=0", admin, 400, "invalid_request"},
		{"/admin/v1/restores", "Bearer " + buyerToken(t, "alice"), 401, "unauthorized"},
		{"/admin/v1/sales/" + testSaleID + "/reconciliation", admin, 200, `"balanced":true`},
		{"/admin/v1/sales/nope/reconciliation", admin, 404, "sale_not_found"},
		{"/admin/v1/sales/" + testSaleID + "/reconciliation", "", 401, "unauthorized"},
	} {
		status, body := get(tt.path, tt.auth)
		if status != tt.status || !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s: %d %s; want %d containing %s", tt.path, status, body, tt.status, tt.contains)
		}
	}
	if _, body := get("/admin/v1/restores?state=alerted", admin); strings.Contains(body, `"reservation_id":"a"`) {
		t.Errorf("state=alerted listed a request that never alerted: %s", body)
	}
	if calls != 2 {
		t.Errorf("reconcile called %d times, want 2 (never for an unauthenticated request)", calls)
	}
	_ = http.StatusOK
}
