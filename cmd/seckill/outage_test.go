package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// The outage tests take one backend away from a running engine and call
// every route of the API and the pages once while it is gone. Each answer
// must come within the promise (about 3 s; the tests run with a 1 s
// budget) and be a success or 503 unavailable with Retry-After in the
// JSON error shape (the buyer page: its busy page with Retry-After). The
// routes that can be served without the missing backend must succeed. At
// the end every claim acknowledged during the test must have become an
// order, and the sale must reconcile.

const (
	outageBudget = time.Second
	// answerWithin is the promise: every request answered within about
	// 3 s whatever is down.
	answerWithin = 3 * time.Second
)

// outageConfig gives the engine the budget under test and quick loops.
func outageConfig(base func(*Config)) func(*Config) {
	return func(c *Config) {
		base(c)
		c.RequestBudget = outageBudget
		c.RouteBudgets = ""
		c.DemoLogin = "on"
		c.ServiceToken = testServiceToken
		c.RestoreRetryInterval = 200 * time.Millisecond
		c.PreheatInterval = 200 * time.Millisecond
	}
}

// fixtures are what the routes are called with: a live sale and orders of
// one buyer in each state the routes act on.
type fixtures struct {
	sale, buyer                      string
	poll, pay, cancel, restore, none string // reservation ids
	claims                           map[string]string
}

// prepare makes a live sale and four claims that have become orders, and
// reads the sale once, so the public view has a last good copy.
func (e *engine) prepare() *fixtures {
	e.t.Helper()
	f := &fixtures{sale: e.liveSale(100, 10), buyer: e.token("outage-buyer"), claims: map[string]string{}}
	ids := make([]string, 4)
	for i := range ids {
		r := e.reserve(f.sale, f.buyer, 1, "")
		if r.status != http.StatusAccepted {
			e.t.Fatalf("claim %d: %d %v", i, r.status, r.body)
		}
		ids[i], _ = r.body["reservation_id"].(string)
		f.claims[ids[i]] = f.buyer
	}
	e.awaitOrders(f.claims, 60*time.Second)
	f.poll, f.pay, f.cancel, f.restore = ids[0], ids[1], ids[2], ids[3]
	f.none = seckill.NewReservationID(f.sale, time.Now())
	if r := e.do("GET", "/api/v1/sales/"+f.sale, "", nil); r.status != http.StatusOK {
		e.t.Fatalf("public sale before the outage: %d %v", r.status, r.body)
	}
	return f
}

// route is one call of everyRoute. need lists the outages ("redis",
// "database", "broker") during which it must succeed; during the others a
// 503 is allowed too.
type route struct {
	name, method, path string
	auth               string
	body               string
	ok                 []int // the success statuses
	need               []string
	page               bool // HTML answers (the buyer page)
	stream             bool // an event stream: the headers are the answer
}

