package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Timers of rueidis that outlive a closed client by a few seconds:
		// a Cluster client closes connections replaced by a topology
		// refresh 5 s later, and delays a refresh after a failed call.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// backend starts one kind of Redis (once per test) and returns a
// constructor of stores on it, each with its own key prefix.
type backend struct {
	name  string
	start func(t *testing.T) func(t *testing.T) *Store
}

var backends = []backend{
	{"Embedded", func(t *testing.T) func(t *testing.T) *Store {
		return func(t *testing.T) *Store {
			t.Helper()
			s, err := StartEmbedded(context.Background(), WithKeyPrefix(servicetest.UniqueName("t")))
			if err != nil {
				t.Fatalf("StartEmbedded: %v", err)
			}
			t.Cleanup(s.Close)
			wantMode(t, s, rueidis.ClientModeCluster) // miniredis answers CLUSTER SLOTS as one node
			return s
		}
	}},
	{"Redis", func(t *testing.T) func(t *testing.T) *Store {
		url := servicetest.Redis.URL(t)
		return func(t *testing.T) *Store {
			t.Helper()
			s := connect(t, url)
			wantMode(t, s, rueidis.ClientModeStandalone)
			return s
		}
	}},
	{"Cluster", func(t *testing.T) func(t *testing.T) *Store {
		url := redistest.StartCluster(t).URL()
		return func(t *testing.T) *Store {
			t.Helper()
			s := connect(t, url)
			wantMode(t, s, rueidis.ClientModeCluster)
			return s
		}
	}},
}

// connect returns a store on url (with opts) under a fresh key prefix,
// and deletes every key under that prefix when the test ends: the shared
// Redis is never flushed.
func connect(t testing.TB, url string, opts ...Option) *Store {
	t.Helper()
	prefix := servicetest.UniqueName("t")
	s, err := New(context.Background(), url, append(opts, WithKeyPrefix(prefix))...)
	if err != nil {
		t.Fatalf("New(%s): %v", url, err)
	}
	t.Cleanup(func() {
		defer s.Close()
		if err := redistest.DeletePrefix(url, prefix); err != nil {
			t.Errorf("delete test keys under %s: %v", prefix, err)
		}
	})
	return s
}

func wantMode(t *testing.T, s *Store, want rueidis.ClientMode) {
	t.Helper()
	if got := s.client.Mode(); got != want {
		t.Fatalf("client mode = %s; want %s", got, want)
	}
}

// onBackends runs test in a subtest per backend, with that backend's
// constructor of stores.
func onBackends(t *testing.T, test func(t *testing.T, newStore func(*testing.T) *Store)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.start(t)) })
	}
}

// restoring is s as conformance.StockRestorer takes it: its stock store,
// restorer and ledger in one value.
func restoring(s *Store) conformance.RestoringStockStore {
	return restoringStore{s.StockStore(), s.Restorer(), s.Ledger()}
}

type restoringStore struct {
	seckill.StockStore
	Restorer
	Ledger
}

// Stock is the ledger's, which is the stock store's.
func (r restoringStore) Stock(ctx context.Context, saleID string) (seckill.StockLevel, error) {
	return r.Ledger.Stock(ctx, saleID)
}

// storeTest is a test of one store, by name.
type storeTest struct {
	name string
	test func(t *testing.T, s *Store)
}

// runParallel runs each of tests in a parallel subtest, on a store of its
// own from newStore.
func runParallel(t *testing.T, newStore func(*testing.T) *Store, tests []storeTest) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { t.Parallel(); tt.test(t, newStore(t)) })
	}
}

