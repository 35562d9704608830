package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
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
	"POST /admin/v1/sales":                    "create_sale",
	"GET /admin/v1/sales/{id}":                "admin_sale",
	"POST /admin/v1/sales/{id}/preheat":       "preheat",
	"GET /api/v1/sales/{id}":                  "sale",
	"POST /api/v1/sales/{id}/reservations":    "reserve",
	"GET /readyz":                             "readyz",
	"GET /api/v1/reservations/{id}":           "reservation",
	"POST /api/v1/reservations/{id}/pay":      "pay",
	"POST /api/v1/reservations/{id}/cancel":   "cancel",
	"GET /admin/v1/failed-orders":             "failed_orders",
	"POST /admin/v1/restores":                 "restore",
	"GET /admin/v1/restores":                  "restores",
	"GET /admin/v1/sales/{id}/reconciliation": "reconciliation",
	"GET /metrics":                            "metrics",
}

// unbudgeted routes run as long as they need: profiles take seconds by
// design, and liveness must not depend on a clock.
var unbudgeted = map[string]bool{
	"GET " + pprofPrefix:  true,
	"POST " + pprofPrefix: true,
	"GET /healthz":        true,
}

// DefaultRouteBudgets are the routes whose default differs from
// DefaultBudget. The reconciliation reads both ledgers of a sale.
var DefaultRouteBudgets = map[string]time.Duration{
	"reconciliation": 2500 * time.Millisecond,
}

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
		if d, ok := s.routeBudgets[name]; ok {
			return d
		}
		if d, ok := DefaultRouteBudgets[name]; ok {
			return d
		}
	}
	return s.budget
}

// errBudgetSpent is the cause of a request context ended by its budget,
// which tells it apart from a client that hung up.
var errBudgetSpent = errors.New("request budget spent")

// errBackendSlow answers a request whose backend did not answer within
// the budget (or its own deadline).
var errBackendSlow = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "A backend did not answer in time; retry later."}

// withBudget returns ctx bounded by d (none when d is 0).
func withBudget(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, d, errBudgetSpent)
}

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
