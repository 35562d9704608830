package soldout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stockReserver is a stock store in miniature: per-sale stock, replays by
// idempotency key, and a count of the calls that reached it.
type stockReserver struct {
	mu     sync.Mutex
	left   map[string]int64
	byKey  map[string]string
	qtyOf  map[string]int64 // reservation id -> qty
	calls  map[string]int
	before func() // called on entry, outside the lock, when set
}

func newStock(sales map[string]int64) *stockReserver {
	return &stockReserver{left: sales, byKey: map[string]string{}, qtyOf: map[string]int64{}, calls: map[string]int{}}
}

func (s *stockReserver) Reserve(_ context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	if s.before != nil {
		s.before()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[saleID]++
	if id, ok := s.byKey[req.UserID+"/"+req.IdempotencyKey]; ok && req.IdempotencyKey != "" {
		if s.qtyOf[id] != req.Qty {
			return seckill.ReserveResult{Outcome: seckill.OutcomeKeyReused}, nil
		}
		return seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: id, Qty: req.Qty}, nil
	}
	if s.left[saleID] < req.Qty {
		return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, nil
	}
	s.left[saleID] -= req.Qty
	s.qtyOf[req.ReservationID] = req.Qty
	if req.IdempotencyKey != "" {
		s.byKey[req.UserID+"/"+req.IdempotencyKey] = req.ReservationID
	}
	return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: req.ReservationID, Qty: req.Qty}, nil
}

func (s *stockReserver) count(saleID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[saleID]
}

func (s *stockReserver) restore(saleID string, n int64) {
	s.mu.Lock()
	s.left[saleID] += n
	s.mu.Unlock()
}

type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func reserve(t *testing.T, g *Gate, saleID string, qty int64, key string) seckill.Outcome {
	t.Helper()
	res, err := g.Reserve(context.Background(), saleID, seckill.ReserveRequest{
		ReservationID: seckill.NewReservationID(saleID, time.Now()), UserID: "u", Qty: qty, IdempotencyKey: key,
	})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	return res.Outcome
}

// TestSellOutStopsStockCalls is the point of the gate: after the sale
// sells out the stock store sees no more calls for it until the safety
// interval passes or Clear, while other sales are untouched.
func TestSellOutStopsStockCalls(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 3, "cake": 100})
	clk := newClock()
	g := New(stock, Config{SafetyInterval: time.Second, Now: clk.Now})

	for range 3 {
		if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeReserved {
			t.Fatalf("outcome %s; want reserved", o)
		}
	}
	if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeSoldOut { // the store says so: flag
		t.Fatalf("outcome %s; want sold out", o)
	}
	calls := stock.count("tea")
	for range 1000 {
		if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeSoldOut {
			t.Fatalf("outcome %s; want sold out", o)
		}
		if o := reserve(t, g, "tea", 5, ""); o != seckill.OutcomeSoldOut {
			t.Fatalf("qty 5: outcome %s; want sold out", o)
		}
	}
	if n := stock.count("tea"); n != calls {
		t.Fatalf("stock store calls after sell-out: %d; want none", n-calls)
	}
	if g.Hits() != 2000 {
		t.Fatalf("Hits = %d; want 2000", g.Hits())
	}
	if o := reserve(t, g, "cake", 1, ""); o != seckill.OutcomeReserved || stock.count("cake") != 1 {
		t.Fatalf("another sale: %s after %d calls; want reserved by the store", o, stock.count("cake"))
	}

	// Just before the interval ends: still local.
	clk.Advance(time.Second - time.Nanosecond)
	reserve(t, g, "tea", 1, "")
	if n := stock.count("tea"); n != calls {
		t.Fatalf("stock store called before the safety interval ended")
	}
	// Once it has passed, one request asks again (and re-flags).
	clk.Advance(time.Nanosecond)
	reserve(t, g, "tea", 1, "")
	reserve(t, g, "tea", 1, "")
	if n := stock.count("tea"); n != calls+1 {
		t.Fatalf("stock store calls after the interval: %d; want 1", n-calls)
	}

	// A restore clears the flag at once: the unit is sold, then flagged again.
	stock.restore("tea", 1)
	g.Clear("tea")
	if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeReserved {
		t.Fatalf("after Clear: outcome %s; want reserved", o)
	}
	reserve(t, g, "tea", 1, "") // sold out, from the store
	before := stock.count("tea")
	reserve(t, g, "tea", 1, "")
	if stock.count("tea") != before {
		t.Fatal("not flagged again after selling the restored unit")
	}
}

// TestOnlyQtyOneFlags: "sold out" for two units says nothing about one.
func TestOnlyQtyOneFlags(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 1})
	g := New(stock, Config{Now: newClock().Now})
	for range 3 {
		if o := reserve(t, g, "tea", 2, ""); o != seckill.OutcomeSoldOut {
			t.Fatalf("qty 2: %s; want sold out", o)
		}
	}
	if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeReserved {
		t.Fatalf("qty 1 with one unit left: %s; want reserved (a qty-2 refusal must not flag)", o)
	}
	if stock.count("tea") != 4 {
		t.Fatalf("stock calls = %d; want 4", stock.count("tea"))
	}
}

