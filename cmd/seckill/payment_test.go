package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

// Test secrets of the shop's side: 32 bytes and more, as serve demands.
const (
	testWebhookSecret = "whsec_test_0123456789abcdef0123456789abcdef"
	testServiceToken  = "svc_test_0123456789abcdef0123456789abcdef"
)

// paymentBody is a payment event's body.
func paymentBody(id string, typ seckill.PaymentEventType, reservationID string, cents int64, currency string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"reservation_id":%q,"amount_cents":%d,"currency":%q}`, id, typ, reservationID, cents, currency)
}

// webhook posts body to the payment webhook with a Seckill-Signature
// header (none when sig is "").
func (e *engine) webhook(body, sig string) reply {
	e.t.Helper()
	var hdr []string
	if sig != "" {
		hdr = []string{webhooksig.Header, sig}
	}
	return e.do("POST", "/webhooks/v1/payments", "", body, hdr...)
}

// TestPaymentFromTheShop: a buyer can no longer pay by saying so; the
// shop's provider pays through a signed webhook, whose forgeries, stale
// replays and tampered bodies are refused; a redelivery changes nothing; a
// wrong amount is 422, alerted and listed; a payment that arrives after
// the sweeper gave the unit back makes the order refund_due, counted,
// alerted and listed, and its refund settles it; a paid order's unit is
// never given back by the payment timeout; the shop's server pays with its
// service token, not the admin token.
func TestPaymentFromTheShop(t *testing.T) {
	clk := &testClock{}
	logs := &servicetest.Buffer{}
	e := startEngine(t, func(c *Config) {
		c.PaymentWebhookSecret, c.ServiceToken = testWebhookSecret, testServiceToken
		c.SweepInterval, c.RestoreRetryInterval = 100*time.Millisecond, 100*time.Millisecond
	}, clk.hook(), func(m *Main) { m.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	sale := e.liveSale(10, 1)
	claims := map[string]string{}
	var ids []string
	for i := range 4 {
		tok := e.token(fmt.Sprint("payer-", i))
		r := e.reserve(sale, tok, 1, "")
		if r.status != 202 {
			t.Fatalf("reserve: %d %v", r.status, r.body)
		}
		id := r.body["reservation_id"].(string)
		claims[id] = tok
		ids = append(ids, id)
	}
	e.awaitOrders(claims, time.Minute)
	byWebhook, byService, mismatched, late := ids[0], ids[1], ids[2], ids[3]

	// The buyer's own pay is gone.
	if r := e.buyer(byWebhook, claims[byWebhook], "pay"); r.status != 404 {
		t.Fatalf("buyer pay: %d %v, want 404", r.status, r.body)
	}

	// Forged, stale and tampered webhooks are refused and change nothing.
	// It carries a field seckill does not know, as providers' events do:
	// ignored, not refused (a 400 would be retried for days).
	body := strings.Replace(paymentBody("evt_paid", seckill.PaymentSucceeded, byWebhook, 9900, "EUR"), "{", `{"livemode":false,`, 1)
	now := clk.now()
	for name, c := range map[string]struct{ body, sig string }{
		"unsigned":     {body, ""},
		"other secret": {body, webhooksig.Sign([]byte(body), now, []byte("whsec_other_0123456789abcdef0123456789ab"))},
		"stale":        {body, webhooksig.Sign([]byte(body), now.Add(-6*time.Minute), []byte(testWebhookSecret))},
		"tampered":     {strings.Replace(body, "9900", "9901", 1), webhooksig.Sign([]byte(body), now, []byte(testWebhookSecret))},
		"garbage":      {body, "t=abc,v1=zz"},
	} {
		if r := e.webhook(c.body, c.sig); r.status != 401 {
			t.Errorf("%s webhook: %d %v, want 401", name, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/reservations/"+byWebhook, claims[byWebhook], nil); r.body["status"] != "ordered" {
		t.Fatalf("after refused webhooks the order is %v", r.body["status"])
	}
	e.waitMetric("seckill_payment_webhook_refused_total 5")

	// Signed: paid. Two v1 values (a secret being rotated) are fine.
	sig := webhooksig.Sign([]byte(body), clk.now(), []byte("whsec_old_0123456789abcdef0123456789abcd"), []byte(testWebhookSecret))
	r := e.webhook(body, sig)
	if r.status != 200 || r.body["outcome"] != "applied" || r.body["to_status"] != "paid" {
		t.Fatalf("signed webhook: %d %v", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/reservations/"+byWebhook, claims[byWebhook], nil); r.body["status"] != "paid" {
		t.Fatalf("after the webhook the order is %v", r.body["status"])
	}
	// The same delivery again, as a provider retries: 2xx, nothing new.
	if r := e.webhook(body, sig); r.status != 200 || r.body["replayed"] != true {
		t.Fatalf("replayed webhook: %d %v", r.status, r.body)
	}

	// The shop's server, with its service token (the admin token is not
	// it).
	svc := paymentBody("svc_1", seckill.PaymentSucceeded, byService, 9900, "EUR")
	path := "/admin/v1/orders/" + seckill.OrderIDOf(byService) + "/payments"
	if r := e.do("POST", path, e.m.Config.AdminToken, svc); r.status != 401 {
		t.Fatalf("service payment with the admin token: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/admin/v1/orders/"+seckill.OrderIDOf(byWebhook)+"/payments", testServiceToken, svc); r.status != 400 {
		t.Fatalf("service payment for another order's path: %d %v", r.status, r.body)
	}
	for range 2 {
		if r := e.do("POST", path, testServiceToken, svc); r.status != 200 || r.body["to_status"] != "paid" {
			t.Fatalf("service payment: %d %v", r.status, r.body)
		}
	}

	// A wrong amount: 422, an ALERT, and the operator's list shows it.
	bad := paymentBody("evt_short", seckill.PaymentSucceeded, mismatched, 990, "EUR")
	if r := e.webhook(bad, webhooksig.Sign([]byte(bad), clk.now(), []byte(testWebhookSecret))); r.status != 422 || r.body["outcome"] != "mismatch" {
		t.Fatalf("short payment: %d %v", r.status, r.body)
	}
	if !strings.Contains(logs.String(), "ALERT payment needs an operator: mismatch") {
		t.Fatalf("no ALERT for the mismatch in the log:\n%s", logs)
	}

	// The deadline passes. The sweeper cancels the unpaid orders and gives
	// their units back; the paid ones keep theirs.
	clk.advance(16 * time.Minute)
	e.waitRemaining(sale, 10-2)
	for _, id := range []string{byWebhook, byService} {
		if r := e.do("GET", "/api/v1/reservations/"+id, claims[id], nil); r.body["status"] != "paid" {
			t.Fatalf("paid order %s after the deadline: %v", id, r.body["status"])
		}
	}
	// The money for a cancelled order arrives: refund_due, counted,
	// alerted, listed; then its refund.
	paidLate := paymentBody("evt_late", seckill.PaymentSucceeded, late, 9900, "EUR")
	if r := e.webhook(paidLate, webhooksig.Sign([]byte(paidLate), clk.now(), []byte(testWebhookSecret))); r.status != 200 || r.body["outcome"] != "refund_due" {
		t.Fatalf("late payment: %d %v", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/reservations/"+late, claims[late], nil); r.body["status"] != "refund_due" {
		t.Fatalf("late-paid order is %v", r.body["status"])
	}
	if !strings.Contains(logs.String(), "ALERT payment needs an operator: refund_due") {
		t.Fatalf("no ALERT for the refund due in the log:\n%s", logs)
	}
	e.waitMetric(`seckill_payment_events_total{outcome="refund_due",replayed="false",source="webhook"} 1`,
		`seckill_payment_events_total{outcome="applied",replayed="true",source="webhook"} 1`,
		`seckill_payment_events_total{outcome="applied",replayed="true",source="service"} 1`)
	list := e.admin("GET", "/admin/v1/payments", nil)
	got := []string{}
	for _, p := range list.body["payments"].([]any) {
		m := p.(map[string]any)
		got = append(got, m["id"].(string)+":"+m["outcome"].(string))
	}
	if fmt.Sprint(got) != "[evt_late:refund_due evt_short:mismatch]" {
		t.Fatalf("operator's payments list: %v", got)
	}
	refund := paymentBody("re_late", seckill.RefundSucceeded, late, 9900, "EUR")
	if r := e.webhook(refund, webhooksig.Sign([]byte(refund), clk.now(), []byte(testWebhookSecret))); r.status != 200 || r.body["to_status"] != "refunded" {
		t.Fatalf("refund: %d %v", r.status, r.body)
	}
	// The late payment gave nothing back to the sale twice.
	if lvl := e.stock(sale); lvl.Remaining() != 8 {
		t.Fatalf("remaining %d, want 8", lvl.Remaining())
	}
	o, err := e.m.orders.Order(context.Background(), late)
	if err != nil || o.Status != seckill.OrderRefunded {
		t.Fatalf("stored order: %+v, %v", o, err)
	}
}

// TestPaymentSecretsRefused: a short webhook secret or service token, or
// a service token equal to the admin token, stops serve at start.
func TestPaymentSecretsRefused(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"short webhook secret": func(c *Config) { c.PaymentWebhookSecret = strings.Repeat("x", 31) },
		"short service token":  func(c *Config) { c.ServiceToken = strings.Repeat("x", 31) },
		"service is admin":     func(c *Config) { c.ServiceToken, c.AdminToken = testServiceToken, testServiceToken },
		"buyer pay maybe":      func(c *Config) { c.BuyerPay = "maybe" },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := c.parse(); err == nil {
			t.Errorf("%s: parse accepted it", name)
		}
	}
	c := DefaultConfig()
	c.PaymentWebhookSecret, c.ServiceToken = strings.Repeat("x", 32), strings.Repeat("y", 32)
	if _, err := c.parse(); err != nil {
		t.Errorf("32-byte secrets: %v", err)
	}
	// serve has no --buyer-pay (demo has).
	fs := flagSet("serve", io.Discard)
	cfg := DefaultConfig()
	if err := cfg.register(fs); err != nil {
		t.Fatal(err)
	}
	if fs.Lookup("buyer-pay") != nil {
		t.Error("serve has a --buyer-pay flag")
	}
}
