package eventdelivery

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
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
// (maxRemembered events): an event it does not remember (another node
// retries it, the memory was full, the process restarted) goes to every
// route again, a duplicate consumers drop by the event id, never a loss.
type Fanout struct {
	routes   []Route
	attempts *prometheus.CounterVec

	mu   sync.Mutex
	took map[string]routeSet // events some routes took and others not yet
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

// NewFanout delivers to routes, each with its own name. reg, when set,
// takes seckill_order_event_sink_attempts_total{sink, result}.
func NewFanout(reg prometheus.Registerer, routes ...Route) (*Fanout, error) {
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
			Help: "Deliveries of order events attempted by this node, by sink (webhook, nats, rabbitmq) and result (delivered, failed).",
		}, []string{"sink", "result"}),
		took: make(map[string]routeSet),
	}
	for _, r := range routes {
		for _, result := range []string{"delivered", "failed"} {
			f.attempts.WithLabelValues(r.Name, result) // exported at 0 from the start
		}
	}
	if reg != nil {
		reg.MustRegister(f.attempts)
	}
	return f, nil
}

// Deliver sends e to every route that has not taken it yet, one after
// another in the routes' order. Each failure is named by its route.
func (f *Fanout) Deliver(ctx context.Context, e seckill.OrderEvent) error {
	f.mu.Lock()
	took := f.took[e.ID]
	f.mu.Unlock()
	var errs []error
	for i, r := range f.routes {
		if took.has(i) {
			continue
		}
		if err := r.Sink.Deliver(ctx, e); err != nil {
			f.attempts.WithLabelValues(r.Name, "failed").Inc()
			errs = append(errs, fmt.Errorf("%s: %w", r.Name, err))
			continue
		}
		f.attempts.WithLabelValues(r.Name, "delivered").Inc()
		took = took.with(i)
	}
	f.remember(e.ID, took)
	return errors.Join(errs...)
}

// remember keeps which routes took the event until all have.
func (f *Fanout) remember(id string, took routeSet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !took.worthKeeping(len(f.routes)):
		delete(f.took, id)
	case len(f.took) < maxRemembered:
		f.took[id] = took
	default:
		if _, ok := f.took[id]; ok {
			f.took[id] = took
		}
	}
}