func TestStore(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		t.Run("Conformance", func(t *testing.T) {
			conformance.StockStore(t, func(t *testing.T) seckill.StockStore { return newStore(t).StockStore() })
		})
		runParallel(t, newStore, []storeTest{
			{"Outbox", testOutbox},
			{"ReservationRecord", testReservationRecord},
			{"BuyersNeverExpire", testBuyersNeverExpire},
			{"FullBatch", testFullBatch},
			{"RateChecks", testRateChecks},
			{"AdmissionRateChecks", testAdmissionRateChecks},
			{"RateGenerations", testRateGenerations},
			{"Replays", testReplays},
			{"CompactIdempotency", testCompactIdempotency},
			{"Archive", testArchive},
			{"ArchiveAdmission", testArchiveAdmission},
			{"HealKeepsAdmission", testHealKeepsAdmission},
			{"HealBringsKeysBack", testHealBringsKeysBack},
			{"LoaderHoldsALostSale", testLoaderHoldsALostSale},
			{"Counters", testCounters},
			{"InvalidInput", testInvalidInput},
			{"Ping", func(t *testing.T, s *Store) {
				if err := s.Ping(context.Background()); err != nil {
					t.Fatalf("Ping: %v", err)
				}
			}},
		})
	})
}

func liveSale(stock, limit int64) *seckill.Sale {
	return &seckill.Sale{
		ID:            servicetest.UniqueName("sale_"),
		Name:          "Tea gift set",
		Stock:         stock,
		PurchaseLimit: limit,
		StartAt:       time.Now().Add(-time.Hour),
		EndAt:         time.Now().Add(time.Hour),
	}
}

// mustPreheat preheats sale and returns it.
func mustPreheat(t *testing.T, s *Store, sale *seckill.Sale) *seckill.Sale {
	t.Helper()
	if _, err := s.StockStore().Preheat(context.Background(), sale); err != nil {
		t.Fatalf("Preheat: %v", err)
	}
	return sale
}

func request(saleID, user string, qty int64, key string) seckill.ReserveRequest {
	return seckill.ReserveRequest{ReservationID: seckill.NewReservationID(saleID, time.Now()), UserID: user, Qty: qty, IdempotencyKey: key}
}

// testOutbox checks that every reservation, and nothing else, lands in the
// outbox with its id, user, qty and time.
func testOutbox(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(5, 3))
	before := time.Now().Add(-time.Second).UnixMilli()
	reqs := []seckill.ReserveRequest{
		request(sale.ID, "alice", 2, "k"),
		request(sale.ID, "alice", 2, "k"), // replay: no new entry
		request(sale.ID, "bob:with:colons", 1, ""),
		request(sale.ID, "carol", 4, ""), // over the limit
		request(sale.ID, "dave", 3, ""),  // sold out
		request(sale.ID, "erin", 2, ""),
	}
	results, err := s.StockStore().Reserve(ctx, sale.ID, reqs)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	after := time.Now().Add(time.Second).UnixMilli()
	want := map[string]seckill.ReserveRequest{}
	for i, r := range results {
		if r.Outcome == seckill.OutcomeReserved {
			want[r.ReservationID] = reqs[i]
		}
	}
	if len(want) != 3 {
		t.Fatalf("results %+v: want 3 reservations", results)
	}
	if n, err := s.Outbox().OutboxLen(ctx, sale.ID); err != nil || n != 3 {
		t.Fatalf("OutboxLen = %d, %v; want 3, nil", n, err)
	}
	// One entry for the batch: its count, its time and a line per
	// reservation, in request order.
	entries, err := s.client.Do(ctx, s.client.B().Xrange().Key(s.keys(sale.ID)[keyOutbox]).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(entries) != 1 {
		t.Fatalf("XRANGE = %v, %v; want one entry", entries, err)
	}
	f := entries[0].FieldValues
	var lines []string
	for _, i := range []int{0, 2, 5} {
		r := reqs[i]
		lines = append(lines, fmt.Sprintf("%d %s %s", r.Qty, r.ReservationID[len(sale.ID)+1:], r.UserID))
	}
	at, err := strconv.ParseInt(f[OutboxAtMs], 10, 64)
	// alice's key, a line each for the others, which have none.
	if f[OutboxCount] != "3" || f[OutboxBatch] != strings.Join(lines, "\n") || err != nil || at < before || at > after ||
		f[OutboxKeys] != "k\n\n" || len(f) != 4 {
		t.Errorf("outbox entry %q; want n 3, at in [%d, %d], lines %q, keys %q", f, before, after, lines, "k\n\n")
	}
	es := decodeOutbox(sale.ID, entries)
	var order []string
	for _, e := range es {
		r, ok := want[e.Event.ReservationID]
		if !ok {
			t.Fatalf("outbox reservation %+v is no reservation of this batch", e)
		}
		order = append(order, e.Event.ReservationID)
		if e.Err != nil || e.Event.UserID != r.UserID || e.Event.Qty != r.Qty || e.Event.ReservedAt.UnixMilli() != at {
			t.Errorf("outbox reservation %+v; want user %s, qty %d, reserved at %d ms", e, r.UserID, r.Qty, at)
		}
	}
	if wantOrder := []string{reqs[0].ReservationID, reqs[2].ReservationID, reqs[5].ReservationID}; fmt.Sprint(order) != fmt.Sprint(wantOrder) {
		t.Errorf("outbox order %v; want request order %v", order, wantOrder)
	}
	if n, err := s.Outbox().OutboxLen(ctx, servicetest.UniqueName("sale_")); err != nil || n != 0 {
		t.Errorf("OutboxLen of an unknown sale = %d, %v; want 0, nil", n, err)
	}
}

