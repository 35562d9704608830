package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
	"github.com/seckill-dev/seckill/internal/webhook"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

// shopSecret signs the test shop's order events.
const shopSecret = "test-order-webhook-secret-0123456789"

// shop is a test receiver of order events, as a shop would run one: it
// verifies each signature and tallies what it accepted (answered 2xx).
type shop struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	srv      *http.Server
	accepted map[string]int      // event id -> 2xx answers
	types    map[string]string   // event id -> type
	firsts   map[string][]string // order id -> types in order of first acceptance
	inFlight map[string]bool
	// concurrent counts deliveries of an event that arrived while another
	// delivery of it was in flight; outOfOrder events accepted before
	// their order's order.created; badSig deliveries whose signature did
	// not verify.
	concurrent, outOfOrder, badSig int
	requests                       int
	// answer, when set, picks the status of the n-th request (1, 2, …);
	// 0 means 200 after the tally.
	answer func(n int) int
}

// newShop is a shop that counts the events it is given (consumed), as a
// broker's consumer does.
func newShop(t *testing.T) *shop {
	return &shop{t: t, accepted: map[string]int{}, types: map[string]string{}, firsts: map[string][]string{}, inFlight: map[string]bool{}}
}

// consumed counts an event a broker gave the shop (body: its JSON), and
// returns its id and type.
func (s *shop) consumed(body []byte) (id, typ string) {
	id, typ, orderID := eventOf(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.accept(id, typ, orderID)
	return id, typ
}

// eventOf reads an event's id, type and order id from its JSON.
func eventOf(body []byte) (id, typ, orderID string) {
	var raw map[string]any
	_ = json.Unmarshal(body, &raw)
	id, _ = raw["id"].(string)
	typ, _ = raw["type"].(string)
	orderID, _ = raw["order_id"].(string)
	return id, typ, orderID
}

// accept counts an event the shop took; a first acceptance of a later
// event before its order's order.created is out of order. s.mu is held.
func (s *shop) accept(id, typ, orderID string) {
	if s.accepted[id] == 0 {
		s.types[id] = typ
		if typ != string(seckill.EventOrderCreated) && typ != string(seckill.EventOrderFailed) &&
			!containsType(s.firsts[orderID], string(seckill.EventOrderCreated)) {
			s.outOfOrder++
		}
		s.firsts[orderID] = append(s.firsts[orderID], typ)
	}
	s.accepted[id]++
}

// startShop listens on a free port of its own.
func startShop(t *testing.T) *shop {
	s := newShop(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.down)
	return s
}

func (s *shop) url() string { return "http://" + s.addr + "/seckill/events" }

func (s *shop) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 5 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// down closes the shop: connections are refused until up.
func (s *shop) down() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up listens again on the same address.
func (s *shop) up() {
	var (
		ln  net.Listener
		err error
	)
	for range 100 {
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the port is released by the kernel
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.serve(ln)
}

func (s *shop) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var e struct{ ID, Type, OrderID string }
	e.ID, e.Type, e.OrderID = eventOf(body)

	s.mu.Lock()
	s.requests++
	n := s.requests
	if webhooksig.Verify(r.Header.Get(webhooksig.Header), body, time.Now(), webhooksig.DefaultTolerance, []byte(shopSecret)) != nil {
		s.badSig++
		s.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if s.inFlight[e.ID] {
		s.concurrent++
	}
	s.inFlight[e.ID] = true
	answer := s.answer
	s.mu.Unlock()

	status := http.StatusOK
	if answer != nil {
		if a := answer(n); a != 0 {
			status = a
		}
	}
	time.Sleep(2 * time.Millisecond) // widens the window in which a second deliverer would overlap

	s.mu.Lock()
	delete(s.inFlight, e.ID)
	if webhook.DeliveredStatus(status) {
		s.accept(e.ID, e.Type, e.OrderID)
	}
	s.mu.Unlock()
	w.WriteHeader(status)
}

func containsType(types []string, typ string) bool {
	for _, t := range types {
		if t == typ {
			return true
		}
	}
	return false
}

// figures are the numbers the issue asks of each fault.
type figures struct {
	Orders, Failed, Expected, Delivered, Duplicates, Missing, OutOfOrder, Concurrent, BadSignatures, Requests int
}

// expectedEvents are the events a sale's ledger calls for: order.created
// for every order, order.cancelled or order.paid for those that moved
// on, order.failed for every failed order.
func expectedEvents(l *seckill.SaleLedger) map[string]string {
	want := map[string]string{}
	for _, o := range l.Orders {
		want[seckill.OrderEventID(seckill.EventOrderCreated, o.ReservationID)] = string(seckill.EventOrderCreated)
		switch o.Status {
		case seckill.OrderCancelled:
			want[seckill.OrderEventID(seckill.EventOrderCancelled, o.ReservationID)] = string(seckill.EventOrderCancelled)
		case seckill.OrderPaid:
			want[seckill.OrderEventID(seckill.EventOrderPaid, o.ReservationID)] = string(seckill.EventOrderPaid)
		}
	}
	for _, f := range l.Failed {
		want[seckill.OrderEventID(seckill.EventOrderFailed, f.ReservationID)] = string(seckill.EventOrderFailed)
	}
	return want
}

// tally compares what the shop accepted with what the ledger calls for.
func (s *shop) tally(l *seckill.SaleLedger) figures {
	want := expectedEvents(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	f := figures{Orders: len(l.Orders), Failed: len(l.Failed), Expected: len(want), OutOfOrder: s.outOfOrder,
		Concurrent: s.concurrent, BadSignatures: s.badSig, Requests: s.requests}
	for id := range want {
		if n := s.accepted[id]; n == 0 {
			f.Missing++
		} else {
			f.Delivered++
			f.Duplicates += n - 1
		}
	}
	return f
}

// awaitAllDelivered waits until the ledger is settled (every claim has an
// order or a failed order) and the shop has every event it calls for,
// and returns the figures.
func (s *shop) awaitAllDelivered(ledger func() (*seckill.SaleLedger, error), claims int, within time.Duration) figures {
	s.t.Helper()
	deadline := time.Now().Add(within)
	var (
		f   figures
		err error
		l   *seckill.SaleLedger
	)
	for time.Now().Before(deadline) {
		if l, err = ledger(); err == nil && len(l.Orders)+len(l.Failed) >= claims {
			if f = s.tally(l); f.Missing == 0 {
				return f
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l != nil {
		f = s.tally(l)
	}
	s.t.Errorf("after %s: %d claims, ledger %v (err %v), figures %+v", within, claims, l != nil, err, f)
	return f
}

// check logs the figures and fails on what must never happen.
func (f figures) check(t *testing.T, name string) {
	t.Helper()
	t.Logf("%s: orders %d (+%d failed), events expected %d, delivered %d, duplicates %d, missing %d, out of order %d, concurrent deliveries %d, bad signatures %d, requests %d",
		name, f.Orders, f.Failed, f.Expected, f.Delivered, f.Duplicates, f.Missing, f.OutOfOrder, f.Concurrent, f.BadSignatures, f.Requests)
	if f.Missing != 0 || f.OutOfOrder != 0 || f.Concurrent != 0 || f.BadSignatures != 0 {
		t.Errorf("%s: missing %d, out of order %d, concurrent %d, bad signatures %d; want 0 each", name, f.Missing, f.OutOfOrder, f.Concurrent, f.BadSignatures)
	}
	if f.Orders == 0 || f.Delivered < f.Orders {
		t.Errorf("%s: %d orders, %d events delivered: the rush made nothing to deliver", name, f.Orders, f.Delivered)
	}
}

// eventsBackends are the databases the delivery tests run on, each with
// the shared Redis under a prefix of the test's own.
func eventsBackends() []struct {
	name string
	url  func(testing.TB) string
} {
	return []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", sqltest.SQLite}, {"mysql", sqltest.MySQL}, {"postgres", sqltest.Postgres}}
}

// withShop points an engine at the shop, with short retries, on the given
// database and the shared Redis.
func withShop(t *testing.T, s *shop, dbURL, redisURL, prefix string) func(*Config) {
	return func(c *Config) {
		c.DatabaseURL, c.RedisURL, c.RedisKeyPrefix = dbURL, redisURL, prefix
		c.Events.WebhookURL, c.Events.WebhookSecret = s.url(), shopSecret
		c.Events.Backoff, c.Events.MaxBackoff, c.Events.Timeout = 20*time.Millisecond, 300*time.Millisecond, 3*time.Second
	}
}

// sharedRedis is the shared Redis's URL and a fresh key prefix, deleted
// when the test ends.
func sharedRedis(t *testing.T) (url, prefix string) {
	url, prefix = servicetest.Redis.URL(t), servicetest.UniqueName("sk")
	t.Cleanup(func() { deleteKeys(t, url, prefix) })
	return url, prefix
}

// buyAndCancel lets buyers claim a unit each at base; every cancelEvery-th
// buyer that claims cancels at once (an order.cancelled to follow its
// order.created, whether or not the order landed first). It returns the
// claims answered 202.
func buyAndCancel(t *testing.T, client *http.Client, base, jwtSecret, sale string, buyers, cancelEvery int, prefix string) int {
	t.Helper()
	var claimed, n atomic.Int64
	fanOut(32, func(yield func(int) bool) {
		for i := range buyers {
			if !yield(i) {
				return
			}
		}
	}, func(i int) {
		tok, err := jwt.Sign([]byte(jwtSecret), fmt.Sprintf("%s-%d", prefix, i), time.Hour, time.Now())
		if err != nil {
			t.Error(err)
			return
		}
		status, body := post(client, base+"/api/v1/sales/"+sale+"/reservations", tok, `{"qty":1}`, "k-"+strconv.Itoa(i))
		if status != http.StatusAccepted {
			return
		}
		claimed.Add(1)
		if n.Add(1)%int64(cancelEvery) == 0 {
			id, _ := body["reservation_id"].(string)
			post(client, base+"/api/v1/reservations/"+id+"/cancel", tok, ``, "")
		}
	})
	return int(claimed.Load())
}

func post(client *http.Client, url, tok, body, key string) (int, map[string]any) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// scrape reads one sample of /metrics at base ("name{labels}"), or -1.
func scrape(client *http.Client, base, sample string) float64 {
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestOrderEventsReceiverDown: the shop goes down mid-rush and comes back
// only once the engine has failed 1500 deliveries to it (a few seconds:
// each pending event retries at most every 300ms here) and the rush is
// over; every event arrives, each order's in order.
func TestOrderEventsReceiverDown(t *testing.T) {
	for _, b := range eventsBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := startShop(t)
			// Down once the first events are in: mid-rush.
			var once sync.Once
			downAt := make(chan time.Time, 1)
			s.answer = func(n int) int {
				if n == 20 {
					once.Do(func() { go func() { s.down(); downAt <- time.Now() }() })
				}
				return 0
			}
			redisURL, prefix := sharedRedis(t)
			e := startEngine(t, withShop(t, s, b.url(t), redisURL, prefix))
			sale := e.liveSale(300, 1)
			claims := buyAndCancel(t, e.client, e.base, e.m.Config.JWTSecret, sale, 600, 4, "down")
			began := <-downAt
			failed := `seckill_order_event_attempts_total{result="failed"}`
			for deadline := time.Now().Add(2 * time.Minute); scrape(e.client, e.base, failed) < 1500; {
				if time.Now().After(deadline) {
					t.Fatalf("never 1500 failed deliveries to a shop that is down (%v)", scrape(e.client, e.base, failed))
				}
				time.Sleep(20 * time.Millisecond)
			}
			outage := time.Since(began)
			s.up()
			f := s.awaitAllDelivered(func() (*seckill.SaleLedger, error) {
				return e.m.orders.Ledger.SaleLedger(context.Background(), sale)
			}, claims, 2*time.Minute)
			t.Logf("shop down %s, %v failed deliveries", outage.Round(time.Millisecond), scrape(e.client, e.base, failed))
			f.check(t, "receiver down mid-rush/"+b.name)
		})
	}
}

// TestOrderEventsReceiverFailsEveryThird: the shop answers 500 to every
// third delivery; every event arrives, each order's in order.
func TestOrderEventsReceiverFailsEveryThird(t *testing.T) {
	for _, b := range eventsBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := startShop(t)
			s.answer = func(n int) int {
				if n%3 == 0 {
					return http.StatusInternalServerError
				}
				return 0
			}
			redisURL, prefix := sharedRedis(t)
			e := startEngine(t, withShop(t, s, b.url(t), redisURL, prefix))
			sale := e.liveSale(300, 1)
			claims := buyAndCancel(t, e.client, e.base, e.m.Config.JWTSecret, sale, 500, 3, "third")
			f := s.awaitAllDelivered(func() (*seckill.SaleLedger, error) {
				return e.m.orders.Ledger.SaleLedger(context.Background(), sale)
			}, claims, 2*time.Minute)
			f.check(t, "receiver 500 every 3rd/"+b.name)
			if f.Requests < f.Delivered*4/3 {
				t.Errorf("%d requests for %d events: the shop did not refuse every third", f.Requests, f.Delivered)
			}
		})
	}
}

// TestOrderEventsTwoNodes: two engines on one database deliver at once;
// no event is delivered by both at the same time, and none is lost.
func TestOrderEventsTwoNodes(t *testing.T) {
	for _, b := range eventsBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := startShop(t)
			redisURL, prefix := sharedRedis(t)
			dbURL := b.url(t)
			a := startEngine(t, withShop(t, s, dbURL, redisURL, prefix))
			bn := startEngine(t, withShop(t, s, dbURL, redisURL, prefix))
			sale := a.liveSale(400, 1)
			claims := buyAndCancel(t, a.client, a.base, a.m.Config.JWTSecret, sale, 600, 3, "two")
			f := s.awaitAllDelivered(func() (*seckill.SaleLedger, error) {
				return a.m.orders.Ledger.SaleLedger(context.Background(), sale)
			}, claims, 2*time.Minute)
			delivered := `seckill_order_event_attempts_total{result="delivered"}`
			t.Logf("delivered by node a: %v, by node b: %v", scrape(a.client, a.base, delivered), scrape(bn.client, bn.base, delivered))
			f.check(t, "two nodes/"+b.name)
		})
	}
}

