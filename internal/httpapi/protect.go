package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ttlcache"
)

// Defaults of the protection in front of the reservation route. The IP
// and user limits apply only when Config sets them (the zero Limit is
// off); these are the values cmd/seckill starts from.
const DefaultMaxInFlight = 2048

var (
	DefaultRateLimitIP   = seckill.RateLimit{Rate: 20, Period: time.Minute}
	DefaultRateLimitUser = seckill.RateLimit{Rate: 10, Period: time.Minute}
)

// rateLimitTimeout bounds one limiter call. Past it the request goes on
// unlimited (see guard.check): a slow Redis must not become a slow API.
const rateLimitTimeout = 250 * time.Millisecond

// failOpenLogEvery spaces out the warning logged while the limiter fails,
// so an outage is one line every few seconds, not one per request.
const failOpenLogEvery = 10 * time.Second

var (
	errRateLimited = newStaticError(seckill.ERATELIMITED, "Too many requests; retry after the time in Retry-After.")
	errOverloaded  = newStaticError(seckill.EOVERLOADED, "The server is busy; retry after the time in Retry-After.")
)

// guard is the protection in front of the reservation route, in the order
// it applies: a cap on requests in flight, the per-IP limit, then (after
// the buyer's token is verified) the per-user limit. All of it runs
// before the body is read or any stock logic runs.
//
// When the limiter fails (Redis unreachable or slow), requests are let
// through: availability over strictness. The in-flight cap still bounds
// the load, and the per-user purchase limit in the stock store still
// bounds what any one buyer can claim; the limits only spread a crowd out.
// Failures are counted (seckill_rate_limit_errors_total) and logged at
// most every failOpenLogEvery.
type guard struct {
	limiter     seckill.RateLimiter
	inReserve   bool // the limits go to the Reserver as rate checks
	ip, user    rule
	trusted     []netip.Prefix
	maxInFlight int64 // 0: no cap
	now         func() time.Time
	logger      *slog.Logger

	inFlight      atomic.Int64
	blocked       *blockList
	lastWarn      atomic.Int64 // Unix nanoseconds of the last fail-open warning
	limiterErrors prometheus.Counter
}

// rule is one rate limit and the counters of its refusals.
type rule struct {
	limit   seckill.RateLimit  // zero: off
	refused prometheus.Counter // decided by the limiter
	blocked prometheus.Counter // answered from the block list
}

func newGuard(cfg Config, reg prometheus.Registerer, logger *slog.Logger, now func() time.Time) (*guard, error) {
	g := &guard{
		limiter:   cfg.RateLimiter,
		inReserve: cfg.LimitInReserve,
		ip:        rule{limit: cfg.RateLimitIP},
		user:      rule{limit: cfg.RateLimitUser},
		now:       now,
		logger:    logger,
		blocked:   newBlockList(),
	}
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, errors.New("httpapi: Config.TrustedProxies holds an invalid prefix")
		}
		g.trusted = append(g.trusted, normalizePrefix(p))
	}
	for name, l := range map[string]seckill.RateLimit{"IPLimit": cfg.RateLimitIP, "UserLimit": cfg.RateLimitUser} {
		if l.IsZero() {
			continue
		}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("httpapi: Config.%s: %w", name, err)
		}
		if g.limiter == nil && !g.inReserve {
			return nil, fmt.Errorf("httpapi: Config.%s is set but Config.RateLimiter is nil", name)
		}
	}
	switch {
	case cfg.MaxInFlight == 0:
		g.maxInFlight = DefaultMaxInFlight
	case cfg.MaxInFlight > 0:
		g.maxInFlight = int64(cfg.MaxInFlight)
	}

	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_rate_limit_refusals_total",
		Help: "Reservation requests refused by a rate limit, by limit (ip, user) and by what decided: " +
			"the shared limiter, or this node's memory of a recent refusal (local).",
	}, []string{"limit", "decided_by"})
	g.limiterErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_rate_limit_errors_total",
		Help: "Rate limiter calls that failed (Redis unreachable or slow); those requests were let through.",
	})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "seckill_reservations_in_flight",
		Help: "Reservation requests being handled on this node now.",
	}, func() float64 { return float64(g.inFlight.Load()) })
	for _, c := range []prometheus.Collector{refusals, g.limiterErrors, inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	g.ip.refused, g.ip.blocked = refusals.WithLabelValues("ip", "limiter"), refusals.WithLabelValues("ip", "local")
	g.user.refused, g.user.blocked = refusals.WithLabelValues("user", "limiter"), refusals.WithLabelValues("user", "local")
	return g, nil
}