func testReservationRecord(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(5, 3))
	reqs := []seckill.ReserveRequest{
		request(sale.ID, "user:with:colons", 2, "k"),
		request(sale.ID, "u2", 4, ""), // rejected: no record
	}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, reqs); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	user, qty, status, err := s.StockStore().Reservation(ctx, reqs[0].ReservationID)
	if err != nil || user != "user:with:colons" || qty != 2 || status != StatusActive {
		t.Fatalf("Reservation = %q, %d, %q, %v; want %q, 2, %q, nil", user, qty, status, err, "user:with:colons", StatusActive)
	}
	for _, id := range []string{reqs[1].ReservationID, seckill.NewReservationID("nosuchsale", time.Now()), "malformed"} {
		if _, _, _, err := s.StockStore().Reservation(ctx, id); !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("Reservation(%s): err = %v; want ErrNotFound", id, err)
		}
	}
}

// testBuyersNeverExpire guards the field bug of an expiring claimed-set:
// while the sale lives, no key of it may carry a TTL.
func testBuyersNeverExpire(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(5, 3))
	if _, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "u1", 1, "k")}); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	for _, key := range s.keys(sale.ID) {
		ttl, err := s.client.Do(ctx, s.client.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil || ttl != -1 {
			t.Errorf("PTTL %s = %d, %v; want -1 (exists, no expiry)", key, ttl, err)
		}
	}
	held, err := s.client.Do(ctx, s.client.B().Hget().Key(s.keys(sale.ID)[keyBuyers]).Field("u1").Build()).AsInt64()
	if err != nil || held != 1 {
		t.Errorf("buyers[u1] = %d, %v; want 1", held, err)
	}
}

// testFullBatch runs the largest batch allowed, which also stretches the
// script's table unpacking to its limit.
func testFullBatch(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(MaxBatch, 1))
	reqs := make([]seckill.ReserveRequest, MaxBatch)
	for i := range reqs {
		reqs[i] = request(sale.ID, "u"+strconv.Itoa(i), 1, "k")
	}
	res, err := s.StockStore().Reserve(ctx, sale.ID, reqs)
	if err != nil {
		t.Fatalf("Reserve of %d requests: %v", MaxBatch, err)
	}
	for i, r := range res {
		if r.Outcome != seckill.OutcomeReserved {
			t.Fatalf("results[%d] = %+v; want reserved", i, r)
		}
	}
	if n, err := s.Outbox().OutboxLen(ctx, sale.ID); err != nil || n != MaxBatch {
		t.Errorf("OutboxLen = %d, %v; want %d", n, err, MaxBatch)
	}
	res, err = s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "late", 1, "")})
	if err != nil || res[0].Outcome != seckill.OutcomeSoldOut {
		t.Errorf("one more = %+v, %v; want sold out", res, err)
	}
}