// TestOrderEventsSIGKILLMidDelivery: `seckill serve` is SIGKILLed while a
// delivery is in flight (the shop holds the 40th request until the
// process is dead), then started again; every event arrives, each
// order's in order.
func TestOrderEventsSIGKILLMidDelivery(t *testing.T) {
	bin := seckillBinary(t)
	for _, b := range eventsBackends() {
		t.Run(b.name, func(t *testing.T) {
			s := startShop(t)
			redisURL, prefix := sharedRedis(t)
			dbURL := b.url(t)
			const jwtSecret, admin = "test-jwt-secret-0123456789abcdef", "test-admin-token-0123456789abcdef"
			n := newNode(t, bin, "events-"+b.name, []string{
				"--http-addr", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "data"),
				"--database-url", dbURL, "--redis-url", redisURL, "--redis-key-prefix", prefix,
				"--database-max-conns", strconv.Itoa(sqltest.MaxConns),
				"--jwt-secret", jwtSecret, "--admin-token", admin, "--rate-limit-ip", "off", "--rate-limit-user", "off",
				"--order-webhook-url", s.url(), "--order-webhook-secret", shopSecret,
				"--order-webhook-backoff", "20ms", "--order-webhook-max-backoff", "300ms", "--order-webhook-timeout", "2s",
				"--log-level", "warn",
			})
			kill, killed := make(chan struct{}), make(chan struct{})
			s.answer = func(n int) int {
				if n == 40 {
					close(kill)
					<-killed // the deliverer is dead before it hears back
				}
				return 0
			}
			if err := n.start(); err != nil {
				t.Fatal(err)
			}
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
			sale := servicetest.UniqueName("k")
			now := time.Now()
			body, _ := json.Marshal(map[string]any{"id": sale, "name": "Tea", "price_cents": 9900, "stock": 300, "per_user_limit": 1,
				"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano)})
			req, _ := http.NewRequest("POST", n.url()+"/admin/v1/sales", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+admin)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create sale: %s", resp.Status)
			}
			restarted := make(chan error, 1)
			go func() {
				<-kill
				n.kill()
				close(killed)
				restarted <- n.start()
			}()
			claims := buyAndCancel(t, client, n.url(), jwtSecret, sale, 400, 4, "kill")
			if err := <-restarted; err != nil {
				t.Fatal(err)
			}
			// The buyers of the first life that were cut off buy again in the second.
			claims += buyAndCancel(t, client, n.url(), jwtSecret, sale, 100, 4, "kill2")
			db, err := sqlstore.Open(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			orders := sqlstore.NewOrderStore(db)
			f := s.awaitAllDelivered(func() (*seckill.SaleLedger, error) {
				return orders.Ledger.SaleLedger(context.Background(), sale)
			}, claims, 2*time.Minute)
			// The shop may have every event before the dead life's leases
			// run out; its events are then sent again (duplicates) before
			// the outbox has nothing pending.
			servicetest.WaitFor(t, 2*time.Minute, "an outbox with nothing pending", func() bool {
				req, _ := http.NewRequest("GET", n.url()+"/admin/v1/order-events?limit=1", nil)
				req.Header.Set("Authorization", "Bearer "+admin)
				resp, err := client.Do(req)
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var st struct{ Pending, Dead int }
				return json.NewDecoder(resp.Body).Decode(&st) == nil && resp.StatusCode == http.StatusOK && st.Pending == 0 && st.Dead == 0
			})
			if l, err := orders.Ledger.SaleLedger(context.Background(), sale); err == nil {
				f = s.tally(l)
			}
			f.check(t, "SIGKILL mid-delivery/"+b.name)
			if f.Duplicates == 0 {
				t.Errorf("no duplicate: the event the shop took while seckill died was never delivered again")
			}
		})
	}
}
