package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// pollPrefix is where a buyer polls a reservation: GET <pollPrefix><id>.
const pollPrefix = "/api/v1/reservations/"

var errIdempotencyKey = seckill.Errorf(seckill.EINVALID,
	"Idempotency-Key must be a single header of 1-%d printable ASCII characters.", seckill.MaxIdempotencyKeyBytes)

// acceptedResponse is the 202 answer to a claimed reservation. A replay
// gets the same one, for the earlier reservation.
type acceptedResponse struct {
	ReservationID string `json:"reservation_id"`
	Status        string `json:"status"`
	PollURL       string `json:"poll_url"`
}

// reservePattern is the reservation route, the hot path of a flash sale,
// as routes registers it.
const reservePattern = "POST /api/v1/sales/{id}/reservations"

// Front returns next behind Harden, with the reservation route served in
// front of it without going through next: for a mux that has the API's
// Handler mounted at "/" (cmd/seckill's, which adds the pages). A
// stampede's requests then cost no routing at all.
func (s *Server) Front(next http.Handler) http.Handler {
	return s.reserveFront(Harden(next))
}

// The admission routes a crowd stampedes, served in front of the mux as
// the reservation route is (the lottery's and the queue's, when set).
const (
	enterPattern = "POST /api/v1/sales/{id}/entries"
	joinPattern  = "POST /api/v1/sales/{id}/queue"
)

// reserveFront serves a request for the reservation route itself, and
// one for an admission route in front (s.fronted), and passes every other
// one to next.
func (s *Server) reserveFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saleID, suffix, ok := frontSale(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if suffix == reserveSuffix {
			r.Pattern = reservePattern // as the mux would set it
			s.serveReserve(w, r, saleID, true)
			return
		}
		h, pattern := s.fronted.enter, enterPattern
		if suffix == joinSuffix {
			h, pattern = s.fronted.join, joinPattern
		}
		if h == nil {
			next.ServeHTTP(w, r)
			return
		}
		r.Pattern = pattern
		r.SetPathValue("id", saleID)
		h.ServeHTTP(w, r)
	})
}

// frontedRoutes are the admission routes' handlers as the mux has them
// (instrumented); nil when the route is not served.
type frontedRoutes struct{ enter, join http.Handler }

const (
	salesPrefix   = "/api/v1/sales/"
	reserveSuffix = "/reservations"
	enterSuffix   = "/entries"
	joinSuffix    = "/queue"
)

// frontSale returns the sale id and the route's suffix of a POST the mux
// would route to the reservation route or an admission route with that
// id, when the id is a valid one: a path with nothing escaped (RawPath
// empty, so the mux's segments are Path's) and only sale-id characters
// between the prefix and the suffix (so no '/', and no '.' or '..' for
// Harden to refuse). Every other request goes the long way.
func frontSale(r *http.Request) (saleID, suffix string, ok bool) {
	p := r.URL.Path
	if r.Method != http.MethodPost || r.URL.RawPath != "" || !strings.HasPrefix(p, salesPrefix) {
		return "", "", false
	}
	for _, suffix := range [...]string{reserveSuffix, enterSuffix, joinSuffix} {
		if len(p) > len(salesPrefix)+len(suffix) && strings.HasSuffix(p, suffix) {
			saleID = p[len(salesPrefix) : len(p)-len(suffix)]
			return saleID, suffix, seckill.ValidSaleID(saleID)
		}
	}
	return "", "", false
}

// muxReserve is the reservation route as the mux finds it.
func (s *Server) muxReserve(w http.ResponseWriter, r *http.Request) int {
	return s.serveReserve(w, r, r.PathValue("id"), false)
}

// serveReserve is the reservation route's instrumentation: instrument's,
// but with the route's budget applied only once the request is past the
// sold-out flag (see reserve), and without the route's latency histogram:
// seckill_reserve_duration_seconds is the one observation per request.
// validSale: saleID is known to be a valid sale id (reservationSale's).
func (s *Server) serveReserve(w http.ResponseWriter, r *http.Request, saleID string, validSale bool) int {
	start := time.Now()
	status := 0
	if s.reserveBudget > longBudget {
		// Best effort: a writer without deadlines keeps its own.
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(s.reserveBudget + writeMargin))
	}
	defer s.settle(s.reserveMetrics, reservePattern, w, r, start, &status)
	status = s.protect(w, r, reserveReq{saleID: saleID, validSale: validSale, start: start})
	return status
}

// nowOf is the time of c's decisions (its rate checks, its reservation
// id): the start the route read when the Server runs on the wall clock,
// so that a request reads the clock once (a read costs 150-250 ns on this
// project's virtual machines), and Config.Now otherwise.
func (s *Server) nowOf(c reserveReq) time.Time {
	if s.wallClock {
		return c.start
	}
	return s.now()
}

