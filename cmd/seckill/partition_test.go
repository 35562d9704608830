package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/nemesis"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// This file is the partition suite (issue 33), a Jepsen-style nemesis:
// three `seckill serve` processes, each reaching Redis, the broker and the
// database through a TCP proxy of its own (toxiproxy, in-process), and a
// fault injected on one node's proxies mid-rush. The short form runs in
// the normal suite; SECKILL_TEST_PARTITION=full runs the whole matrix.

// partitionCase is one fault on the victim node (node 2).
type partitionCase struct {
	name  string
	links []string // the victim's links the fault is on: redis, broker, db
	fault nemesis.Fault
	lasts time.Duration
	// inTx: the victim is caught inside a writer transaction on purpose
	// (holdWriterTxEnv), then cut.
	inTx bool
	// stop: the victim is paused (SIGSTOP) instead, and resumed at the
	// end (SIGCONT); buyers are sent to the other nodes meanwhile, as a
	// load balancer's health check would.
	stop bool
}

// partitionShort is the short form: a node cut off from the database
// while it holds a writer transaction open, on both server databases.
var partitionShort = []partitionCase{
	{name: "isolated from the database inside a writer transaction", links: []string{"db"}, fault: nemesis.Blackhole, lasts: 25 * time.Second, inTx: true},
}

// partitionFull is the whole matrix (SECKILL_TEST_PARTITION=full): one
// node's faults for 8 s mid-rush, then a node isolated from every backend,
// from the database only, and paused (SIGSTOP), each for 60 s and caught
// inside a writer transaction.
var partitionFull = []partitionCase{
	{name: "redis replies dropped", links: []string{"redis"}, fault: nemesis.DropReplies, lasts: 8 * time.Second},
	{name: "redis requests dropped", links: []string{"redis"}, fault: nemesis.DropRequests, lasts: 8 * time.Second},
	{name: "redis slow", links: []string{"redis"}, fault: nemesis.Slow(400*time.Millisecond, 300*time.Millisecond), lasts: 8 * time.Second},
	{name: "connections reset", links: []string{"redis", "broker", "db"}, fault: nemesis.Reset, lasts: 8 * time.Second},
	{name: "database blackholed", links: []string{"db"}, fault: nemesis.Blackhole, lasts: 8 * time.Second},
	{name: "broker blackholed", links: []string{"broker"}, fault: nemesis.Blackhole, lasts: 8 * time.Second},
	{name: "isolated from every backend inside a writer transaction", links: []string{"redis", "broker", "db"}, fault: nemesis.Blackhole, lasts: 60 * time.Second, inTx: true},
	{name: "isolated from the database inside a writer transaction", links: []string{"db"}, fault: nemesis.Blackhole, lasts: 60 * time.Second, inTx: true},
	{name: "paused (SIGSTOP) inside a writer transaction", lasts: 60 * time.Second, inTx: true, stop: true},
}

// TestPartition is the partition suite: the short form, or with
// SECKILL_TEST_PARTITION=full every case of partitionFull on PostgreSQL
// and MariaDB, NATS and RabbitMQ (SECKILL_TEST_PARTITION_RUN=regexp picks
// cases by their subtest name, as -run would).
func TestPartition(t *testing.T) {
	bin := seckillBinary(t)
	dbs := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"postgres", func(t *testing.T) string { return sqltest.Postgres(t) }},
		{"mariadb", func(t *testing.T) string { return sqltest.MySQL(t) }},
	}
	brokers := []struct {
		name string
		url  func(t *testing.T, queue string) string
	}{
		{"nats", func(t *testing.T, _ string) string { return startNATS(t) }},
		{"rabbitmq", func(t *testing.T, queue string) string {
			u := servicetest.RabbitMQ.URL(t)
			t.Cleanup(func() { deleteQueue(t, u, queue) }) // after the nodes stop
			return u
		}},
	}
	cases, full := partitionShort, os.Getenv("SECKILL_TEST_PARTITION") == "full"
	if full {
		cases = partitionFull
	} else {
		brokers = brokers[:1]
	}
	for _, db := range dbs {
		for _, b := range brokers {
			for _, c := range cases {
				t.Run(db.name+"/"+b.name+"/"+strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
					queue := servicetest.UniqueName("seckill_partition_")
					runPartition(t, bin, db.url(t), b.url(t, queue), queue, c)
				})
			}
		}
	}
}