// testRateChecks: rate limits decided inside the reserve call. The seed's
// numbers, 20 a minute per address: exactly 20 of 100 pass, whichever
// batches (nodes) they come in; a refused request counts against no
// limit and reserves nothing; a changed limit takes effect at once; runs
// of requests with and without checks share a batch.
func testRateChecks(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit))
	perMin := seckill.RateLimit{Rate: 20, Period: time.Minute}
	loose := seckill.RateLimit{Rate: 1_000_000, Period: time.Second}
	ip := "ip:" + servicetest.UniqueName("198.51.100.")
	checks := func(user string, ipLimit seckill.RateLimit) []seckill.RateCheck {
		return []seckill.RateCheck{{Key: ip, Limit: ipLimit}, {Key: "user:" + user, Limit: loose}}
	}
	reserved, limited := 0, 0
	for sent := 0; sent < 100; {
		n := min(1+sent%7, 100-sent) // batches of 1 to 7, as two nodes' combiners would send
		reqs := make([]seckill.ReserveRequest, n)
		for i := range reqs {
			reqs[i] = request(sale.ID, "u"+strconv.Itoa(sent+i), 1, "")
			reqs[i].RateChecks = checks("u"+strconv.Itoa(sent+i), perMin)
		}
		res, err := s.StockStore().Reserve(ctx, sale.ID, reqs)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		for _, r := range res {
			switch r.Outcome {
			case seckill.OutcomeReserved:
				reserved++
			case seckill.OutcomeRateLimited:
				limited++
				if r.RateLimitedBy != 0 || r.RetryAfter <= 0 || r.RetryAfter > 3*time.Second {
					t.Errorf("refusal %+v; want by check 0 (the address), retry in (0, 3s]", r)
				}
			default:
				t.Errorf("outcome %v", r.Outcome)
			}
		}
		sent += n
	}
	if reserved != 20 || limited != 80 {
		t.Fatalf("at 20/1m: %d reserved, %d rate limited of 100; want exactly 20 and 80", reserved, limited)
	}
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 20 {
		t.Errorf("stock level %+v, %v; want 20 reserved (refused requests reserve nothing)", lvl, err)
	}
	// A node already at a raised limit is not held back by the old state.
	req := request(sale.ID, "raised", 1, "")
	req.RateChecks = checks("raised", seckill.RateLimit{Rate: 40, Period: time.Minute})
	if res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{req}); err != nil || res[0].Outcome != seckill.OutcomeReserved {
		t.Errorf("after raising the limit to 40/1m: %+v, %v; want reserved at once", res, err)
	}
	// The same in one batch beside requests still at the old limit: each
	// is counted under its own.
	changed := []seckill.ReserveRequest{request(sale.ID, "old1", 1, ""), request(sale.ID, "new", 1, ""), request(sale.ID, "old2", 1, "")}
	changed[0].RateChecks, changed[2].RateChecks = checks("old1", perMin), checks("old2", perMin)
	changed[1].RateChecks = checks("new", seckill.RateLimit{Rate: 40, Period: time.Minute})
	if res, err := s.StockStore().Reserve(ctx, sale.ID, changed); err != nil || len(res) != 3 || res[0].Outcome != seckill.OutcomeRateLimited ||
		res[1].Outcome != seckill.OutcomeReserved || res[2].Outcome != seckill.OutcomeRateLimited {
		t.Errorf("batch across a limit change = %+v, %v; want limited, reserved, limited", res, err)
	}
	// Mixed: a request without checks between two with them.
	mixed := []seckill.ReserveRequest{request(sale.ID, "m1", 1, ""), request(sale.ID, "m2", 1, ""), request(sale.ID, "m3", 1, "")}
	mixed[0].RateChecks, mixed[2].RateChecks = checks("m1", perMin), checks("m3", perMin)
	res, err := s.StockStore().Reserve(ctx, sale.ID, mixed)
	if err != nil || len(res) != 3 || res[0].Outcome != seckill.OutcomeRateLimited || res[1].Outcome != seckill.OutcomeReserved || res[2].Outcome != seckill.OutcomeRateLimited {
		t.Errorf("mixed batch = %+v, %v; want limited, reserved, limited", res, err)
	}
	bad := request(sale.ID, "bad", 1, "")
	bad.RateChecks = []seckill.RateCheck{{Key: "", Limit: perMin}}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{bad}); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("empty rate key: err %v; want %s", err, seckill.EINVALID)
	}
}

