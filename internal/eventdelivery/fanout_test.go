package eventdelivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// routeSink records the events it took and fails while down.
type routeSink struct {
	mu   sync.Mutex
	down bool
	got  []string
}

func (s *routeSink) Deliver(_ context.Context, e seckill.OrderEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("connection refused")
	}
	s.got = append(s.got, e.ID)
	return nil
}

func (s *routeSink) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

func (s *routeSink) took() []string { s.mu.Lock(); defer s.mu.Unlock(); return slices.Clone(s.got) }

func TestRouteSetWorthKeeping(t *testing.T) {
	for _, c := range []struct {
		set    routeSet
		routes int
		want   bool
	}{
		{0, 1, false},
		{0b1, 1, false},  // the only route took it
		{0, 3, false},    // nothing took it: every route is tried again anyway
		{0b001, 3, true}, // the first took it
		{0b101, 3, true},
		{0b111, 3, false}, // all took it
		{1<<64 - 1, 64, false},
		{1<<63 - 1, 64, true},
	} {
		if got := c.set.worthKeeping(c.routes); got != c.want {
			t.Errorf("%b of %d routes: worthKeeping = %v, want %v", c.set, c.routes, got, c.want)
		}
	}
}

// TestFanoutRetriesOnlyTheRoutesThatFailed: while the webhook is down, a
// broker that took an event is not sent it again at every retry, the
// error names the failing route, and each route's attempts are counted.
func TestFanoutRetriesOnlyTheRoutesThatFailed(t *testing.T) {
	ctx := context.Background()
	hook, broker := &routeSink{}, &routeSink{}
	reg := prometheus.NewRegistry()
	f, err := NewFanout(FanoutConfig{Registerer: reg}, Route{"webhook", hook}, Route{"rabbitmq", broker})
	if err != nil {
		t.Fatal(err)
	}
	e1, e2 := seckill.OrderEvent{ID: "e1"}, seckill.OrderEvent{ID: "e2"}

	hook.setDown(true)
	for range 3 {
		err := f.Deliver(ctx, e1)
		if err == nil || !strings.HasPrefix(err.Error(), "webhook: ") || strings.Contains(err.Error(), "rabbitmq") {
			t.Fatalf("delivery with the webhook down: %v, want an error naming the webhook alone", err)
		}
	}
	if got := broker.took(); !slices.Equal(got, []string{"e1"}) {
		t.Fatalf("the broker took %v over three attempts, want e1 once", got)
	}
	hook.setDown(false)
	if err := f.Deliver(ctx, e1); err != nil {
		t.Fatal(err)
	}
	if err := f.Deliver(ctx, e2); err != nil {
		t.Fatal(err)
	}
	if got := hook.took(); !slices.Equal(got, []string{"e1", "e2"}) {
		t.Errorf("the webhook took %v, want e1 e2", got)
	}
	if got := broker.took(); !slices.Equal(got, []string{"e1", "e2"}) {
		t.Errorf("the broker took %v, want e1 e2", got)
	}
	if n := len(f.took); n != 0 {
		t.Errorf("%d events still remembered after every route took them", n)
	}
	// Delivered in full, an event is forgotten: a later attempt of it
	// (another deliverer's lease ran out) goes to every route again.
	if err := f.Deliver(ctx, e1); err != nil {
		t.Fatal(err)
	}
	if got := broker.took(); len(got) != 3 {
		t.Errorf("the broker took %v, want a third delivery", got)
	}

	for _, c := range []struct {
		sink, result string
		want         float64
	}{
		{"webhook", "failed", 3}, {"webhook", "delivered", 3},
		{"rabbitmq", "failed", 0}, {"rabbitmq", "delivered", 3},
	} {
		// Labels in name order: result, then sink.
		if got := counterValue(t, reg, "seckill_order_event_sink_attempts_total", c.result, c.sink); got != c.want {
			t.Errorf("attempts{sink=%s, result=%s} = %v, want %v", c.sink, c.result, got, c.want)
		}
	}
}