// partitionRun is one case's cluster and what the rush saw.
type partitionRun struct {
	t      *testing.T
	c      *cluster
	links  []map[string]*nemesis.Link // per node: "redis", "broker", "db"
	db     *sql.DB
	sale   string
	hold   string // the victim's hook path ("" without the hook)
	client *http.Client

	mu       sync.Mutex
	claims   map[string]partitionClaim // reservation id → who and when
	answers  map[string]int
	unheard  map[int]bool  // buyers whose answer was neither a claim nor a refusal (503, transport error)
	slowest  time.Duration // slowest answer while the fault lasted
	avoid    bool          // buyers are not sent to the victim (paused)
	faultAt  time.Time
	healedAt time.Time
}

type partitionClaim struct {
	node int
	at   time.Time
}

const partitionVictim = 2

func runPartition(t *testing.T, bin, dbURL, brokerURL, queue string, pc partitionCase) {
	const (
		units  = 600
		buyers = 1500
	)
	redisURL := "redis://" + redistest.StartServer(t).Addr
	prefix := servicetest.UniqueName("sk")
	nem := nemesis.New(t)
	r := &partitionRun{t: t, claims: map[string]partitionClaim{}, answers: map[string]int{}, unheard: map[int]bool{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}}
	r.c = &cluster{t: t, client: r.client}
	for i := range 3 {
		name := fmt.Sprintf("node%d", i)
		links := map[string]*nemesis.Link{}
		var redisVia, brokerVia, dbVia string
		links["redis"], redisVia = nem.LinkURL(t, name+"-redis", redisURL)
		links["broker"], brokerVia = nem.LinkURL(t, name+"-broker", brokerURL)
		links["db"], dbVia = nem.LinkURL(t, name+"-db", dbURL)
		r.links = append(r.links, links)
		n := newNode(t, bin, name, []string{
			"--http-addr", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), name),
			"--redis-url", redisVia, "--redis-key-prefix", prefix,
			"--broker-url", brokerVia, "--broker-queue", queue, "--database-url", dbVia, "--database-max-conns", "4",
			"--jwt-secret", mnSecret, "--admin-token", mnAdmin,
			"--rate-limit-ip", "off", "--rate-limit-user", "off", "--max-inflight", "-1",
			"--log-level", "warn",
		})
		if i == partitionVictim && pc.inTx {
			r.hold = filepath.Join(t.TempDir(), "hold")
			n.env = append(n.env, holdWriterTxEnv+"="+r.hold)
		}
		r.c.nodes = append(r.c.nodes, n)
	}
	if err := r.c.nodes[0].start(); err != nil { // migrates
		t.Fatal(err)
	}
	errs := make([]error, len(r.c.nodes))
	var wg sync.WaitGroup
	for i, n := range r.c.nodes[1:] {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	pool, _, err := sqlstore.OpenPool(t.Context(), dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	r.db = pool
	t.Cleanup(func() { pool.Close() })

	now := time.Now()
	r.sale = servicetest.UniqueName("pt")
	if a := r.c.do(0, "POST", "/admin/v1/sales", mnAdmin, map[string]any{
		"id": r.sale, "name": "Partition tea", "price_cents": 900, "stock": units, "per_user_limit": 1,
		"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
	}); a.status != http.StatusCreated {
		t.Fatalf("create sale: %s %v %v", a.key(), a.body, a.err)
	}

	stopPoll := r.pollOrders()
	// Phase 1: buyers until the victim is where the case wants it.
	next := 0
	rush := func(n int) {
		r.rush(next, min(next+n, buyers))
		next = min(next+n, buyers)
	}
	rush(150)
	if pc.inTx {
		deadline := time.Now().Add(60 * time.Second)
		for !fileExists(r.hold + ".held") {
			if time.Now().After(deadline) {
				t.Fatalf("the victim's writer never held a transaction open (is the hook %s wired?)\n%s", holdWriterTxEnv, r.c.nodes[partitionVictim].logTail())
			}
			if next < buyers/4 {
				rush(10)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	// The fault, then phase 2 of the rush while it lasts.
	r.mu.Lock()
	r.faultAt = time.Now()
	r.mu.Unlock()
	for _, l := range pc.links {
		if err := r.links[partitionVictim][l].Inject(pc.fault); err != nil {
			t.Fatal(err)
		}
	}
	victim := r.c.nodes[partitionVictim]
	if pc.stop {
		r.mu.Lock()
		r.avoid = true
		r.mu.Unlock()
		victim.signal(syscall.SIGSTOP)
		t.Cleanup(func() { victim.signal(syscall.SIGCONT) })
	}
	if pc.inTx {
		if err := os.WriteFile(r.hold, nil, 0o644); err != nil { // let the held writer go on, into the fault
			t.Fatal(err)
		}
	}
	rush(buyers)
	if wait := time.Until(r.faultAt.Add(pc.lasts)); wait > 0 {
		time.Sleep(wait) // the fault's length is the case's, not a wait for a condition
	}
	for _, l := range pc.links {
		r.links[partitionVictim][l].Heal()
	}
	if pc.stop {
		victim.signal(syscall.SIGCONT)
	}
	r.mu.Lock()
	r.healedAt = time.Now()
	r.mu.Unlock()

	r.settle(units, pc, stopPoll)
}

// rush sends buyers [from, to) round robin, 48 at a time, and records
// every answer.
func (r *partitionRun) rush(from, to int) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range 48 {
		wg.Go(func() {
			for b := range work {
				node := b % len(r.c.nodes)
				r.mu.Lock()
				if r.avoid && node == partitionVictim {
					node = (node + 1) % len(r.c.nodes)
				}
				r.mu.Unlock()
				start := time.Now()
				a := r.c.do(node, "POST", "/api/v1/sales/"+r.sale+"/reservations", r.c.token(fmt.Sprintf("%s-buyer-%d", r.sale, b)), map[string]any{"qty": 1})
				took := time.Since(start)
				r.mu.Lock()
				r.answers[a.key()]++
				switch k := a.key(); {
				case k == "202", k == "409 sold_out", k == "409 limit_exceeded":
					delete(r.unheard, b)
				default:
					r.unheard[b] = true
				}
				if !r.faultAt.IsZero() && r.healedAt.IsZero() {
					r.slowest = max(r.slowest, took)
				}
				if a.key() == "202" {
					id, _ := a.body["reservation_id"].(string)
					r.claims[id] = partitionClaim{node: node, at: time.Now()}
				}
				r.mu.Unlock()
			}
		})
	}
	for b := from; b < to; b++ {
		work <- b
	}
	close(work)
	wg.Wait()
}

// pollOrders records, every 50 ms until stop is called, when each order
// of the sale was first seen.
func (r *partitionRun) pollOrders() (stop func() map[string]time.Time) {
	seen := map[string]time.Time{}
	ctx, cancel := context.WithCancel(r.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			rows, err := r.db.QueryContext(ctx, `SELECT reservation_id FROM orders WHERE sale_id = '`+r.sale+`'`)
			at := time.Now()
			if err == nil {
				for rows.Next() {
					var id string
					if rows.Scan(&id) == nil {
						if _, ok := seen[id]; !ok {
							seen[id] = at
						}
					}
				}
				rows.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() map[string]time.Time { cancel(); <-done; return seen }
}

// orderedAt waits until every claim is ordered (or 90 s after the heal)
// and returns when each order was first seen.
func (r *partitionRun) orderedAt(stop func() map[string]time.Time) map[string]time.Time {
	ids := make([]string, 0, len(r.claims))
	for id := range r.claims {
		ids = append(ids, id)
	}
	deadline := r.healedAt.Add(90 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := r.db.QueryRowContext(r.t.Context(), `SELECT COUNT(*) FROM orders WHERE sale_id = '`+r.sale+`'`).Scan(&n); err == nil && n >= len(ids) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // one more poll
	return stop()
}

// settle waits for every claim to be ordered and checks the case's
// figures.
func (r *partitionRun) settle(units int, pc partitionCase, stopPoll func() map[string]time.Time) {
	t := r.t
	seen := r.orderedAt(stopPoll)
	var lost int
	// The time from the fault until every claim of a kind is an order.
	var healthy, silent, after time.Duration
	var afterN int
	for id, c := range r.claims {
		at, ok := seen[id]
		if !ok {
			lost++
			continue
		}
		took := max(0, at.Sub(r.faultAt))
		if c.node == partitionVictim {
			silent = max(silent, took)
		} else {
			healthy = max(healthy, took)
		}
		if c.at.After(r.faultAt) {
			afterN++
			after = max(after, took)
		}
	}
	var orders, overLimit int
	var qty, stock int64
	ctx := t.Context()
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(qty), 0) FROM orders WHERE sale_id = '`+r.sale+`' AND status IN ('ordered', 'paid')`).Scan(&orders, &qty); err != nil {
		t.Fatal(err)
	}
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE sale_id = '`+r.sale+`' AND status IN ('ordered', 'paid') GROUP BY user_id HAVING SUM(qty) > 1) o`).Scan(&overLimit); err != nil {
		t.Fatal(err)
	}
	if err := r.db.QueryRowContext(ctx, `SELECT stock FROM sales WHERE id = '`+r.sale+`'`).Scan(&stock); err != nil {
		t.Fatal(err)
	}
	// Doubled: stock taken more than once for an order (or an order
	// without its stock): the sale's row disagrees with its orders.
	doubled := int64(units) - stock - qty
	oversold := max(0, qty-int64(units))
	t.Logf("%s: acknowledged %d, orders %d, lost %d, doubled %d, oversold %d, over limit %d; slowest answer while the fault lasted %s; "+
		"every healthy node's claim ordered %s after the fault, the silent node's %s, the %d claims made during the fault %s (fault %s); answers %v",
		pc.name, len(r.claims), orders, lost, doubled, oversold, overLimit, r.slowest.Round(time.Millisecond),
		healthy.Round(time.Millisecond), silent.Round(time.Millisecond), afterN, after.Round(time.Millisecond),
		r.healedAt.Sub(r.faultAt).Round(time.Millisecond), r.answers)
	if lost != 0 || doubled != 0 || oversold != 0 || overLimit != 0 {
		t.Errorf("lost %d, doubled %d, oversold %d, over limit %d; want all 0", lost, doubled, oversold, overLimit)
	}
	if orders < len(r.claims) {
		t.Errorf("%d orders for %d acknowledged claims", orders, len(r.claims))
	}
	r.unheardClaims(orders)
	if afterN == 0 {
		t.Fatal("no claim was made while the fault lasted: the case proves nothing")
	}
	// The healthy nodes go on while the victim is cut off: every claim
	// is an order before the fault heals, within the bound the server's
	// session limits and the writer's deadlines give (a silent
	// transaction is ended after 5 s; the victim gives its batches back
	// about 6 s after the cut), not when the victim comes back.
	faultLen := r.healedAt.Sub(r.faultAt)
	for _, f := range []struct {
		what  string
		took  time.Duration
		bound time.Duration
	}{
		{"every healthy node's claim ordered", healthy, 10 * time.Second},
		{"every claim of the silent node ordered", silent, 15 * time.Second},
	} {
		if faultLen >= 20*time.Second && f.took >= faultLen {
			t.Errorf("%s only %s after the fault, when it had healed (%s): a node cut off held the orders", f.what, f.took.Round(time.Millisecond), faultLen.Round(time.Millisecond))
		}
		servicetest.WantWithin(t, f.what, f.took, f.bound)
	}
	if !pc.stop {
		// Every answer while the fault lasts, a polite 503 at worst,
		// within the request budget (2 s) and some slack.
		servicetest.WantWithin(t, "slowest answer while the fault lasted", r.slowest, 3*time.Second)
	}
	if t.Failed() {
		for _, n := range r.c.nodes {
			t.Logf("%s's log:\n%s", n.name, n.logTail())
		}
	}
	for k, n := range r.answers {
		if k != "202" && k != "409 sold_out" && k != "409 limit_exceeded" && !strings.HasPrefix(k, "503") {
			t.Errorf("%d answers %q; want only 202, sold_out, limit_exceeded or 503", n, k)
		}
	}
}

// unheardClaims checks the orders no buyer was told of: a claim Redis
// made whose answer was lost (its reply dropped, the node cut off). Each
// must belong to a buyer who was not answered (503 or a transport error),
// and that buyer finds it with GET /api/v1/sales/{id}/reservations/mine.
func (r *partitionRun) unheardClaims(orders int) {
	t := r.t
	rows, err := r.db.QueryContext(t.Context(), `SELECT reservation_id, user_id FROM orders WHERE sale_id = '`+r.sale+`'`)
	if err != nil {
		t.Fatal(err)
	}
	type order struct{ id, user string }
	var unheard []order
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.id, &o.user); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.claims[o.id]; !ok {
			unheard = append(unheard, o)
		}
	}
	rows.Close()
	prefix := r.sale + "-buyer-"
	for _, o := range unheard {
		var b int
		if _, err := fmt.Sscanf(strings.TrimPrefix(o.user, prefix), "%d", &b); err != nil || !r.unheard[b] {
			t.Errorf("order %s of %s: never acknowledged, yet its buyer was answered", o.id, o.user)
			continue
		}
		a := r.c.do(0, "GET", "/api/v1/sales/"+r.sale+"/reservations/mine", r.c.token(o.user), nil)
		res, _ := a.body["reservations"].([]any)
		found := false
		for _, v := range res {
			if m, _ := v.(map[string]any); m["reservation_id"] == o.id && m["status"] == "ordered" {
				found = true
			}
		}
		if a.status != http.StatusOK || !found {
			t.Errorf("buyer %s, whose answer was lost, does not find the claim %s: %s %v %v", o.user, o.id, a.key(), a.body, a.err)
		}
	}
	if len(unheard) > 0 {
		t.Logf("%d claims whose answers were lost: every buyer found theirs with reservations/mine", len(unheard))
	}
}

// signal sends sig to the node's current life.
func (n *node) signal(sig os.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