// testRateGenerations: the reserve script keeps each limit's state in
// hashes of two live generations (reserve.lua). A state written in the
// previous generation still counts, also when the current generation's
// hash holds other keys of the batch (the previous one is then read for
// the missing keys only); the current generation's hash expires by the
// end of the next one, so no state outlives two tolerances.
func testRateGenerations(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit)
	mustPreheat(t, s, sale)
	limit := seckill.RateLimit{Rate: 20, Period: time.Minute}
	interval, tol := limit.Interval().Microseconds(), limit.Interval().Microseconds()*20
	base := s.saleRateBase(sale.ID, limit)
	redisMicros := func() int64 {
		t.Helper()
		tm, err := s.client.Do(ctx, s.client.B().Time().Build()).AsStrSlice()
		if err != nil || len(tm) != 2 {
			t.Fatalf("TIME = %v, %v", tm, err)
		}
		sec, _ := strconv.ParseInt(tm[0], 10, 64)
		us, _ := strconv.ParseInt(tm[1], 10, 64)
		return sec*1_000_000 + us
	}
	checked := func(user, key string) seckill.ReserveRequest {
		r := request(sale.ID, user, 1, "")
		r.RateChecks = []seckill.RateCheck{{Key: key, Limit: limit}}
		return r
	}
	for attempt := 0; ; attempt++ {
		// An allowed request makes the current generation's hash, which
		// expires once every state in it is spent.
		ip := "ip:" + servicetest.UniqueName("203.0.113.")
		now := redisMicros()
		g := now / tol
		cur := base + ":" + strconv.FormatInt(g, 10)
		a := strconv.Itoa(attempt)
		if res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{checked("gen-other"+a, ip+"-other")}); err != nil || res[0].Outcome != seckill.OutcomeReserved {
			t.Fatalf("a fresh address: %+v, %v; want reserved", res, err)
		}
		// An address whose burst is spent, as the previous generation
		// wrote it a moment ago, checked in a batch with the address the
		// current generation holds.
		prev := base + ":" + strconv.FormatInt(g-1, 10)
		if err := s.client.Do(ctx, s.client.B().Hset().Key(prev).FieldValue().FieldValue(ip, strconv.FormatInt(now+tol, 10)).Build()).Error(); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{checked("gen-other"+a, ip+"-other"), checked("gen"+a, ip)})
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		if redisMicros()/tol != g {
			if attempt < 3 {
				continue // the generation turned meanwhile: the script read others
			}
			t.Fatal("the generation turned in every attempt")
		}
		if res[0].Outcome != seckill.OutcomeReserved {
			t.Fatalf("the address of the current generation: %+v; want reserved", res[0])
		}
		if res[1].Outcome != seckill.OutcomeRateLimited || res[1].RetryAfter <= 0 || res[1].RetryAfter > time.Duration(interval)*time.Microsecond {
			t.Fatalf("with a spent burst in the previous generation: %+v; want rate limited, retry within %s", res[1], limit.Interval())
		}
		ttl, err := s.client.Do(ctx, s.client.B().Pttl().Key(cur).Build()).AsInt64()
		if err != nil || ttl <= 0 || ttl > 2*tol/1000 {
			t.Fatalf("PTTL %s = %d, %v; want in (0, %d] ms", cur, ttl, err, 2*tol/1000)
		}
		return
	}
}