func (e *engine) routes(f *fixtures, ticket string, n int) []route {
	adm, buyer := e.m.Config.AdminToken, f.buyer
	newSale := fmt.Sprintf(`{"id":"%s-%d","name":"Tea","price_cents":100,"stock":5,"per_user_limit":1,"start_at":%q,"end_at":%q}`,
		f.sale, n, time.Now().Add(time.Hour).Format(time.RFC3339), time.Now().Add(2*time.Hour).Format(time.RFC3339))
	all := []string{"redis", "database", "broker"}
	return []route{
		{name: "liveness", method: "GET", path: "/healthz", ok: []int{200}, need: all},
		{name: "readiness", method: "GET", path: "/readyz", ok: []int{200}},
		{name: "metrics", method: "GET", path: "/metrics", ok: []int{200}, need: all},
		{name: "public sale", method: "GET", path: "/api/v1/sales/" + f.sale, ok: []int{200}, need: all},
		{name: "reserve", method: "POST", path: "/api/v1/sales/" + f.sale + "/reservations", auth: buyer, body: `{"qty":1}`,
			ok: []int{202}, need: []string{"database", "broker"}},
		{name: "poll (ordered)", method: "GET", path: "/api/v1/reservations/" + f.poll, auth: buyer, ok: []int{200}, need: []string{"redis", "broker"}},
		{name: "poll (unknown)", method: "GET", path: "/api/v1/reservations/" + f.none, auth: buyer, ok: []int{404}, need: []string{"broker"}},
		{name: "service payment", method: "POST", path: "/admin/v1/orders/" + seckill.OrderIDOf(f.pay) + "/payments", auth: testServiceToken,
			body: `{"id":"evt-outage-` + f.pay + `","type":"payment.succeeded","reservation_id":"` + f.pay + `","amount_cents":9900,"currency":"EUR"}`,
			ok:   []int{200}, need: []string{"redis", "broker"}},
		{name: "cancel", method: "POST", path: "/api/v1/reservations/" + f.cancel + "/cancel", auth: buyer, ok: []int{200}, need: []string{"redis", "broker"}},
		{name: "admin restore", method: "POST", path: "/admin/v1/restores", auth: adm,
			body: `{"reservation_id":"` + f.restore + `","reason":"outage test"}`, ok: []int{200}, need: []string{"redis", "broker"}},
		{name: "admin restores", method: "GET", path: "/admin/v1/restores", auth: adm, ok: []int{200}, need: []string{"redis", "broker"}},
		{name: "admin failed orders", method: "GET", path: "/admin/v1/failed-orders", auth: adm, ok: []int{200}, need: []string{"redis", "broker"}},
		{name: "admin reconciliation", method: "GET", path: "/admin/v1/sales/" + f.sale + "/reconciliation", auth: adm, ok: []int{200}, need: []string{"broker"}},
		{name: "admin create sale", method: "POST", path: "/admin/v1/sales", auth: adm, body: newSale, ok: []int{201}, need: []string{"redis", "broker"}},
		{name: "admin sale", method: "GET", path: "/admin/v1/sales/" + f.sale, auth: adm, ok: []int{200}, need: []string{"redis", "broker"}},
		{name: "admin preheat", method: "POST", path: "/admin/v1/sales/" + f.sale + "/preheat", auth: adm, ok: []int{200}, need: []string{"broker"}},
		{name: "admin profiler", method: "GET", path: "/admin/debug/pprof/goroutine?debug=1", auth: adm, ok: []int{200}, need: all, page: true},
		{name: "buyer page", method: "GET", path: "/sales/" + f.sale, ok: []int{200}, need: []string{"redis", "broker"}, page: true},
		{name: "landing page", method: "GET", path: "/", ok: []int{200}, need: all, page: true},
		{name: "control room", method: "GET", path: "/admin", ok: []int{200}, need: all, page: true},
		{name: "asset", method: "GET", path: "/static/buyer.js", ok: []int{200}, need: all, page: true},
		{name: "server clock", method: "GET", path: "/api/v1/time", ok: []int{200}, need: all},
		{name: "demo login", method: "POST", path: "/demo/v1/login", body: `{"name":"walk-in"}`, ok: []int{200}, need: all},
		{name: "live-feed ticket", method: "POST", path: "/admin/v1/sse-ticket", auth: adm, body: `{"sale_id":"` + f.sale + `"}`, ok: []int{200}, need: all},
		{name: "live feed", method: "GET", path: "/admin/v1/sales/" + f.sale + "/events?ticket=" + url.QueryEscape(ticket), ok: []int{200}, need: []string{"redis", "broker"}, stream: true},
		{name: "no such route", method: "GET", path: "/api/v1/nothing", ok: []int{404}, need: all},
	}
}

// routeAnswer is what one route answered, and how fast.
type routeAnswer struct {
	route  route
	status int
	code   string
	took   time.Duration
}

