package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// DefaultBuyerReadLimit is how many requests one buyer may send to the
// routes of their own records (readGate) on one node: a burst of 600,
// then 10 a second. A page polls a reservation every 2 s (pollAfterMS),
// a waiting room's page its place every second or so.
var DefaultBuyerReadLimit = seckill.RateLimit{Rate: 600, Period: time.Minute}

// errBuyerReads answers a buyer past their budget of record requests.
var errBuyerReads = seckill.Errorf(seckill.ERATELIMITED,
	"Too many requests for your reservations, entries or places; retry after the time in Retry-After.")

// readGate bounds what one signed-in buyer's requests for their own
// records cost. GET /api/v1/reservations/{id}, its pay and cancel, and
// GET /api/v1/sales/{id}/reservations/mine each reach the database (and
// the stock store); a lottery's entries/mine and a waiting room's
// queue/mine reach the stock store (a place polled once final is answered
// from memory). None of them goes through the reservation route's
// limits, so a client holding one valid token could send them as fast as
// its connections carry, made-up reservation ids included. Past its
// budget a buyer is answered 429 with a Retry-After before anything is
// read.
//
// The budget is GCRA's (seckill.RateLimit.Admit) in this node's memory,
// per buyer, in a table bounded as the forged-token gate's is: an
// attacker spread over N nodes gets N budgets, which bounds the cost all
// the same, and a buyer whose entry made room for others starts afresh.
// No Redis call: the bound must not cost what it saves.
type readGate struct {
	budgets *memLimits
	refused prometheus.Counter
}

// newReadGate returns a gate for limit, or nil when limit is zero (off).
func newReadGate(limit seckill.RateLimit, reg prometheus.Registerer) (*readGate, error) {
	budgets, err := newMemLimits(limit)
	if budgets == nil || err != nil {
		return nil, err
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_buyer_reads_refused_total",
		Help: "Requests for a buyer's own records (a reservation's status, pay, cancel; reservations/mine, entries/mine, queue/mine) refused 429 because the buyer had sent too many.",
	})
	if err := reg.Register(refused); err != nil {
		return nil, err
	}
	return &readGate{budgets: budgets, refused: refused}, nil
}

// admit counts one request of userID at now, or returns the error that
// refuses it. A nil gate admits everything.
func (g *readGate) admit(userID string, now time.Time) error {
	if g == nil {
		return nil
	}
	retry, ok := g.budgets.take(userID, now)
	if ok {
		return nil
	}
	g.refused.Inc()
	return &retryError{err: errBuyerReads, after: retry}
}

// recordsBuyer is buyer for the routes of a buyer's own records: the
// token's user id, once the buyer's budget (readGate) admits the request.
func (s *Server) recordsBuyer(r *http.Request) (string, error) {
	userID, err := s.buyer(r)
	if err != nil {
		return "", err
	}
	if err := s.readGate.admit(userID, s.now()); err != nil {
		return "", err
	}
	return userID, nil
}