func testInvalidInput(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(5, 3))
	good := request(sale.ID, "u1", 1, "")
	tests := []struct {
		name   string
		saleID string
		mutate func(r *seckill.ReserveRequest)
	}{
		{"bad sale id", "a{b}", func(r *seckill.ReserveRequest) {}},
		{"id of another sale", sale.ID, func(r *seckill.ReserveRequest) { r.ReservationID = seckill.NewReservationID("other", time.Now()) }},
		{"empty user", sale.ID, func(r *seckill.ReserveRequest) { r.UserID = "" }},
		{"control char in user", sale.ID, func(r *seckill.ReserveRequest) { r.UserID = "a\nb" }},
		{"zero qty", sale.ID, func(r *seckill.ReserveRequest) { r.Qty = 0 }},
		{"negative qty", sale.ID, func(r *seckill.ReserveRequest) { r.Qty = -1 }},
		{"huge qty", sale.ID, func(r *seckill.ReserveRequest) { r.Qty = 1 << 60 }},
		{"key with space", sale.ID, func(r *seckill.ReserveRequest) { r.IdempotencyKey = "a b" }},
		{"long key", sale.ID, func(r *seckill.ReserveRequest) { r.IdempotencyKey = strings.Repeat("k", 129) }},
	}
	for _, tt := range tests {
		r := good
		tt.mutate(&r)
		_, err := s.StockStore().Reserve(ctx, tt.saleID, []seckill.ReserveRequest{good, r})
		if seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("%s: err = %v; want code %s", tt.name, err, seckill.EINVALID)
		}
	}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, make([]seckill.ReserveRequest, MaxBatch+1)); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("batch over MaxBatch: err = %v; want code %s", err, seckill.EINVALID)
	}
	bad := *sale
	bad.ID = servicetest.UniqueName("sale_")
	bad.Stock = 0
	if _, err := s.StockStore().Preheat(ctx, &bad); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("Preheat of stock 0: err = %v; want code %s", err, seckill.EINVALID)
	}
	// Nothing of the refused batches was applied.
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 0 {
		t.Errorf("Stock = %+v, %v; want nothing reserved", lvl, err)
	}
}

// TestClusterSpreadsSales proves the Cluster run is a real one: sales land
// on every master, and each sale's five keys share one slot (the scripts
// would fail with CROSSSLOT otherwise).
func TestClusterSpreadsSales(t *testing.T) {
	c := redistest.StartCluster(t)
	s := connect(t, c.URL())
	ctx := context.Background()
	for range 30 {
		sale := mustPreheat(t, s, liveSale(5, 1))
		res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "u1", 1, "k")})
		if err != nil || res[0].Outcome != seckill.OutcomeReserved {
			t.Fatalf("Reserve = %+v, %v", res, err)
		}
	}
	nodes := s.client.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("client knows %d nodes; want 3", len(nodes))
	}
	for addr, n := range nodes {
		size, err := n.Do(ctx, n.B().Dbsize().Build()).AsInt64()
		if err != nil || size == 0 {
			t.Errorf("node %s: DBSIZE = %d, %v; want keys of some sales on every master", addr, size, err)
		}
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:6379/x"} {
		if s, err := New(ctx, url); err == nil {
			s.Close()
			t.Errorf("New(%s) succeeded; want an error", url)
		}
	}
	for _, p := range []string{"", "a{b", "}"} {
		if s, err := StartEmbedded(ctx, WithKeyPrefix(p)); err == nil {
			s.Close()
			t.Errorf("StartEmbedded(WithKeyPrefix(%q)) succeeded; want an error", p)
		}
	}
}

// TestUnavailable checks that an unreachable or closed Redis surfaces as
// the unavailable code callers answer with 503, not as an internal error.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	s, err := StartEmbedded(ctx)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	addr := s.embedded.Addr()
	s.Close()
	s.Close() // safe twice
	if _, err := New(ctx, "redis://"+addr); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("New on a stopped server: err = %v; want code %s", err, seckill.EUNAVAILABLE)
	}
	if err := s.Ping(ctx); seckill.ErrorCode(err) != seckill.EUNAVAILABLE {
		t.Errorf("Ping on a closed store: err = %v; want code %s", err, seckill.EUNAVAILABLE)
	}
}