// call sends one route's request and checks its answer against the
// promise. It never waits longer than 10 s, so a hang fails the test
// instead of stalling it.
func (e *engine) call(outage string, rt route) routeAnswer {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if rt.body != "" {
		body = strings.NewReader(rt.body)
	}
	req, err := http.NewRequestWithContext(ctx, rt.method, e.base+rt.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if rt.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if rt.auth != "" {
		req.Header.Set("Authorization", "Bearer "+rt.auth)
	}
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s, %s: no answer after %s: %v", outage, rt.name, time.Since(start), err)
		return routeAnswer{route: rt, took: time.Since(start)}
	}
	var raw []byte
	if rt.stream {
		// The first event is enough: the feed answers while it streams.
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		raw = []byte(line)
	} else {
		raw, _ = io.ReadAll(resp.Body)
	}
	took := time.Since(start)
	resp.Body.Close()
	a := routeAnswer{route: rt, status: resp.StatusCode, took: took}
	var shape struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(raw, &shape)
		a.code = shape.Error.Code
	}
	servicetest.WantWithin(e.t, fmt.Sprintf("%s, %s: answered", outage, rt.name), took, answerWithin)
	needed := false
	for _, n := range rt.need {
		needed = needed || n == outage
	}
	switch {
	case contains(rt.ok, resp.StatusCode):
	case resp.StatusCode == http.StatusServiceUnavailable && !needed:
		if resp.Header.Get("Retry-After") == "" {
			e.t.Errorf("%s, %s: 503 without Retry-After", outage, rt.name)
		}
		if rt.page {
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				e.t.Errorf("%s, %s: 503 page as %q", outage, rt.name, resp.Header.Get("Content-Type"))
			}
		} else if shape.Error.Code != seckill.EUNAVAILABLE || shape.Error.Message == "" {
			e.t.Errorf("%s, %s: 503 body %q; want the JSON error shape with code %q", outage, rt.name, raw, seckill.EUNAVAILABLE)
		}
	default:
		e.t.Errorf("%s, %s: %d %s; want %v%s", outage, rt.name, resp.StatusCode, raw, rt.ok,
			map[bool]string{true: "", false: " or 503 unavailable"}[needed])
	}
	return a
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// callEveryRoute calls every route once, in order, and logs the table of
// answers for the report.
func (e *engine) callEveryRoute(outage string, f *fixtures, n int) []routeAnswer {
	e.t.Helper()
	tr := e.admin("POST", "/admin/v1/sse-ticket", map[string]any{"sale_id": f.sale})
	ticket, _ := tr.body["ticket"].(string)
	var out []routeAnswer
	var table strings.Builder
	fmt.Fprintf(&table, "outage: %s (budget %s)\n| route | answer | time |\n|---|---|---|\n", outage, outageBudget)
	for _, rt := range e.routes(f, ticket, n) {
		a := e.call(outage, rt)
		out = append(out, a)
		ans := fmt.Sprint(a.status)
		if a.code != "" {
			ans += " " + a.code
		}
		fmt.Fprintf(&table, "| %s `%s %s` | %s | %s |\n", rt.name, rt.method, shortPath(rt.path), ans, a.took.Round(time.Millisecond))
	}
	e.t.Log("\n" + table.String())
	return out
}

func shortPath(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	return p
}

// settleSale waits until every claim of the sale has reached the database (an
// order or a failed order) and the sale reconciles: nothing acknowledged
// during the outage was lost, nothing oversold.
func (e *engine) settleSale(f *fixtures) {
	e.t.Helper()
	var (
		last               reply
		claimed, persisted float64
	)
	// Settled is every claim an order or a failed order, not just an
	// empty outbox: the last claims may still be in the broker, on their
	// way to the writer, for a moment after the outbox drained.
	ok := servicetest.Eventually(60*time.Second, func() bool {
		last = e.admin("GET", "/admin/v1/sales/"+f.sale+"/reconciliation", nil)
		claimed = num(last.body, "redis", "active", "count") + num(last.body, "redis", "restored", "count")
		persisted = num(last.body, "orders", "ordered", "count") + num(last.body, "orders", "paid", "count") +
			num(last.body, "orders", "cancelled", "count") + num(last.body, "failed_orders", "count")
		return last.status == http.StatusOK && last.body["balanced"] == true &&
			num(last.body, "in_flight", "count") == 0 && num(last.body, "in_flight", "outbox_len") == 0 && claimed == persisted
	})
	switch {
	case !ok && last.status == http.StatusOK && claimed != persisted:
		e.t.Fatalf("%v claims in Redis, %v orders and failed orders in the database: %v", claimed, persisted, last.body)
	case !ok:
		e.t.Fatalf("the sale did not settle and reconcile after the outage: %d %v", last.status, last.body)
	}
	if o := num(last.body, "oversold"); o != 0 {
		e.t.Fatalf("oversold by %v", o)
	}
	e.t.Logf("settled: %v claims, all orders or failed orders; oversold 0", claimed)
}

