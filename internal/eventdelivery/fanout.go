package eventdelivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/breaker"
)

// Route is one of the shop's sinks, named for the metrics.
type Route struct {
	Name string // webhook, nats, rabbitmq
	Sink Sink
}

// Fanout delivers each event to every route: the event is delivered once
// all have taken it, and a failure at one fails the attempt.
//
// When some routes take an event and another fails, the Fanout remembers
// which took it, and the next attempt goes to the others only: a webhook
// down for an hour does not cost a healthy broker a copy of every pending
// event at every retry. The memory is this process's and bounded
// (maxRemembered events; when it is full, a new event takes the place of
// one picked at random, so events that were dead-lettered or delivered by
// another node cannot fill it for good): an event it does not remember
// (another node retries it, it was pushed out, the process restarted)
// goes to every route again, a duplicate consumers drop by the event id,
// never a loss.
//
// A route that does not answer costs the others nothing: an event goes to
// its routes at once, each within the delivery's whole deadline, and a
// route whose deliveries time out routeThreshold times in a row is not
// tried for routeOpenFor, then with one delivery (internal/breaker). Its
// events fail at once meanwhile, and the outbox retries them as it
// retries those of a sink that refuses connections, so a blackholed
// webhook holds up a healthy broker no more than a webhook that is down.
type Fanout struct {
	routes   []Route
	breakers []*breaker.Breaker
	attempts *prometheus.CounterVec

	mu   sync.Mutex
	took map[string]routeSet // events some routes took and others not yet
}

const (
	// routeThreshold is how many deliveries to a route must time out in a
	// row (or fail as unavailable) before it is not tried for routeOpenFor.
	routeThreshold = 3
	routeOpenFor   = 5 * time.Second
)

// FanoutConfig is what a Fanout reports to: reg, when set, takes
// seckill_order_event_sink_attempts_total{sink, result}, and Logger is
// told when a route stops being tried and when it is tried again. Now is
// the clock of the routes' breakers (time.Now when nil).
type FanoutConfig struct {
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
}

// maxRemembered bounds the events a Fanout remembers as partly delivered.
const maxRemembered = 1 << 16

// routeSet is a set of routes by their index in the Fanout.
type routeSet uint64

func (s routeSet) has(i int) bool      { return s&(1<<i) != 0 }
func (s routeSet) with(i int) routeSet { return s | 1<<i }

// worthKeeping reports whether a Fanout of n routes remembers s: some
// took the event, and not all.
func (s routeSet) worthKeeping(n int) bool { return s != 0 && s != 1<<n-1 }

// NewFanout delivers to routes, each with its own name.
func NewFanout(cfg FanoutConfig, routes ...Route) (*Fanout, error) {
	if len(routes) == 0 || len(routes) > 64 {
		return nil, fmt.Errorf("event delivery: %d routes, want 1 to 64", len(routes))
	}
	seen := make(map[string]bool, len(routes))
	for _, r := range routes {
		if r.Name == "" || r.Sink == nil || seen[r.Name] {
			return nil, fmt.Errorf("event delivery: route %q: want a sink and a name of its own", r.Name)
		}
		seen[r.Name] = true
	}
	f := &Fanout{
		routes: routes,
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_order_event_sink_attempts_total",
			Help: "Deliveries of order events by this node, by sink (webhook, nats, rabbitmq) and result (delivered, failed, " +
				"skipped: not tried, since the sink's last deliveries timed out).",
		}, []string{"sink", "result"}),
		took: make(map[string]routeSet),
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for _, r := range routes {
		for _, result := range []string{"delivered", "failed", "skipped"} {
			f.attempts.WithLabelValues(r.Name, result) // exported at 0 from the start
		}
		failing := false // guarded by the breaker's lock, which OnState runs under
		f.breakers = append(f.breakers, breaker.New(breaker.Config{
			Name: r.Name, Threshold: routeThreshold, OpenFor: routeOpenFor, Now: cfg.Now,
			OnState: func(name string, st breaker.State) {
				switch {
				case st == breaker.Open && !failing: // not again at each failed probe
					failing = true
					logger.Warn("order events: a sink keeps timing out; its deliveries are skipped and retried later, "+
						"with one delivery every few seconds until it answers", "sink", name, "every", routeOpenFor)
				case st == breaker.Closed && failing:
					failing = false
					logger.Info("order events: a sink answers again", "sink", name)
				}
			},
		}))
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(f.attempts)
	}
	return f, nil
}

// Deliver sends e to every route that has not taken it yet, all at once.
// Each failure is named by its route, in the routes' order.
func (f *Fanout) Deliver(ctx context.Context, e seckill.OrderEvent) error {
	f.mu.Lock()
	took := f.took[e.ID]
	f.mu.Unlock()
	errs := make([]error, len(f.routes))
	if len(f.routes) == 1 {
		errs[0] = f.deliverTo(ctx, 0, e)
	} else {
		var wg sync.WaitGroup
		for i := range f.routes {
			if !took.has(i) {
				wg.Go(func() { errs[i] = f.deliverTo(ctx, i, e) })
			}
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err == nil && !took.has(i) {
			took = took.with(i)
		}
	}
	f.remember(e.ID, took)
	return errors.Join(errs...)
}

// deliverTo makes one attempt of e at route i, through its breaker.
func (f *Fanout) deliverTo(ctx context.Context, i int, e seckill.OrderEvent) error {
	r := f.routes[i]
	done, err := f.breakers[i].Allow()
	if err != nil {
		f.attempts.WithLabelValues(r.Name, "skipped").Inc()
		return fmt.Errorf("%s: not tried: its last %d deliveries timed out", r.Name, routeThreshold)
	}
	err = r.Sink.Deliver(ctx, e)
	done(err)
	if err != nil {
		f.attempts.WithLabelValues(r.Name, "failed").Inc()
		return fmt.Errorf("%s: %w", r.Name, err)
	}
	f.attempts.WithLabelValues(r.Name, "delivered").Inc()
	return nil
}

// remember keeps which routes took the event until all have.
func (f *Fanout) remember(id string, took routeSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !took.worthKeeping(len(f.routes)) {
		delete(f.took, id)
		return
	}
	if _, ok := f.took[id]; !ok && len(f.took) >= maxRemembered {
		for old := range f.took { // Go's maps start each range at random
			delete(f.took, old)
			break
		}
	}
	f.took[id] = took
}