// TestKeyedRequestsBypassTheFlag: a retry of the request that took the
// last unit gets its reservation back, not "sold out".
func TestKeyedRequestsBypassTheFlag(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 1})
	g := New(stock, Config{Now: newClock().Now})
	if o := reserve(t, g, "tea", 1, "k1"); o != seckill.OutcomeReserved {
		t.Fatalf("first: %s", o)
	}
	if o := reserve(t, g, "tea", 1, ""); o != seckill.OutcomeSoldOut || !g.SoldOut("tea") {
		t.Fatalf("second: %s, flagged %v; want sold out and flagged", o, g.SoldOut("tea"))
	}
	if o := reserve(t, g, "tea", 1, "k1"); o != seckill.OutcomeReplayed {
		t.Fatalf("retry with the same key: %s; want replayed", o)
	}
	if o := reserve(t, g, "tea", 1, "k2"); o != seckill.OutcomeSoldOut {
		t.Fatalf("new key: %s; want sold out", o)
	}
	if stock.count("tea") != 4 || g.Hits() != 0 {
		t.Fatalf("stock calls %d, hits %d; want 4, 0", stock.count("tea"), g.Hits())
	}
}

// TestClearDuringCall: a "sold out" decided before a restore, answered
// after its Clear, must not flag the sale.
func TestClearDuringCall(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 0})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stock.before = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	g := New(stock, Config{Now: newClock().Now})
	done := make(chan seckill.Outcome)
	go func() {
		res, _ := g.Reserve(context.Background(), "tea", seckill.ReserveRequest{ReservationID: seckill.NewReservationID("tea", time.Now()), UserID: "u", Qty: 1})
		done <- res.Outcome
	}()
	<-entered
	g.Clear("tea") // a restore lands while the call is out; its answer may predate it
	close(release)
	if o := <-done; o != seckill.OutcomeSoldOut {
		t.Fatalf("outcome %s; want sold out", o)
	}
	if g.SoldOut("tea") {
		t.Fatal("flagged from an answer that raced a Clear")
	}
}

func TestErrorsAndOtherOutcomesPassThrough(t *testing.T) {
	boom := errors.New("redis down")
	for _, tt := range []struct {
		res seckill.ReserveResult
		err error
	}{
		{seckill.ReserveResult{}, boom},
		{seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, boom},
		{seckill.ReserveResult{Outcome: seckill.OutcomeLimitExceeded}, nil},
		{seckill.ReserveResult{Outcome: seckill.OutcomeNotStarted}, nil},
		{seckill.ReserveResult{Outcome: seckill.OutcomeEnded}, nil},
	} {
		g := New(reserverFunc(func() (seckill.ReserveResult, error) { return tt.res, tt.err }), Config{})
		res, err := g.Reserve(context.Background(), "tea", seckill.ReserveRequest{Qty: 1})
		if res != tt.res || err != tt.err {
			t.Errorf("Reserve = %+v, %v; want %+v, %v", res, err, tt.res, tt.err)
		}
		if g.SoldOut("tea") {
			t.Errorf("%+v, %v flagged the sale", tt.res, tt.err)
		}
	}
}

type reserverFunc func() (seckill.ReserveResult, error)

func (f reserverFunc) Reserve(context.Context, string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return f()
}

// TestWallClockJumpBack: a flag whose expiry is further away than the
// interval can only come from a clock that went back; it is dropped.
func TestWallClockJumpBack(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 0})
	clk := newClock()
	g := New(stock, Config{Now: clk.Now})
	reserve(t, g, "tea", 1, "")
	if !g.SoldOut("tea") {
		t.Fatal("not flagged")
	}
	clk.Advance(-time.Hour)
	if g.SoldOut("tea") {
		t.Fatal("a flag survived the clock going back an hour")
	}
}