// reserveReq is a reservation request as the guard hands it on.
type reserveReq struct {
	saleID string
	// validSale: saleID is a valid sale id (the front checked it already).
	validSale bool
	// start is the request's one reading of the wall clock (time.Now).
	start time.Time
	// userID is the buyer the guard verified; empty when it did not.
	userID string
	// budgeted: the request's context carries the route's budget already.
	budgeted bool
}

// handleReserve serves POST /api/v1/sales/{id}/reservations, the hot path.
// It reads no database unless the Reserver answers "not started".
func (s *Server) handleReserve(w http.ResponseWriter, r *http.Request, c reserveReq) int {
	o, status := s.reserve(w, r, c)
	s.metrics.reservation(o, time.Since(c.start))
	return status
}

func (s *Server) reserve(w http.ResponseWriter, r *http.Request, c reserveReq) (outcome, int) {
	// Authentication first: an anonymous request costs no decoding.
	userID := c.userID
	if userID == "" {
		var err error
		if userID, err = s.buyerAt(r, c.start); err != nil {
			return s.fail(w, r, err)
		}
	}
	saleID := c.saleID
	if !c.validSale && !seckill.ValidSaleID(saleID) {
		return outSaleNotFound, errSaleNotFound.write(w)
	}
	key, err := idempotencyKey(r.Header)
	if err != nil {
		return s.fail(w, r, err)
	}
	// A sold-out sale is answered before the body is read: whatever it
	// asks for, there is nothing to give. A request with an
	// Idempotency-Key goes on: it may be the replay of a claim.
	if key == "" && s.soldOut != nil && s.soldOut(saleID, c.start) {
		return outSoldOut, errSoldOut.write(w)
	}
	// So is a sale the stock store said has not started, until a moment
	// before its start (seckill.StillEarly).
	if s.early.early(saleID, s.nowOf(c)) {
		return outNotStarted, errNotStarted.write(w)
	}
	// From here on backend calls may come: the budget bounds them. An
	// answer from memory, above, pays for neither its context nor the
	// request's copy.
	if !c.budgeted {
		var stop context.CancelFunc
		r, stop = s.withReserveBudget(r, c.start)
		defer stop()
	}
	now := s.nowOf(c)
	var checks []seckill.RateCheck
	if s.guard.inReserve {
		var retry time.Duration
		var limited bool
		if checks, retry, limited = s.guard.rateChecks(r, userID, now); limited {
			return outRateLimited, writeRateLimited(w, retry)
		}
	}
	if err := checkContentType(r); err != nil {
		return s.fail(w, r, err)
	}
	qty, err := decodeReservationRequest(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return s.fail(w, r, err)
	}

	reserver := s.reserver
	if s.queue.Tickets != nil { // a queue sale's buyers claim with a ticket
		var status int
		if reserver, status = s.admittedReserver(w, r, saleID, userID, now); reserver == nil {
			return outAdmission, status
		}
	}

	var id string
	if s.claimIDs != nil {
		id = s.claimIDs.New(saleID, userID, qty, now)
	} else {
		id = seckill.NewReservationID(saleID, now)
	}
	res, err := reserver.Reserve(r.Context(), saleID, seckill.ReserveRequest{
		ReservationID:  id,
		UserID:         userID,
		Qty:            qty,
		IdempotencyKey: key,
		RateChecks:     checks,
	})
	if err != nil {
		return s.fail(w, r, fmt.Errorf("reserve %s: %w", saleID, err))
	}
	if res.Outcome == seckill.OutcomeLimitExceeded && key != "" && s.keyedOrders != nil {
		if o, ok := s.orderOfKey(r.Context(), saleID, userID, key); ok {
			res = seckill.ReserveResult{Outcome: seckill.ReplayOfOrder(o, qty), ReservationID: o.ReservationID, Qty: o.Qty}
		}
	}
	if res.Outcome == seckill.OutcomeReserved && reserver != s.reserver && s.liveStock != nil {
		// A ticket holder's claim took units: this node's waiting room
		// reads the live stock afresh (liveSoldOut).
		s.liveStock.Delete(saleID)
	}
	return s.answerReserve(w, r, saleID, res, checks, now)
}

// answerReserve answers the stock store's outcome of a reservation.
func (s *Server) answerReserve(w http.ResponseWriter, r *http.Request, saleID string, res seckill.ReserveResult, checks []seckill.RateCheck, now time.Time) (outcome, int) {
	switch res.Outcome {
	case seckill.OutcomeReserved, seckill.OutcomeReplayed:
		if res.ReservationID == "" {
			return s.fail(w, r, fmt.Errorf("reserve %s: %v without a reservation id", saleID, res.Outcome))
		}
		o := outReserved
		if res.Outcome == seckill.OutcomeReplayed {
			o = outReplayed
		}
		return o, writeAccepted(w, res.ReservationID)
	case seckill.OutcomeSoldOut:
		return outSoldOut, errSoldOut.write(w)
	case seckill.OutcomeLimitExceeded:
		return outLimitExceeded, errLimitExceeded.write(w)
	case seckill.OutcomeEnded:
		return outEnded, errEnded.write(w)
	case seckill.OutcomeAdmissionRequired:
		s.admissionRefused(r.Context(), r, saleID)
		return outAdmission, errAdmission.write(w)
	case seckill.OutcomeKeyReused:
		return outKeyReused, errKeyReused.write(w)
	case seckill.OutcomeNotStarted:
		return s.notStarted(w, r, saleID, now)
	case seckill.OutcomeRateLimited:
		s.guard.refused(checks, res.RateLimitedBy, res.RetryAfter, now)
		return outRateLimited, writeRateLimited(w, res.RetryAfter)
	}
	return s.fail(w, r, fmt.Errorf("reserve %s: unknown outcome %d", saleID, res.Outcome))
}

