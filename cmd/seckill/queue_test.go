package main

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// createQueue creates a queue sale through the admin API, admitting rate a
// second from start, ending an hour after it.
func (e *engine) createQueue(stock, rate int64, start time.Time) string {
	e.t.Helper()
	id := servicetest.UniqueName("q")
	if r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": id, "name": "Console", "price_cents": 49900, "stock": stock, "per_user_limit": 1,
		"start_at": start.Format(time.RFC3339Nano), "end_at": start.Add(time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "queue", "admit_per_second": rate},
	}); r.status != http.StatusCreated {
		e.t.Fatalf("create queue sale: %d %v", r.status, r.body)
	}
	return id
}

// TestQueueEndToEnd: on the embedded engine, buyers who join a queue
// sale's waiting room before the start get distinct places, one each (a
// second join keeps it), at most --queue-per-ip from one address; nobody
// claims without a ticket; at the start places are admitted at
// admit_per_second, an admitted buyer gets a ticket bound to them and the
// sale, and claims with it; once the stock is gone everyone still waiting
// is told sold_out.
func TestQueueEndToEnd(t *testing.T) {
	const buyers, stock = 6, 3
	e := startEngine(t, func(c *Config) { c.QueuePerIP = buyers })
	now := time.Now()
	start := now.Add(2 * time.Second)
	sale := servicetest.UniqueName("q")
	if r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": sale, "name": "Console", "price_cents": 49900, "stock": stock, "per_user_limit": 1,
		"start_at": start.Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "queue", "admit_per_second": 1},
	}); r.status != http.StatusCreated {
		t.Fatalf("create queue sale: %d %v", r.status, r.body)
	}
	later := servicetest.UniqueName("q")
	if r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": later, "name": "Console", "price_cents": 49900, "stock": stock, "per_user_limit": 1,
		"start_at": now.Add(time.Hour).Format(time.RFC3339Nano), "end_at": now.Add(2 * time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "queue", "admit_per_second": 1},
	}); r.status != http.StatusCreated {
		t.Fatalf("create later sale: %d %v", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/sales/"+later+"/queue", e.token("early"), nil); r.code() != seckill.ENOTSTARTED {
		t.Fatalf("join an hour early = %d %v; want not_started (opens 15 min before)", r.status, r.body)
	}

	user := func(i int) string { return fmt.Sprintf("buyer-%d", i) }
	for i := range buyers {
		r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token(user(i)), nil)
		if r.status != http.StatusOK || r.body["admitted"] != false {
			t.Fatalf("join %d: %d %v", i, r.status, r.body)
		}
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token("one-too-many"), nil); r.code() != seckill.ERATELIMITED {
		t.Fatalf("join over --queue-per-ip = %d %v; want rate_limited", r.status, r.body)
	}
	position := func(i int) (int, map[string]any) {
		r := e.do("GET", "/api/v1/sales/"+sale+"/queue/mine", e.token(user(i)), nil)
		if r.status != http.StatusOK {
			t.Fatalf("queue/mine of %d: %d %v", i, r.status, r.body)
		}
		return int(r.body["position"].(float64)), r.body
	}
	var places []int
	byPlace := map[int]int{}
	for i := range buyers {
		p, _ := position(i)
		places = append(places, p)
		byPlace[p] = i
	}
	slices.Sort(places)
	if !slices.Equal(places, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("places %v; want 1 to 6, one each", places)
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token(user(byPlace[4])), nil); r.body["position"] != float64(4) {
		t.Fatalf("a second join moved the buyer: %v", r.body)
	}

	length, admitted := `seckill_queue_length{sale="`+sale+`"}`, `seckill_queue_admitted_total{sale="`+sale+`"}`
	if l, a := e.metric(length), e.metric(admitted); l != buyers || a != 0 {
		t.Errorf("before the start: queue length %v, admitted %v; want %d, 0", l, a, buyers)
	}
	refused := func(reason string) float64 {
		return e.metric(`seckill_queue_tickets_refused_total{reason="` + reason + `"}`)
	}
	waitFor(t, 10*time.Second, "the start", func() bool { return time.Now().After(start) })
	if r := e.reserve(sale, e.token(user(byPlace[1])), 1, ""); r.code() != seckill.EADMISSION {
		t.Fatalf("claim without a ticket = %d %v; want admission_required", r.status, r.body)
	}
	if got := refused("missing"); got != 1 {
		t.Errorf("tickets refused for missing = %v, want 1", got)
	}
	_, first := position(byPlace[1])
	ticket, _ := first["ticket"].(string)
	if first["admitted"] != true || ticket == "" {
		t.Fatalf("place 1 at the start: %v; want admitted with a ticket", first)
	}
	if _, sixth := position(byPlace[6]); sixth["admitted"] != false || sixth["ticket"] != nil || sixth["ahead"] == float64(0) {
		t.Fatalf("place 6 at the start: %v; want waiting", sixth)
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token(user(byPlace[2])), map[string]any{"qty": 1}, "Admission-Ticket", ticket); r.code() != seckill.EADMISSION {
		t.Fatalf("another buyer's ticket = %d %v; want refused", r.status, r.body)
	}
	if got := refused("wrong_buyer"); got != 1 {
		t.Errorf("tickets refused for wrong_buyer = %v, want 1", got)
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token(user(byPlace[1])), map[string]any{"qty": 1}, "Admission-Ticket", ticket+"0"); r.code() != seckill.EADMISSION {
		t.Fatalf("a tampered ticket = %d %v; want refused", r.status, r.body)
	}
	if got := refused("bad_signature"); got != 1 {
		t.Errorf("tickets refused for bad_signature = %v, want 1", got)
	}
	claim := func(place int) reply {
		_, st := position(byPlace[place])
		tk, _ := st["ticket"].(string)
		return e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token(user(byPlace[place])), map[string]any{"qty": 1}, "Admission-Ticket", tk)
	}
	for place := 1; place <= stock; place++ {
		waitFor(t, 10*time.Second, fmt.Sprintf("place %d admitted", place), func() bool {
			_, st := position(byPlace[place])
			return st["admitted"] == true
		})
		if r := claim(place); r.status != http.StatusAccepted {
			t.Fatalf("place %d claims with its ticket: %d %v", place, r.status, r.body)
		}
	}
	for place := stock + 1; place <= buyers; place++ {
		if _, st := position(byPlace[place]); st["sold_out"] != true || st["ticket"] != nil {
			t.Fatalf("place %d after the sell-out: %v; want sold_out", place, st)
		}
	}
	if a := e.metric(admitted); a < stock || a > buyers {
		t.Errorf("admitted after %d claims: %v; want between %d and %d", stock, a, stock, buyers)
	}
}

