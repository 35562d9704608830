package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/repeats"
	"github.com/seckill-dev/seckill/internal/ticket"
)

// backendCalls counts the calls of every port the admission routes and
// the reservation route may reach (each is a Redis or database call in
// production), by port and method.
type backendCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *backendCalls) add(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[what]++
}

func (b *backendCalls) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.n {
		out[k] = v
	}
	return out
}

// since is what was called after before, as "what" -> calls.
func (b *backendCalls) since(before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range b.snapshot() {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

type countingStock struct {
	StockStore
	calls *backendCalls
}

func (s countingStock) Stock(ctx context.Context, id string) (seckill.StockLevel, error) {
	s.calls.add("stock.Stock")
	return s.StockStore.Stock(ctx, id)
}

func (s countingStock) Preheat(ctx context.Context, sale *seckill.Sale) (bool, error) {
	s.calls.add("stock.Preheat")
	return s.StockStore.Preheat(ctx, sale)
}

type countingReserver struct {
	name  string
	next  seckill.Reserver
	calls *backendCalls
}

func (r countingReserver) Reserve(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	r.calls.add(r.name + ".Reserve")
	return r.next.Reserve(ctx, saleID, req)
}

// entryBackend is the stock store's side of a lottery in memory. It
// refuses, for 30 s, an entry whose rate check names refuse (if set).
type entryBackend struct {
	calls  *backendCalls
	refuse string
	// loading, when set, refuses every entry try later, as the stock
	// store does while the sale is not loaded or heals.
	loading atomic.Bool
	mu      sync.Mutex
	entries map[string]seckill.LotteryEntry
}

// refusedBy is the index of the first of checks whose key holds addr, or -1.
func refusedBy(checks []seckill.RateCheck, addr string) int {
	for i, c := range checks {
		if addr != "" && strings.Contains(c.Key, addr) {
			return i
		}
	}
	return -1
}

func (f *entryBackend) Enter(_ context.Context, s *seckill.Sale, req seckill.EntryRequest) (seckill.EntryResult, error) {
	f.calls.add("lottery.Enter")
	if f.loading.Load() {
		return seckill.EntryResult{Refused: seckill.ETRYLATER}, nil
	}
	if by := refusedBy(req.RateChecks, f.refuse); by >= 0 {
		return seckill.EntryResult{Refused: seckill.ERATELIMITED, RateLimitedBy: by, RetryAfter: 30 * time.Second}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := s.ID + "/" + req.UserID
	if e, ok := f.entries[k]; ok {
		return seckill.EntryResult{Entry: e}, nil
	}
	e := seckill.LotteryEntry{ID: req.EntryID, UserID: req.UserID, Qty: req.Qty}
	f.entries[k] = e
	return seckill.EntryResult{Entry: e, New: true}, nil
}

func (f *entryBackend) Entry(context.Context, string, string) (seckill.LotteryEntry, bool, error) {
	f.calls.add("lottery.Entry")
	return seckill.LotteryEntry{}, false, nil
}

func (f *entryBackend) Won(context.Context, string, string) (string, bool, error) {
	f.calls.add("lottery.Won")
	return "", false, nil
}

func (f *entryBackend) Entries(context.Context, string) ([]seckill.LotteryEntry, error) {
	f.calls.add("lottery.Entries")
	return nil, nil
}

func (f *entryBackend) EnsureDraw(_ context.Context, saleID string) (seckill.DrawRecord, error) {
	f.calls.add("draws.EnsureDraw")
	return seckill.DrawRecord{SaleID: saleID}, nil
}

// queueBackend is the waiting room in memory: places in arrival order.
// It refuses, for 30 s, a join whose rate check names refuse (if set).
type queueBackend struct {
	calls  *backendCalls
	refuse string
	mu     sync.Mutex
	order  []string
}

func (f *queueBackend) Join(_ context.Context, _ *seckill.Sale, _ int64, req seckill.QueueJoin) (seckill.QueueJoinResult, error) {
	f.calls.add("queue.Join")
	if by := refusedBy(req.RateChecks, f.refuse); by >= 0 {
		return seckill.QueueJoinResult{RateLimited: true, RateLimitedBy: by, RetryAfter: 30 * time.Second}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, u := range f.order {
		if u == req.UserID {
			return seckill.QueueJoinResult{Position: int64(i + 1)}, nil
		}
	}
	f.order = append(f.order, req.UserID)
	return seckill.QueueJoinResult{Position: int64(len(f.order))}, nil
}

func (f *queueBackend) Position(_ context.Context, _, userID string) (int64, bool, error) {
	f.calls.add("queue.Position")
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, u := range f.order {
		if u == userID {
			return int64(i + 1), true, nil
		}
	}
	return 0, false, nil
}

const (
	testLotteryID = "draw-2030"
	testQueueID   = "room-2030"
)

// admissionEnv is an env with a lottery sale, a queue sale and testSale (all
// started at testSale's start, with the clock there plus 10 s), every
// backend call counted, and the node memory of internal/repeats.
func admissionEnv(t testing.TB, mods ...func(*Config)) (*env, *backendCalls, *ticket.Signer) {
	t.Helper()
	calls := &backendCalls{}
	tickets := ticket.New([]byte("ticket-key-0123456789abcdefghijkl"))
	var clk *clock
	now := func() time.Time { return clk.Now() }
	e := newEnv(t, func(c *Config) {
		c.Stock = countingStock{StockStore: c.Stock, calls: calls}
		c.Reserver = countingReserver{name: "reserver", next: c.Reserver, calls: calls}
		lottery := &entryBackend{calls: calls, entries: map[string]seckill.LotteryEntry{}}
		c.Lottery = &LotteryConfig{Enterer: repeats.NewEnterer(lottery, repeats.Config{Now: now}), Store: lottery, Draws: lottery}
		q := &queueBackend{calls: calls}
		c.Queue = &QueueConfig{
			Queuer: repeats.NewQueuer(q, repeats.Config{Now: now}), Positions: q, Tickets: tickets,
			Admitted: countingReserver{name: "admitted", next: &fakeReserver{}, calls: calls},
		}
		for _, m := range mods {
			m(c)
		}
	})
	clk = e.clock
	start := testSale().StartAt
	lottery := testSale()
	lottery.ID, lottery.Admission = testLotteryID, seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: start.Add(30 * time.Minute)}
	queue := testSale()
	queue.ID, queue.Admission = testQueueID, seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1000}
	for _, s := range []*seckill.Sale{lottery, queue, testSale()} {
		if err := e.sales.CreateSale(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		e.stock.Set(s.ID, seckill.StockLevel{Total: s.Stock})
	}
	e.clock.Set(start.Add(seckill.QueueSettleMargin + 10*time.Second))
	return e, calls, tickets
}

func (e *env) post(user, path string, headers map[string][]string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(req{method: "POST", path: path, body: `{"qty":1}`, auth: "Bearer " + buyerToken(e.t, user),
		headers: headers})
}

// TestARepeatedEntryOrJoinCallsNoBackend: a buyer's second entry answers
// the first entry, and their second join (places final) the same place,
// from this node's memory: neither reaches a backend, not even the rate
// limits' (none here: the reservation guard's limiter is not set, so the
// counted ports are every backend the routes have).
func TestARepeatedEntryOrJoinCallsNoBackend(t *testing.T) {
	e, calls, _ := admissionEnv(t)
	enter := "/api/v1/sales/" + testLotteryID + "/entries"
	join := "/api/v1/sales/" + testQueueID + "/queue"

	first := e.post("ann", enter, nil)
	if first.Code != http.StatusCreated {
		t.Fatalf("first entry: %d %s", first.Code, first.Body)
	}
	before := calls.snapshot()
	second := e.post("ann", enter, nil)
	if second.Code != http.StatusOK || !strings.Contains(second.Body.String(), entryIDOf(t, first.Body.String())) {
		t.Fatalf("second entry: %d %s, want 200 naming the first entry (%s)", second.Code, second.Body, first.Body)
	}
	if got := calls.since(before); len(got) != 0 {
		t.Fatalf("a repeated entry called %v, want nothing", got)
	}

	if w := e.post("ann", join, nil); w.Code != http.StatusOK {
		t.Fatalf("first join: %d %s", w.Code, w.Body)
	}
	before = calls.snapshot()
	w := e.post("ann", join, nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"position":1`) {
		t.Fatalf("second join: %d %s, want 200 at position 1", w.Code, w.Body)
	}
	// The live stock is read once per sale per liveStockTTL (the first
	// join read it), so the repeat costs nothing either.
	if got := calls.since(before); len(got) != 0 {
		t.Fatalf("a repeated join called %v, want nothing", got)
	}
}

func entryIDOf(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `"entry_id":"`)
	id, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 || id == "" {
		t.Fatalf("no entry_id in %s", body)
	}
	return id
}

// TestVerifyingATicketCallsNoBackend: a reservation on a queue sale with
// a valid ticket reaches exactly one backend, the admitted claims'
// Reserver, once; one with a forged, expired or someone else's ticket
// reaches none. The ticket is checked in memory (an HMAC).
func TestVerifyingATicketCallsNoBackend(t *testing.T) {
	e, calls, tickets := admissionEnv(t)
	now := e.clock.Now()
	res := "/api/v1/sales/" + testQueueID + "/reservations"
	valid := tickets.Issue(testQueueID, "ann", now.Add(time.Minute))

	before := calls.snapshot()
	if w := e.post("ann", res, map[string][]string{ticketHeader: {valid}}); w.Code != http.StatusAccepted {
		t.Fatalf("claim with a valid ticket: %d %s", w.Code, w.Body)
	}
	if got := calls.since(before); len(got) != 1 || got["admitted.Reserve"] != 1 {
		t.Fatalf("a claim with a valid ticket called %v, want admitted.Reserve once and nothing else", got)
	}

	for name, tc := range map[string]struct{ user, ticket string }{
		"someone else's":  {"bob", valid},
		"expired":         {"ann", tickets.Issue(testQueueID, "ann", now.Add(-time.Second))},
		"of another sale": {"ann", tickets.Issue(testSaleID, "ann", now.Add(time.Minute))},
		"forged":          {"ann", valid[:len(valid)-4] + "0000"},
	} {
		before := calls.snapshot()
		w := e.post(tc.user, res, map[string][]string{ticketHeader: {tc.ticket}})
		wantError(t, w, http.StatusConflict, seckill.EADMISSION)
		if got := calls.since(before); len(got) != 0 {
			t.Errorf("a claim with %s ticket called %v, want nothing", name, got)
		}
	}
}

// TestAnEntryWhileTheSaleLoadsIsTryLater: while the stock store refuses
// entries because the sale is not loaded or heals (the heal puts back the
// entries the database keeps), an entry is 503 try_later with
// Retry-After, not "not open" (a definite answer) and not remembered; the
// retry once loaded is the buyer's first entry.
func TestAnEntryWhileTheSaleLoadsIsTryLater(t *testing.T) {
	lottery := &entryBackend{calls: &backendCalls{}, entries: map[string]seckill.LotteryEntry{}}
	e, _, _ := admissionEnv(t, func(c *Config) {
		c.Lottery.Enterer, c.Lottery.Store = repeats.NewEnterer(lottery, repeats.Config{}), lottery
	})
	enter := "/api/v1/sales/" + testLotteryID + "/entries"
	lottery.loading.Store(true)
	w := e.post("ann", enter, nil)
	wantError(t, w, http.StatusServiceUnavailable, seckill.ETRYLATER)
	if w.Header().Get("Retry-After") == "" {
		t.Errorf("try later without Retry-After: %v", w.Header())
	}
	lottery.loading.Store(false)
	if w := e.post("ann", enter, nil); w.Code != http.StatusCreated {
		t.Fatalf("the retry once loaded: %d %s; want 201", w.Code, w.Body)
	}
}

// TestAdmissionRoutesServedInFront: entries and joins are served in front
// of the mux, with the route's pattern and metrics as the mux would give;
// a path the front does not take (escaped, or another method) goes the
// long way and is answered as before.
func TestAdmissionRoutesServedInFront(t *testing.T) {
	e, _, _ := admissionEnv(t)
	if w := e.post("ann", "/api/v1/sales/"+testLotteryID+"/entries", nil); w.Code != http.StatusCreated {
		t.Fatalf("entry: %d %s", w.Code, w.Body)
	}
	if w := e.post("ann", "/api/v1/sales/"+testQueueID+"/queue", nil); w.Code != http.StatusOK {
		t.Fatalf("join: %d %s", w.Code, w.Body)
	}
	assertMetric(t, e, `seckill_http_requests_total{route="`+enterPattern+`",status="201"} 1`)
	assertMetric(t, e, `seckill_http_requests_total{route="`+joinPattern+`",status="200"} 1`)
	// An escaped sale id is the mux's to route: same sale, same answer.
	if w := e.post("bob", "/api/v1/sales/draw%2D2030/entries", nil); w.Code != http.StatusCreated {
		t.Fatalf("escaped path: %d %s", w.Code, w.Body)
	}
	w := e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/entries", auth: "Bearer " + buyerToken(t, "ann")})
	wantError(t, w, http.StatusMethodNotAllowed, seckill.EMETHODNOTALLOW)
	if w := e.post("ann", "/api/v1/sales/"+testSaleID+"/entries", nil); w.Code != http.StatusConflict {
		t.Fatalf("entry into a first come sale: %d %s, want 409 admission", w.Code, w.Body)
	}
}

// TestAnAdmittedClaimRefreshesTheLiveStock: the waiting room's live
// "sold out" is reused for liveStockTTL, except that a ticket holder's
// claim on this node drops it, so the claim that took the last unit is
// told to the next poll here at once.
func TestAnAdmittedClaimRefreshesTheLiveStock(t *testing.T) {
	e, _, tickets := admissionEnv(t)
	mine := func() string {
		t.Helper()
		w := e.do(req{method: "GET", path: "/api/v1/sales/" + testQueueID + "/queue/mine", auth: "Bearer " + buyerToken(t, "bob")})
		if w.Code != http.StatusOK {
			t.Fatalf("queue/mine: %d %s", w.Code, w.Body)
		}
		return w.Body.String()
	}
	if w := e.post("bob", "/api/v1/sales/"+testQueueID+"/queue", nil); w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"sold_out":true`) {
		t.Fatalf("join: %d %s, want a place, not sold out", w.Code, w.Body)
	}
	// The claim below takes the last unit (the fake admitted Reserver
	// does not count units).
	e.stock.Set(testQueueID, seckill.StockLevel{Total: 200, Reserved: 200})
	ticket := tickets.Issue(testQueueID, "ann", e.clock.Now().Add(time.Minute))
	if w := e.post("ann", "/api/v1/sales/"+testQueueID+"/reservations", map[string][]string{ticketHeader: {ticket}}); w.Code != http.StatusAccepted {
		t.Fatalf("ann's claim: %d %s", w.Code, w.Body)
	}
	if body := mine(); !strings.Contains(body, `"sold_out":true`) {
		t.Fatalf("poll after a claim on this node: %s, want sold_out", body)
	}
}

// TestAPollOfAFinalPlaceCallsNoBackend: a buyer who joined before the
// start polls their place; the first poll once places are final reads it
// from the store, and every later one is answered from memory.
func TestAPollOfAFinalPlaceCallsNoBackend(t *testing.T) {
	e, calls, _ := admissionEnv(t)
	start := testSale().StartAt
	e.clock.Set(start.Add(-time.Minute))
	if w := e.post("cat", "/api/v1/sales/"+testQueueID+"/queue", nil); w.Code != http.StatusOK {
		t.Fatalf("join before the start: %d %s", w.Code, w.Body)
	}
	poll := func() map[string]int {
		t.Helper()
		before := calls.snapshot()
		w := e.do(req{method: "GET", path: "/api/v1/sales/" + testQueueID + "/queue/mine", auth: "Bearer " + buyerToken(t, "cat")})
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"position":1`) {
			t.Fatalf("poll: %d %s, want position 1", w.Code, w.Body)
		}
		return calls.since(before)
	}
	if got := poll(); got["queue.Position"] != 1 {
		t.Fatalf("a poll before the start called %v, want the store's position", got)
	}
	e.clock.Set(start.Add(seckill.QueueSettleMargin))
	if got := poll(); got["queue.Position"] != 1 {
		t.Fatalf("the first poll once final called %v, want the store's position", got)
	}
	if got := poll(); got["queue.Position"] != 0 {
		t.Fatalf("a later poll called %v, want no position read", got)
	}
}

// TestABlockedAddressIsRefusedOnARepeat: a repeated entry or join is
// answered from memory, but not to an address on the block list: that
// gets the block's 429 first, as every other request from it does, still
// without a backend call. Other addresses' repeats are answered as before.
func TestABlockedAddressIsRefusedOnARepeat(t *testing.T) {
	e, calls, _ := admissionEnv(t, func(c *Config) {
		c.Lottery.Store.(*entryBackend).refuse = "10.9.9.9" // the entry's and join's own calls count the checks
		c.Queue.Positions.(*queueBackend).refuse = "10.9.9.9"
		c.LimitInReserve = true
		c.RateLimitIP, c.RateLimitUser = seckill.RateLimit{Rate: 1, Period: time.Minute}, seckill.RateLimit{Rate: 100, Period: time.Second}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	from := func(addr string) map[string][]string { return map[string][]string{"X-Forwarded-For": {addr}} }
	for _, path := range []string{"/api/v1/sales/" + testLotteryID + "/entries", "/api/v1/sales/" + testQueueID + "/queue"} {
		if w := e.post("ann", path, from("10.1.1.1")); w.Code/100 != 2 {
			t.Fatalf("%s: ann's first: %d %s", path, w.Code, w.Body)
		}
		// Bob's new request from the bad address puts it on the block list.
		if w := e.post("bob", path, from("10.9.9.9")); w.Code != http.StatusTooManyRequests {
			t.Fatalf("%s: bob from the bad address: %d %s", path, w.Code, w.Body)
		}
		before := calls.snapshot()
		w := e.post("ann", path, from("10.9.9.9"))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Errorf("%s: ann's repeat from the blocked address: %d %s, want 429 with Retry-After", path, w.Code, w.Body)
		}
		if w := e.post("ann", path, from("10.1.1.1")); w.Code != http.StatusOK {
			t.Errorf("%s: ann's repeat from her own address: %d %s, want 200", path, w.Code, w.Body)
		}
		if got := calls.since(before); len(got) != 0 {
			t.Errorf("%s: the repeats called %v, want nothing", path, got)
		}
	}
}