// KeyedOrders finds a buyer's order by the digest of the Idempotency-Key
// its reservation was made under (internal/sqlstore Orders.OrderOfKey);
// seckill.ErrNotFound when there is none.
type KeyedOrders interface {
	OrderOfKey(ctx context.Context, saleID, userID, digest string) (*seckill.Order, error)
}

// orderOfKey is the buyer's order made under key, if the database has one.
// Only a claim the stock store refused as over the limit asks: its key's
// record is gone (a failover, a heal) while the order it made counts. A
// database that cannot answer leaves the refusal as it was.
func (s *Server) orderOfKey(ctx context.Context, saleID, userID, key string) (*seckill.Order, bool) {
	o, err := s.keyedOrders.OrderOfKey(ctx, saleID, userID, seckill.IdempotencyDigest(key))
	if err != nil {
		if !errors.Is(err, seckill.ErrNotFound) && ctx.Err() == nil {
			s.logger.Warn("replay of a keyed claim from the database", "sale", saleID, "err", err)
		}
		return nil, false
	}
	return o, true
}

// withReserveBudget returns r bounded by the reservation route's budget
// from start.
func (s *Server) withReserveBudget(r *http.Request, start time.Time) (*http.Request, context.CancelFunc) {
	ctx, stop := withBudget(r.Context(), start, s.reserveBudget)
	return r.WithContext(ctx), stop
}

// notStarted tells the reasons the stock store answers "not started"
// apart: no such sale, a sale whose window is over (never loaded, or
// unloaded), one that has really not started, or one that has started
// but is not loaded yet (this node's first preheat is a moment away, or
// the stock store lost it and a heal is to come): try later, not a
// definite not_started that would send the buyer away. The sale row comes
// from the cache, so a flood of made-up ids costs one database read per
// id per TTL.
func (s *Server) notStarted(w http.ResponseWriter, r *http.Request, saleID string, now time.Time) (outcome, int) {
	sale, err := s.cache.get(r.Context(), saleID)
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return outSaleNotFound, errSaleNotFound.write(w)
	case err != nil:
		return s.fail(w, r, fmt.Errorf("sale %s: %w", saleID, err))
	case !now.Before(sale.EndAt):
		return outEnded, errEnded.write(w)
	case !now.Before(sale.StartAt):
		return outTryLater, errNotLoaded.write(w)
	}
	s.early.learn(saleID, sale.StartAt, now)
	return outNotStarted, errNotStarted.write(w)
}

// fail answers err and classifies it for the outcome metric.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) (outcome, int) {
	status := s.writeError(w, r, err)
	if status == statusClientClosed {
		return outCanceled, status
	}
	return outcomeOfCode(seckill.ErrorCode(err)), status
}

// idempotencyKey returns the optional Idempotency-Key. Two of them are an
// error rather than a guess at which one the client meant.
func idempotencyKey(h http.Header) (string, error) {
	vals := h["Idempotency-Key"] // the server canonicalises header names
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) == 1 && seckill.ValidIdempotencyKey(vals[0]):
		return vals[0], nil
	}
	return "", errIdempotencyKey
}

// writeAccepted writes the 202 answer. Ids this system makes need no
// escaping in JSON or in a URL path, so the body is built by appending;
// anything else goes through encoding/json and url.PathEscape.
func writeAccepted(w http.ResponseWriter, id string) int {
	var body []byte
	if plainID(id) {
		body = make([]byte, 0, 2*len(id)+96)
		body = append(body, `{"reservation_id":"`...)
		body = append(body, id...)
		body = append(body, `","status":"pending","poll_url":"`+pollPrefix...)
		body = append(body, id...)
		body = append(body, "\"}\n"...)
	} else {
		var err error
		body, err = marshalAccepted(id)
		if err != nil {
			return errInternalGeneric.write(w)
		}
	}
	writeBody(w, http.StatusAccepted, body)
	if afterAccepted != nil {
		afterAccepted(w)
	}
	return http.StatusAccepted
}

func marshalAccepted(id string) ([]byte, error) {
	b, err := json.Marshal(acceptedResponse{ReservationID: id, Status: "pending", PollURL: pollPrefix + url.PathEscape(id)})
	return append(b, '\n'), err
}

// plainID reports whether id has only characters that are literal both in
// a JSON string and in a URL path segment.
func plainID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