// TestAnswerSoldOutAt: a Gate on the wall clock judges the flag at the
// caller's time (no clock read of its own) unless that time is older than
// the flag, and counts a local answer only when it gives one; a Gate on a
// clock of its own ignores the caller's time.
func TestAnswerSoldOutAt(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 0})
	g := New(stock, Config{SafetyInterval: time.Minute})
	for _, c := range []struct {
		name string
		at   time.Duration // from the flagging
		want bool
	}{
		{"at once", 0, true},
		{"within the interval", 30 * time.Second, true},
		{"past the interval", 2 * time.Minute, false},
		// Read before the flag was set (a request that started before
		// another flagged the sale again): judged by the Gate's clock,
		// and the flag is kept.
		{"the caller's time is older than the flag", -2 * time.Minute, true},
	} {
		reserve(t, g, "tea", 1, "")
		hits := g.Hits()
		if got := g.AnswerSoldOutAt("tea", time.Now().Add(c.at)); got != c.want {
			t.Fatalf("%s: AnswerSoldOutAt = %v, want %v", c.name, got, c.want)
		}
		if n := g.Hits() - hits; (n == 1) != c.want {
			t.Fatalf("%s: %d local answers counted, want one per sold-out answer", c.name, n)
		}
		if g.SoldOut("tea") != c.want {
			t.Fatalf("%s: the flag is kept %v, want %v", c.name, !c.want, c.want)
		}
	}
	// The stampede's case: requests read the clock, then one of them
	// flags the sale again (until = its own now + the interval) before
	// the others look. Their times are older than the flag by a little;
	// the flag holds for them all, and none drops it.
	quick := New(stock, Config{SafetyInterval: 50 * time.Millisecond})
	reserve(t, quick, "tea", 1, "")
	started := time.Now()
	time.Sleep(5 * time.Millisecond)
	reserve(t, quick, "tea", 1, "") // flags again, as the first of a wave
	for range 3 {
		if !quick.AnswerSoldOutAt("tea", started) {
			t.Fatal("a request that read the clock just before the sale was flagged again was not answered sold out")
		}
	}
	if !quick.SoldOut("tea") {
		t.Fatal("a request's older time dropped the flag")
	}
	if g.AnswerSoldOutAt("cake", time.Now()) {
		t.Fatal("a sale never flagged was answered sold out")
	}

	clk := newClock()
	own := New(stock, Config{Now: clk.Now})
	reserve(t, own, "tea", 1, "")
	if !own.AnswerSoldOutAt("tea", clk.Now().Add(time.Hour)) {
		t.Fatal("a Gate on its own clock judged the flag by the caller's time")
	}
	clk.Advance(2 * DefaultSafetyInterval)
	if own.AnswerSoldOutAt("tea", clk.Now().Add(-2*DefaultSafetyInterval)) {
		t.Fatal("a Gate on its own clock judged the flag by the caller's time")
	}
}

func TestMetrics(t *testing.T) {
	stock := newStock(map[string]int64{"tea": 0, "cake": 0, "pie": 5})
	clk := newClock()
	g := New(stock, Config{Now: clk.Now})
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	for _, sale := range []string{"tea", "tea", "tea", "cake", "pie"} {
		reserve(t, g, sale, 1, "")
	}
	if got := gather(t, reg); got["seckill_soldout_local_answers_total"] != 2 || got["seckill_soldout_flagged_sales"] != 2 {
		t.Fatalf("metrics %v; want 2 local answers, 2 flagged sales", got)
	}
	if got := gatherFlags(t, reg); len(got) != 2 || got["tea"] != 1 || got["cake"] != 1 {
		t.Fatalf("seckill_soldout_flag %v; want tea and cake at 1, pie absent (never sold out)", got)
	}
	g.Clear("cake")
	if got := gatherFlags(t, reg); len(got) != 2 || got["tea"] != 1 || got["cake"] != 0 {
		t.Fatalf("seckill_soldout_flag after clearing cake %v; want tea 1, cake 0", got)
	}
	clk.Advance(DefaultSafetyInterval)
	if got := gather(t, reg); got["seckill_soldout_local_answers_total"] != 2 || got["seckill_soldout_flagged_sales"] != 0 {
		t.Fatalf("metrics after the safety interval %v; want 2 local answers, 0 flagged sales", got)
	}
	if got := gatherFlags(t, reg); len(got) != 2 || got["tea"] != 0 || got["cake"] != 0 {
		t.Fatalf("seckill_soldout_flag after the safety interval %v; want tea and cake at 0", got)
	}
}

// gatherFlags returns the per-sale seckill_soldout_flag gauge by sale.
func gatherFlags(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return gatherBy(t, reg, "seckill_soldout_flag", "sale")
}

// gather returns each metric family's value (counter or gauge) by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return gatherBy(t, reg, "", "")
}

// gatherBy returns the values (counter or gauge) of reg's metrics of the
// family named family (every family if ""), each keyed by its label's
// value, or by its family's name where label is "" or absent.
func gatherBy(t *testing.T, reg *prometheus.Registry, family, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if family != "" && mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if label != "" && l.GetName() == label {
					key = l.GetValue()
				}
			}
			out[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// TestStampede: many buyers at once; exactly the stock is reserved, and
// once the sale is flagged only the calls already out reach the store.
func TestStampede(t *testing.T) {
	const buyers, each, units = 32, 100, 10
	stock := newStock(map[string]int64{"tea": units})
	g := New(stock, Config{Now: newClock().Now})
	var reserved atomic.Int64
	var wg sync.WaitGroup
	for range buyers {
		wg.Go(func() {
			for range each {
				res, err := g.Reserve(context.Background(), "tea", seckill.ReserveRequest{ReservationID: "x", UserID: "u", Qty: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Outcome == seckill.OutcomeReserved {
					reserved.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if reserved.Load() != units {
		t.Fatalf("reserved %d; want %d", reserved.Load(), units)
	}
	if n := stock.count("tea"); n > units+2*buyers {
		t.Fatalf("%d stock calls for %d requests; want at most %d", n, buyers*each, units+2*buyers)
	}
	if int(g.Hits())+stock.count("tea") != buyers*each {
		t.Fatalf("hits %d + stock calls %d != %d requests", g.Hits(), stock.count("tea"), buyers*each)
	}
}