// metricValue reads one sample of /metrics; 0 when absent.
func metricValue(t *testing.T, e *engine, series string) float64 {
	t.Helper()
	resp, err := e.client.Get(e.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func TestRedisOutage(t *testing.T) {
	// Synced on every write: it comes back with its data, as an operator's
	// Redis does after a restart.
	srv := redistest.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	e := startEngine(t, outageConfig(func(c *Config) { c.RedisURL = srv.URL() }))
	f := e.prepare()

	srv.Stop()
	answers := e.callEveryRoute("redis", f, 1)
	for _, a := range answers {
		if a.route.name == "public sale" {
			r := e.do("GET", a.route.path, "", nil)
			if r.body["stale"] != true || r.body["age_ms"] == nil {
				t.Errorf("public sale with Redis down: %v; want the last good copy, stale with its age", r.body)
			}
		}
	}
	// A burst of buyers while Redis is down: the breaker answers most of
	// them without sending them to Redis.
	for i := range 50 {
		r := e.reserve(f.sale, e.token(fmt.Sprint("burst-", i)), 1, "")
		if r.status != http.StatusServiceUnavailable || r.code() != seckill.EUNAVAILABLE {
			t.Fatalf("reserve with Redis down: %d %v", r.status, r.body)
		}
	}
	e.waitMetric(`seckill_breaker_state{backend="redis"} 1`)
	if n := metricValue(t, e, `seckill_breaker_rejected_total{backend="redis"}`); n < 40 {
		t.Errorf("the Redis breaker refused %v of the 50 calls of a burst; want most", n)
	}

	// Redis answers again: reservations resume within 2 s.
	srv.Restart(t)
	back := time.Now()
	var resumed time.Duration
	for i := 0; ; i++ {
		r := e.reserve(f.sale, e.token(fmt.Sprint("back-", i)), 1, "")
		if r.status == http.StatusAccepted {
			resumed = time.Since(back)
			f.claims[r.body["reservation_id"].(string)] = e.token(fmt.Sprint("back-", i))
			break
		}
		if time.Since(back) > 10*time.Second {
			t.Fatalf("reservations did not resume within 10 s of Redis answering: %d %v", r.status, r.body)
		}
	}
	t.Logf("reservations resumed %s after Redis answered again", resumed.Round(time.Millisecond))
	// The promise (2 s), plus a second for a loaded machine.
	servicetest.WantWithin(t, "reservations resumed after Redis answered", resumed, 2*time.Second+time.Second)
	e.waitMetric(`seckill_breaker_state{backend="redis"} 0`)
	if n := metricValue(t, e, `seckill_http_degraded_total{reason="stale",route="GET /api/v1/sales/{id}"}`); n < 1 {
		t.Errorf("stale answers not counted: %v", n)
	}
	e.settleSale(f)
}

// TestDatabaseOutage cuts, then blackholes, the network to PostgreSQL
// (the project's TCP proxy) under a running engine on the shared Redis.
func TestDatabaseOutage(t *testing.T) {
	proxy, viaProxy := servicetest.ProxyURL(t, sqltest.Postgres(t))
	redisURL, prefix := servicetest.Redis.URL(t), servicetest.UniqueName("sk")
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	e := startEngine(t, outageConfig(func(c *Config) {
		c.RedisURL, c.RedisKeyPrefix, c.DatabaseURL = redisURL, prefix, viaProxy
	}))
	f := e.prepare()
	for i, outage := range []struct {
		name  string
		start func()
	}{
		{"database cut", proxy.Cut},
		{"database blackholed", proxy.Blackhole},
	} {
		outage.start()
		e.callEveryRoute("database", f, i+1)
		proxy.Restore()
		servicetest.WaitFor(t, 30*time.Second, "readiness after the database is back", func() bool {
			return e.do("GET", "/readyz", "", nil).status == http.StatusOK
		})
		t.Logf("(the table above: %s)", outage.name)
	}
	e.settleSale(f)
}

// TestBrokerOutage cuts the network to RabbitMQ. Nothing a buyer does
// needs the broker: claims wait in the outbox, so every route but the
// readiness check must succeed.
func TestBrokerOutage(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	proxy, viaProxy := servicetest.ProxyURL(t, amqpURL)
	redisURL, prefix := servicetest.Redis.URL(t), servicetest.UniqueName("sk")
	queue := servicetest.UniqueName("outage_q")
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix); deleteQueue(t, amqpURL, queue) })
	e := startEngine(t, outageConfig(func(c *Config) {
		c.RedisURL, c.RedisKeyPrefix, c.BrokerURL, c.BrokerQueue = redisURL, prefix, viaProxy, queue
	}))
	f := e.prepare()
	proxy.Cut()
	answers := e.callEveryRoute("broker", f, 1)
	for _, a := range answers {
		if a.route.name == "readiness" && a.status != http.StatusServiceUnavailable {
			t.Errorf("readiness with the broker down: %d; want 503, so the node is drained", a.status)
		}
	}
	proxy.Restore()
	e.settleSale(f)
}