// TestAdaptiveQueueSpeedsUpWhileClaimsAreFast: a queue sale created with
// "adaptive" starts at its admit_per_second (1) and, as its admitted buyers
// claim quickly, admits faster (its rate, in /metrics, rises within its
// bounds) until the stock is gone; its pace is kept in Redis.
func TestAdaptiveQueueSpeedsUpWhileClaimsAreFast(t *testing.T) {
	const buyers, stock = 12, 8
	e := startEngine(t, func(c *Config) { c.QueueAdaptInterval, c.QueuePerIP = 50*time.Millisecond, 0 })
	now := time.Now()
	sale := servicetest.UniqueName("qa")
	if r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": sale, "name": "Console", "price_cents": 49900, "stock": stock, "per_user_limit": 1,
		"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "queue", "admit_per_second": 1,
			"adaptive": map[string]any{"max_per_second": 40, "target_latency_ms": 60000}},
	}); r.status != http.StatusCreated {
		t.Fatalf("create adaptive queue sale: %d %v", r.status, r.body)
	}
	if r := e.admin("GET", "/admin/v1/sales/"+sale, nil); r.status != http.StatusOK {
		t.Fatalf("admin sale: %d %v", r.status, r.body)
	} else if a, _ := r.body["admission"].(map[string]any); a["adaptive"] == nil {
		t.Fatalf("the sale does not show its adaptive admission: %v", r.body["admission"])
	}
	user := func(i int) string { return fmt.Sprintf("abuyer-%d", i) }
	for i := range buyers {
		if r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token(user(i)), nil); r.status != http.StatusOK {
			t.Fatalf("join %d: %d %v", i, r.status, r.body)
		}
	}
	rate := `seckill_queue_admit_rate{sale="` + sale + `"}`
	if got := e.metric(rate); got != 1 {
		t.Errorf("admission rate before any claim = %v, want 1 (admit_per_second)", got)
	}
	// Arrival order after the start: buyer i holds place i+1.
	for i := range stock {
		var ticket string
		waitFor(t, 60*time.Second, fmt.Sprintf("buyer %d admitted", i), func() bool {
			r := e.do("GET", "/api/v1/sales/"+sale+"/queue/mine", e.token(user(i)), nil)
			ticket, _ = r.body["ticket"].(string)
			return ticket != ""
		})
		if r := e.do("POST", "/api/v1/sales/"+sale+"/reservations", e.token(user(i)), map[string]any{"qty": 1}, "Admission-Ticket", ticket); r.status != http.StatusAccepted {
			t.Fatalf("buyer %d claims: %d %v", i, r.status, r.body)
		}
	}
	if got := e.metric(rate); got <= 1 || got > 40 {
		t.Errorf("admission rate after %d fast claims = %v; want above 1, at most 40", stock, got)
	}
	if p, err := e.m.stock.Queue().Pace(t.Context(), &seckill.Sale{ID: sale, StartAt: now.Add(-time.Second), Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1}}); err != nil || p.At.IsZero() || p.Rate <= 1 {
		t.Errorf("pace in Redis = %+v, %v; want moved on at a rate above 1", p, err)
	}
}
