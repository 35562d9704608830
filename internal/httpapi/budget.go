package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
)

// Every request has a budget: the handler's context ends when it is spent,
// and with it every backend call the handler makes (Redis, the database,
// the combiner's wait), so a backend that is down or silent costs a buyer
// at most the budget, then a 503 unavailable with Retry-After. The server's
// WriteTimeout does not do this: it cuts the connection but leaves the
// handler waiting.

// DefaultBudget is the budget of a route with none of its own: small
// enough that, with the answer written after it, every request is answered
// within about 3 s whatever is down.
const DefaultBudget = 2 * time.Second

// routeNames are the short names of routes in configuration
// (Config.RouteBudgets, --route-budgets). A route not named here takes
// Config.Budget.
var routeNames = map[string]string{
	"POST /admin/v1/sales":                       "create_sale",
	"GET /admin/v1/sales/{id}":                   "admin_sale",
	"POST /admin/v1/sales/{id}/preheat":          "preheat",
	"GET /api/v1/sales/{id}":                     "sale",
	"POST /api/v1/sales/{id}/reservations":       "reserve",
	enterPattern:                                 "enter",
	"GET /readyz":                                "readyz",
	"GET /api/v1/reservations/{id}":              "reservation",
	"POST /api/v1/reservations/{id}/pay":         "pay",
	"POST /api/v1/reservations/{id}/cancel":      "cancel",
	"GET /admin/v1/failed-orders":                "failed_orders",
	"GET /admin/v1/failed-orders/counts":         "failed_order_counts",
	"POST /admin/v1/restores":                    "restore",
	"GET /admin/v1/restores":                     "restores",
	"GET /admin/v1/sales/{id}/reconciliation":    "reconciliation",
	"GET /admin/v1/order-events":                 "order_events",
	"POST /admin/v1/order-events/{id}/redeliver": "redeliver_order_event",
	"POST /webhooks/v1/payments":                 "payment_webhook",
	"POST /admin/v1/orders/{order_id}/payments":  "service_payment",
	"GET /admin/v1/sales/{id}/orders":            "sale_orders",
	"GET /admin/v1/payments":                     "payments",
	"GET /metrics":                               "metrics",
}

// unbudgeted routes run as long as they need: profiles take seconds by
// design, and liveness must not depend on a clock.
var unbudgeted = map[string]bool{
	"GET " + pprofPrefix:  true,
	"POST " + pprofPrefix: true,
	"GET /healthz":        true,
}

// DefaultRouteBudgets are the routes whose default differs from
// DefaultBudget. The reconciliation compares both ledgers of a sale
// reservation by reservation, about 2-3 s per 100,000 reservations: two
// minutes fit a sale of several million.
var DefaultRouteBudgets = map[string]time.Duration{
	"reconciliation": ReconciliationBudget,
}

// ReconciliationBudget is the reconciliation route's default budget.
const ReconciliationBudget = 2 * time.Minute

// longBudget is the budget beyond which a route's write deadline is moved
// to its budget plus writeMargin: the HTTP server's WriteTimeout (30 s in
// serve) would otherwise cut the connection before a long route answers.
const (
	longBudget  = 10 * time.Second
	writeMargin = 10 * time.Second
)

// RouteNames lists the names RouteBudgets accepts.
func RouteNames() []string {
	names := make([]string, 0, len(routeNames))
	for _, n := range routeNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseRouteBudgets reads "name=duration,name=duration" (names from
// RouteNames). An empty string is no overrides.
func ParseRouteBudgets(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	known := map[string]bool{}
	for _, n := range routeNames {
		known[n] = true
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, d, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || !known[name] {
			return nil, fmt.Errorf("route budget %q: want name=duration, name one of %s", part, strings.Join(RouteNames(), ", "))
		}
		dur, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || dur <= 0 {
			return nil, fmt.Errorf("route budget %q: want a positive duration such as 1500ms", part)
		}
		out[name] = dur
	}
	return out, nil
}

// budgetOf returns the budget of a route pattern; 0 means none.
func (s *Server) budgetOf(pattern string) time.Duration {
	if unbudgeted[pattern] {
		return 0
	}
	if name, ok := routeNames[pattern]; ok {
		return RouteBudget(name, s.routeBudgets, s.budget)
	}
	return s.budget
}

// RouteBudget is the budget of the route named name (RouteNames): its
// override in overrides, else its default (DefaultRouteBudgets), else
// budget. The work a route hands to others (a combiner's batch call) takes
// the route's budget too.
func RouteBudget(name string, overrides map[string]time.Duration, budget time.Duration) time.Duration {
	if d, ok := overrides[name]; ok {
		return d
	}
	if d, ok := DefaultRouteBudgets[name]; ok {
		return d
	}
	return budget
}

// errBudgetSpent is the cause of a request context ended by its budget,
// which tells it apart from a client that hung up.
var errBudgetSpent = errors.New("request budget spent")

// errBackendSlow answers a request whose backend did not answer within
// the budget (or its own deadline).
var errBackendSlow = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "A backend did not answer in time; retry later."}

// withBudget returns ctx bounded by d from start (none when d is 0). The
// deadline's timer is made only when something waits on the context (a
// backend call, or a context derived from it): a request answered from
// memory, such as a sold-out sale's, pays for neither the timer nor its
// place among the parent's children.
func withBudget(ctx context.Context, start time.Time, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	b := &lazyBudget{parent: ctx, deadline: start.Add(d)}
	return b, b.stop
}

// lazyBudget is context.WithDeadlineCause(parent, deadline, errBudgetSpent)
// made on first need: Done, Err, and Value once the deadline has passed or
// the budget was stopped (context.Cause reads the cause through Value), all
// answer from the made context. Before that, the made context would say
// what parent says, so Value asks parent.
type lazyBudget struct {
	parent   context.Context
	deadline time.Time
	made     atomic.Bool
	stopped  atomic.Bool

	mu     sync.Mutex
	ctx    context.Context // guarded by mu; set once
	cancel context.CancelFunc
}

func (b *lazyBudget) make() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		b.ctx, b.cancel = context.WithDeadlineCause(b.parent, b.deadline, errBudgetSpent)
		if b.stopped.Load() {
			b.cancel()
		}
		b.made.Store(true)
	}
	return b.ctx
}

// stop is the CancelFunc: it ends the made context, or the one made later.
func (b *lazyBudget) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped.Store(true)
	if b.cancel != nil {
		b.cancel()
	}
}

func (b *lazyBudget) Deadline() (time.Time, bool) {
	if d, ok := b.parent.Deadline(); ok && d.Before(b.deadline) {
		return d, true
	}
	return b.deadline, true
}

func (b *lazyBudget) Done() <-chan struct{} { return b.make().Done() }

func (b *lazyBudget) Err() error { return b.make().Err() }

func (b *lazyBudget) Value(key any) any {
	if b.made.Load() || b.stopped.Load() || !time.Now().Before(b.deadline) {
		return b.make().Value(key)
	}
	return b.parent.Value(key)
}

func (b *lazyBudget) String() string { return "httpapi.withBudget(" + b.deadline.String() + ")" }

// clientGone reports whether the request's context ended because the
// client went away (or the server is closing it), not because its budget
// ran out.
func clientGone(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), errBudgetSpent)
}

// timedOut turns an error that is a spent deadline (the request's budget,
// or a backend call's own) into the outage answer; other errors are
// returned as they are.
func timedOut(ctx context.Context, err error) error {
	if seckill.ErrorCode(err) != seckill.EINTERNAL {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), errBudgetSpent) {
		return fmt.Errorf("%w: %w", errBackendSlow, err)
	}
	return err
}