// protect is the guard in front of the reservation handler. Its own
// answers (503, 429, 401) are counted in seckill_reservations_total like
// the handler's.
func (s *Server) protect(w http.ResponseWriter, r *http.Request, c reserveReq) int {
	g := s.guard
	if n := g.inFlight.Add(1); g.maxInFlight > 0 && n > g.maxInFlight {
		// Shed at once rather than queue: a queued request would time
		// out anyway, after holding memory and a connection.
		g.inFlight.Add(-1)
		s.metrics.reservation(outOverloaded, time.Since(c.start))
		return errOverloaded.write(w)
	}
	defer g.inFlight.Add(-1)
	if g.inReserve {
		return s.handleReserve(w, r, c) // the handler sends the limits along (rateChecks)
	}
	// The limiter's calls are backend calls: the budget bounds them.
	r, stop := s.withReserveBudget(r, c.start)
	defer stop()
	c.budgeted = true
	if !g.ip.limit.IsZero() {
		// A peer without an IP (a Unix socket) has no IP limit.
		if addr, ok := clientAddr(r.RemoteAddr, r.Header["X-Forwarded-For"], g.trusted); ok {
			if retry, limited := g.check(r.Context(), &g.ip, ipRateKey(addr)); limited {
				s.metrics.reservation(outRateLimited, time.Since(c.start))
				return writeRateLimited(w, retry)
			}
		}
	}
	if !g.user.limit.IsZero() {
		uid, err := s.buyerAt(r, c.start)
		if err != nil {
			o, status := s.fail(w, r, err)
			s.metrics.reservation(o, time.Since(c.start))
			return status
		}
		if retry, limited := g.check(r.Context(), &g.user, "user:"+uid); limited {
			s.metrics.reservation(outRateLimited, time.Since(c.start))
			return writeRateLimited(w, retry)
		}
		// The handler's own s.buyer call then costs no second
		// signature check.
		c.userID = uid
	}
	return s.handleReserve(w, r, c)
}

// limitAdmission applies the reservation route's rate limits to a lottery
// entry or a queue join of the verified buyer uid: the same
// limits and block list. With LimitInReserve it returns the checks for
// the entry's or join's own stock-store call to count, in the sale's rate
// state as a claim's are (seckill.EntryRequest.RateChecks; the caller
// answers a refusal with admissionRateLimited); else the RateLimiter
// counts them here, a call a check. It answers 429 itself and returns
// false when the request is refused. A failing limiter lets the request
// through, as for claims.
func (s *Server) limitAdmission(w http.ResponseWriter, r *http.Request, uid string) ([]seckill.RateCheck, int, bool) {
	g := s.guard
	if g.inReserve {
		checks, retry, limited := g.rateChecks(r, uid, s.now())
		if limited {
			return nil, writeRateLimited(w, retry), false
		}
		return checks, 0, true
	}
	if g.limiter == nil {
		return nil, 0, true
	}
	if !g.ip.limit.IsZero() {
		if addr, ok := clientAddr(r.RemoteAddr, r.Header["X-Forwarded-For"], g.trusted); ok {
			if retry, limited := g.check(r.Context(), &g.ip, ipRateKey(addr)); limited {
				return nil, writeRateLimited(w, retry), false
			}
		}
	}
	if !g.user.limit.IsZero() {
		if retry, limited := g.check(r.Context(), &g.user, "user:"+uid); limited {
			return nil, writeRateLimited(w, retry), false
		}
	}
	return nil, 0, true
}

// admissionRateLimited answers an entry or a join that its stock-store
// call refused for checks[by] (limitAdmission), as a claim's refusal is.
func (s *Server) admissionRateLimited(w http.ResponseWriter, checks []seckill.RateCheck, by int, retry time.Duration, asked time.Time) int {
	s.guard.refused(checks, by, retry, asked)
	return writeRateLimited(w, retry)
}

// rateChecks are the limits a reservation request of uid made at now must pass, for
// the Reserver to decide in its stock-store call. A key refused recently
// is answered from the block list instead (limited true), without a call:
// the stock store would refuse it too until then.
func (g *guard) rateChecks(r *http.Request, uid string, now time.Time) (checks []seckill.RateCheck, retry time.Duration, limited bool) {
	if !g.ip.limit.IsZero() {
		// A peer without an IP (a Unix socket) has no IP limit.
		if addr, ok := clientAddr(r.RemoteAddr, r.Header["X-Forwarded-For"], g.trusted); ok {
			key := ipRateKey(addr)
			if retry, ok := g.blocked.get(key, now, g.ip.limit.Interval()); ok {
				g.ip.blocked.Inc()
				return nil, retry, true
			}
			checks = append(checks, seckill.RateCheck{Key: key, Limit: g.ip.limit})
		}
	}
	if !g.user.limit.IsZero() {
		key := "user:" + uid
		if retry, ok := g.blocked.get(key, now, g.user.limit.Interval()); ok {
			g.user.blocked.Inc()
			return nil, retry, true
		}
		checks = append(checks, seckill.RateCheck{Key: key, Limit: g.user.limit})
	}
	return checks, 0, false
}

