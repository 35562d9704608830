package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestShopDocPayment runs docs/shop.md's payment example as written: its
// exports (secrets from its openssl lines) configure the engine; its
// lines after `seckill serve` run in bash against the engine with a real
// reservation: the hand-signed webhook pays the order, and the shop
// server's call of the same event answers the stored record, replayed.
func TestShopDocPayment(t *testing.T) {
	block := shopDocBlock(t, "## Payment")
	for _, tool := range []string{"bash", "openssl", "curl", "sed", "date"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: cannot run docs/shop.md's example", tool)
		}
	}
	exports, rest, ok := strings.Cut(block, "seckill serve\n")
	if !ok {
		t.Fatalf("docs/shop.md's payment example has no `seckill serve` line:\n%s", block)
	}
	out, err := exec.Command("bash", "-c", exports+"\necho \"$SECKILL_PAYMENT_WEBHOOK_SECRET\"; echo \"$SECKILL_SERVICE_TOKEN\"; echo \"$SECKILL_PAYMENT_URL_TEMPLATE\"").Output()
	if err != nil {
		t.Fatalf("docs/shop.md's exports: %v", err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(vals) != 3 {
		t.Fatalf("docs/shop.md's exports give %q", vals)
	}
	e := startEngine(t, func(c *Config) {
		c.PaymentWebhookSecret, c.ServiceToken, c.PaymentURLTemplate = vals[0], vals[1], vals[2]
	})
	sale := e.liveSale(3, 1)
	tok := e.token("readme-buyer")
	r := e.reserve(sale, tok, 1, "")
	if r.status != 202 {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	id := r.body["reservation_id"].(string)
	e.awaitOrders(map[string]string{id: tok}, time.Minute)
	if v := e.do("GET", "/api/v1/reservations/"+id, tok, nil); v.body["pay_url"] != "https://shop.example/pay?reservation="+id {
		t.Fatalf("the order's pay_url: %v", v.body)
	}

	// The exports make new secrets on each run: the script takes the
	// engine's (read above) from the environment instead, and runs the
	// rest as written, against the engine's address.
	script := strings.NewReplacer(
		"export SECKILL_PAYMENT_WEBHOOK_SECRET=", ": ",
		"export SECKILL_SERVICE_TOKEN=", ": ",
		"http://127.0.0.1:8080", e.base,
	).Replace(exports + rest)
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Env = append(os.Environ(), "RESERVATION_ID="+id,
		"SECKILL_PAYMENT_WEBHOOK_SECRET="+vals[0], "SECKILL_SERVICE_TOKEN="+vals[1])
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/shop.md's example: %v\n%s", err, raw)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	var answers []map[string]any
	for dec.More() {
		var a map[string]any
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("the example printed %q: %v", raw, err)
		}
		answers = append(answers, a)
	}
	if len(answers) != 2 || answers[0]["outcome"] != "applied" || answers[0]["to_status"] != "paid" ||
		answers[1]["replayed"] != true || answers[1]["id"] != "evt_1" {
		t.Fatalf("the example's answers: %v", answers)
	}
	o, err := e.m.orders.Order(context.Background(), id)
	if err != nil || o.Status != seckill.OrderPaid {
		t.Fatalf("the order after docs/shop.md's example: %+v, %v", o, err)
	}
}