// TestFanoutMemoryIsBounded: past maxRemembered partly delivered events,
// a new one takes the place of one of them: the memory stays at its
// bound, the new event's retry does not go to the broker again, and of
// the others exactly one is forgotten, whose retry goes to every route (a
// duplicate, not a loss).
func TestFanoutMemoryIsBounded(t *testing.T) {
	ctx := context.Background()
	hook, broker := &routeSink{down: true}, &routeSink{}
	f, err := NewFanout(FanoutConfig{}, Route{"webhook", hook}, Route{"nats", broker})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxRemembered {
		if f.Deliver(ctx, seckill.OrderEvent{ID: fmt.Sprint("e", i)}) == nil {
			t.Fatal("delivered with the webhook down")
		}
	}
	if len(f.took) != maxRemembered {
		t.Fatalf("%d remembered, want %d", len(f.took), maxRemembered)
	}
	_ = f.Deliver(ctx, seckill.OrderEvent{ID: "over"})
	if len(f.took) != maxRemembered {
		t.Errorf("%d remembered, want the bound %d", len(f.took), maxRemembered)
	}
	hook.setDown(false)
	if err := f.Deliver(ctx, seckill.OrderEvent{ID: "over"}); err != nil {
		t.Fatal(err)
	}
	for i := range maxRemembered {
		if err := f.Deliver(ctx, seckill.OrderEvent{ID: fmt.Sprint("e", i)}); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[string]int{}
	for _, id := range broker.took() {
		counts[id]++
	}
	if counts["over"] != 1 {
		t.Errorf("the broker took the newest event %d times, want once", counts["over"])
	}
	twice := 0
	for id, n := range counts {
		if n == 2 {
			twice++
		} else if n != 1 {
			t.Errorf("the broker took %s %d times", id, n)
		}
	}
	if twice != 1 {
		t.Errorf("%d earlier events went to the broker again, want the one pushed out", twice)
	}
	if len(f.took) != 0 {
		t.Errorf("%d events still remembered after every route took them", len(f.took))
	}
}

func TestNewFanoutRefusesBadRoutes(t *testing.T) {
	s := &routeSink{}
	for name, routes := range map[string][]Route{
		"none":      nil,
		"no name":   {{"", s}},
		"no sink":   {{"webhook", nil}},
		"same name": {{"nats", s}, {"nats", s}},
	} {
		if _, err := NewFanout(FanoutConfig{}, routes...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewFanout(FanoutConfig{}, Route{"webhook", s}); err != nil {
		t.Errorf("one route: %v", err)
	}
}

// hangSink never answers while hung: a delivery waits out its context,
// as one to a blackholed webhook does. It counts the deliveries it was
// given.
type hangSink struct {
	mu    sync.Mutex
	hung  bool
	calls int
}

func (s *hangSink) Deliver(ctx context.Context, _ seckill.OrderEvent) error {
	s.mu.Lock()
	s.calls++
	hung := s.hung
	s.mu.Unlock()
	if hung {
		<-ctx.Done()
		return fmt.Errorf("post: %w", ctx.Err())
	}
	return nil
}

func (s *hangSink) set(hung bool) { s.mu.Lock(); s.hung = hung; s.mu.Unlock() }

func (s *hangSink) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls }

// ctxSink is a healthy broker that fails a delivery whose context is
// over, as a real one does.
type ctxSink struct{ routeSink }

func (s *ctxSink) Deliver(ctx context.Context, e seckill.OrderEvent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.routeSink.Deliver(ctx, e)
}

// TestFanoutAHungRouteCostsTheOthersNothing: with the webhook hung, the
// broker still takes every event within the delivery's deadline; after
// routeThreshold timeouts in a row the webhook is not tried (skipped, the
// error says why) until routeOpenFor has passed, then one delivery probes
// it (and a probe that times out stops the tries again), and once it
// answers every delivery goes to it again. The log says so once each way.
func TestFanoutAHungRouteCostsTheOthersNothing(t *testing.T) {
	hook, broker := &hangSink{hung: true}, &ctxSink{}
	reg := prometheus.NewRegistry()
	var logs strings.Builder
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	later := func() { clock.Lock(); now = now.Add(routeOpenFor); clock.Unlock() }
	f, err := NewFanout(FanoutConfig{Registerer: reg, Logger: logger, Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now }},
		Route{"webhook", hook}, Route{"rabbitmq", broker})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return f.Deliver(ctx, seckill.OrderEvent{ID: id})
	}
	const events = routeThreshold + 3
	for i := range events {
		err := deliver(fmt.Sprint("e", i))
		if err == nil || !strings.HasPrefix(err.Error(), "webhook: ") {
			t.Fatalf("event %d with the webhook hung: %v; want the webhook's failure", i, err)
		}
		if i >= routeThreshold && !strings.Contains(err.Error(), "not tried") {
			t.Errorf("event %d: %v; want the webhook not tried after %d timeouts", i, err, routeThreshold)
		}
	}
	if n := hook.count(); n != routeThreshold {
		t.Errorf("the hung webhook was given %d deliveries, want %d", n, routeThreshold)
	}
	if got := broker.took(); len(got) != events {
		t.Errorf("the broker took %v; want every event", got)
	}
	later()
	if err := deliver("probe"); err == nil || strings.Contains(err.Error(), "not tried") || hook.count() != routeThreshold+1 {
		t.Errorf("after routeOpenFor: %v, %d deliveries; want one probe, timing out", err, hook.count())
	}
	hook.set(false)
	if err := deliver("e0"); err == nil || hook.count() != routeThreshold+1 {
		t.Errorf("after the probe timed out: %v, %d deliveries; want the webhook skipped again", err, hook.count())
	}
	later()
	for i := range events {
		if err := deliver(fmt.Sprint("e", i)); err != nil {
			t.Errorf("event %d once the webhook answers: %v", i, err)
		}
	}
	if n := hook.count(); n != routeThreshold+1+events {
		t.Errorf("the webhook was given %d deliveries, want %d", n, routeThreshold+1+events)
	}
	if got := broker.took(); len(got) != events+1 {
		t.Errorf("the broker took %d events; want each once", len(got))
	}
	for _, c := range []struct {
		result string
		want   float64
	}{{"failed", routeThreshold + 1}, {"skipped", 4}, {"delivered", events}} {
		if got := counterValue(t, reg, "seckill_order_event_sink_attempts_total", c.result, "webhook"); got != c.want {
			t.Errorf("attempts{sink=webhook, result=%s} = %v, want %v", c.result, got, c.want)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if w, i := strings.Count(logs.String(), "keeps timing out"), strings.Count(logs.String(), "answers again"); w != 1 || i != 1 {
		t.Errorf("the log said the webhook keeps timing out %d times and answers again %d times, want once each:\n%s", w, i, logs.String())
	}
}

// lockedWriter serialises a log's writes.
type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestFanoutRefusalsKeepTrying: a route that answers with an error, even
// every time, is tried at every delivery: only timeouts stop the tries.
func TestFanoutRefusalsKeepTrying(t *testing.T) {
	hook := &routeSink{down: true}
	f, err := NewFanout(FanoutConfig{}, Route{"webhook", hook})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 * routeThreshold {
		if err := f.Deliver(context.Background(), seckill.OrderEvent{ID: fmt.Sprint("e", i)}); err == nil || strings.Contains(err.Error(), "not tried") {
			t.Fatalf("event %d: %v; want the webhook tried and failing", i, err)
		}
	}
	hook.setDown(false)
	if err := f.Deliver(context.Background(), seckill.OrderEvent{ID: "last"}); err != nil {
		t.Fatalf("once the webhook answers: %v", err)
	}
}