// blockedNow reports whether the block list holds the address or the buyer
// uid of r at now, and for how long: an answer from memory may not skip
// it. It is an atomic load while nothing is blocked, two map lookups
// otherwise; it counts nothing (counting is a Redis call).
func (g *guard) blockedNow(r *http.Request, uid string, now time.Time) (time.Duration, bool) {
	if !g.blocked.any(now) {
		return 0, false
	}
	if !g.ip.limit.IsZero() {
		if addr, ok := clientAddr(r.RemoteAddr, r.Header["X-Forwarded-For"], g.trusted); ok {
			if retry, ok := g.blocked.get(ipRateKey(addr), now, g.ip.limit.Interval()); ok {
				g.ip.blocked.Inc()
				return retry, true
			}
		}
	}
	if !g.user.limit.IsZero() {
		if retry, ok := g.blocked.get("user:"+uid, now, g.user.limit.Interval()); ok {
			g.user.blocked.Inc()
			return retry, true
		}
	}
	return 0, false
}

// refused notes that the stock store refused checks[by] for retry: the key
// is answered from the block list until then.
func (g *guard) refused(checks []seckill.RateCheck, by int, retry time.Duration, asked time.Time) {
	if by < 0 || by >= len(checks) {
		return
	}
	g.blocked.put(checks[by].Key, asked.Add(retry), asked)
	if strings.HasPrefix(checks[by].Key, "user:") {
		g.user.refused.Inc()
	} else {
		g.ip.refused.Inc()
	}
}

// check counts one request under key and reports whether it is refused,
// and for how long. A key refused recently is answered from the block
// list without asking the limiter: GCRA does not count refusals, so the
// limiter would refuse it too until then. A failing limiter lets the
// request through.
func (g *guard) check(ctx context.Context, ru *rule, key string) (retry time.Duration, limited bool) {
	now := g.now()
	if retry, ok := g.blocked.get(key, now, ru.limit.Interval()); ok {
		ru.blocked.Inc()
		return retry, true
	}
	lctx, cancel := context.WithTimeout(ctx, rateLimitTimeout)
	res, err := g.limiter.Allow(lctx, key, ru.limit)
	cancel()
	if err != nil {
		if ctx.Err() == nil { // not just the client hanging up
			g.failOpen(ctx, err)
		}
		return 0, false
	}
	if res.Allowed {
		return 0, false
	}
	// The refusal's clock started at the limiter call, after now: the
	// block ends a little before the limiter's, never after.
	g.blocked.put(key, now.Add(res.RetryAfter), now)
	ru.refused.Inc()
	return res.RetryAfter, true
}

func (g *guard) failOpen(ctx context.Context, err error) {
	g.limiterErrors.Inc()
	now := time.Now().UnixNano()
	last := g.lastWarn.Load()
	if now-last < int64(failOpenLogEvery) || !g.lastWarn.CompareAndSwap(last, now) {
		return
	}
	g.logger.WarnContext(ctx, "rate limiter failing; letting reservation requests through unlimited", "err", err)
}

// writeRateLimited answers 429 with Retry-After in whole seconds, at
// least 1 (a client told 0 would retry at once).
func writeRateLimited(w http.ResponseWriter, retry time.Duration) int {
	w.Header().Set("Retry-After", retryAfterSeconds(retry))
	return errRateLimited.write(w)
}

func retryAfterSeconds(d time.Duration) string {
	secs := (d + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(secs), 1), 10)
}

// blockList remembers, per rate-limit key, until when the limiter refuses
// it, so a client hammering past its limit costs a map lookup instead of
// a Redis call. It is bounded (internal/ttlcache): forgetting a live block
// costs only a Redis call the next time that key comes.
type blockList struct {
	until *ttlcache.Cache[struct{}]
	// last is the latest block end ever put: once past it, nothing is
	// blocked, and any answers without a lookup.
	last horizon
}

const (
	blockShards   = 64
	blockShardMax = 1024 // 65536 keys in all
)

func newBlockList() *blockList {
	return &blockList{until: ttlcache.New[struct{}](blockShards, blockShardMax)}
}

// get returns how long key stays blocked. An entry further away than
// maxLeft (the longest a limiter refusal can last) comes from a wall
// clock that went back, and is ignored.
func (b *blockList) get(key string, now time.Time, maxLeft time.Duration) (time.Duration, bool) {
	_, until, ok := b.until.Get(key, now)
	if !ok {
		return 0, false
	}
	if left := until.Sub(now); left <= maxLeft {
		return left, true
	}
	return 0, false
}

func (b *blockList) put(key string, until, now time.Time) {
	b.until.Put(key, struct{}{}, until, now)
	b.last.extend(until)
}

// any reports whether a block may be live at now: false is one atomic
// load, so answers from memory can check the list at no cost when it is
// empty, as it is but under a flood.
func (b *blockList) any(now time.Time) bool { return !b.last.past(now) }

func (b *blockList) len() int { return b.until.Len() }
