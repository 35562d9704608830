package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// OrderStore is the part of seckill.OrderStore the API uses: a buyer's
// view of their order, pay and cancel, and the operators' list of failed
// orders.
type OrderStore interface {
	Order(ctx context.Context, reservationID string) (*seckill.Order, error)
	FailedOrder(ctx context.Context, reservationID string) (*seckill.FailedOrder, error)
	FailedOrders(ctx context.Context, f seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error)
	FailedOrderCounts(ctx context.Context) ([]seckill.FailedOrderCount, error)
	PayOrder(ctx context.Context, reservationID string, now time.Time) (*seckill.Order, error)
}

// Restorer gives a reservation's units back (internal/restore). It is the
// one path of a buyer's cancel, an operator's restore and the payment
// timeout, so that any of them may race the others without restoring
// twice. A paid order is an *Error with ESTATECONFLICT.
type Restorer interface {
	Restore(ctx context.Context, reservationID, reason string) (seckill.RestoreResult, error)
}

// PendingStore reads the stock store's record of a reservation, which
// exists from the moment a unit is claimed, before the order writer has
// put it in the database (internal/redis StockStore.Reservation). It returns
// seckill.ErrNotFound when there is no record.
type PendingStore interface {
	Reservation(ctx context.Context, reservationID string) (userID string, qty int64, status string, err error)
}

// LostClaims answers for a reservation id that neither the database nor
// the stock store has: a claim Redis forgot, or an id never issued to this
// buyer (internal/lostclaim).
type LostClaims interface {
	Resolve(ctx context.Context, id, userID string) (seckill.LostClaim, error)
}

// Limits of GET /admin/v1/failed-orders?limit=N: the largest is the
// store's largest page.
const (
	DefaultFailedOrdersLimit = 100
	MaxFailedOrdersLimit     = seckill.MaxFailedOrderPage
)

const (
	// statusPending and statusFailed are the buyer-facing statuses of a
	// reservation that has no order (seckill.BuyerStatus decides).
	statusPending = seckill.BuyerPending
	statusFailed  = seckill.BuyerFailed
	// pollAfterMS tells a buyer whose order is still being written when
	// to ask again (docs/design.md §5: every 2 s for up to 30 s).
	pollAfterMS = 2000
	// buyerCancelReason is recorded on orders the buyer cancels.
	buyerCancelReason = seckill.ReasonBuyerCancel
)

var (
	// errReservationNotFound answers both a missing reservation and
	// someone else's, byte for byte: a buyer learns nothing about ids that
	// are not theirs.
	errReservationNotFound = newStaticError(seckill.ENOTFOUND, "No such reservation.")

	errOrderNotCreated  = seckill.Errorf(seckill.ESTATECONFLICT, "The order is not created yet; retry shortly.")
	errReservationFail  = seckill.Errorf(seckill.ESTATECONFLICT, "The reservation failed; no order was created.")
	errActionTakesNoArg = seckill.Errorf(seckill.EINVALID, "This request takes no fields: send no body or {}.")
	errLimit            = seckill.Errorf(seckill.EINVALID, "limit must be a whole number from 1 to %d.", MaxFailedOrdersLimit)
	errQuery            = seckill.Errorf(seckill.EINVALID, "The query string is malformed.")
)

// reservationView is what a buyer sees of their reservation, whatever
// stage it has reached.
type reservationView struct {
	ReservationID string     `json:"reservation_id"`
	SaleID        string     `json:"sale_id"`
	Qty           int64      `json:"qty"`
	Status        string     `json:"status"` // pending, ordered, paid, cancelled, failed
	OrderID       string     `json:"order_id,omitempty"`
	PayBy         *time.Time `json:"pay_by,omitempty"`
	PollAfterMS   int        `json:"poll_after_ms,omitempty"` // pending only
	// Reason is set on a failed reservation whose failure the buyer may
	// hear of, as a code (seckill.BuyerFailReason).
	Reason string `json:"reason,omitempty"`
	// CancelledBy says who cancelled a cancelled order: buyer,
	// payment_timeout or operator (an operator's own reason stays
	// internal).
	CancelledBy string `json:"cancelled_by,omitempty"`
	// PayURL is the shop's payment page of an order awaiting payment
	// (Config.PaymentURLTemplate).
	PayURL string `json:"pay_url,omitempty"`
	// Restore, on the answer to a cancel, says which call gave the units
	// back: "restored" (this one) or "already_restored" (an earlier one:
	// the buyer's own retry, the payment timeout or an operator's restore).
	Restore seckill.RestoreResult `json:"restore,omitempty"`
}

// cancelledBy names who cancelled an order from its recorded reason.
func cancelledBy(o *seckill.Order) string {
	switch {
	case o.Status != seckill.OrderCancelled:
		return ""
	case o.CancelReason == seckill.ReasonBuyerCancel:
		return "buyer"
	case o.CancelReason == seckill.ReasonPayTimeout:
		return "payment_timeout"
	}
	return "operator"
}

type failedOrdersResponse struct {
	FailedOrders []*seckill.FailedOrder `json:"failed_orders"`
	// Next is the before of the following page; omitted on the last.
	Next string `json:"next,omitempty"`
}

type failedOrderCountsResponse struct {
	Counts []seckill.FailedOrderCount `json:"counts"`
}

// found is what is known of one reservation, from the most settled place
// that has it: its order, else its failed order, else the stock store's
// record (pending).
type found struct {
	order  *seckill.Order
	failed *seckill.FailedOrder
	qty    int64 // pending: the quantity the stock store holds
}

// lookup finds the buyer's reservation id. ok is false when there is none
// or it belongs to someone else; the caller answers both alike.
//
// The stores are read in the order a reservation moves through them, so a
// reservation persisted between two reads is seen as pending once more,
// never as missing.
func (s *Server) lookup(ctx context.Context, id, userID string) (f found, ok bool, err error) {
	o, err := s.orders.Order(ctx, id)
	switch {
	case err == nil && o == nil:
		return found{}, false, fmt.Errorf("order %s: store returned no order and no error", id)
	case err == nil:
		if o.UserID != userID {
			return found{}, false, nil
		}
		return found{order: o}, true, nil
	case !errors.Is(err, seckill.ErrNotFound):
		return found{}, false, fmt.Errorf("order %s: %w", id, err)
	}

	fo, err := s.orders.FailedOrder(ctx, id)
	switch {
	case err == nil && fo == nil:
		return found{}, false, fmt.Errorf("failed order %s: store returned none and no error", id)
	case err == nil:
		if fo.UserID != userID {
			return found{}, false, nil
		}
		return found{failed: fo}, true, nil
	case !errors.Is(err, seckill.ErrNotFound):
		return found{}, false, fmt.Errorf("failed order %s: %w", id, err)
	}

	// The record's own status is not shown: until the order is in the
	// database, which decides every later state, the buyer's answer is
	// "pending".
	uid, qty, _, err := s.pending.Reservation(ctx, id)
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return s.lostClaim(ctx, id, userID)
	case err != nil:
		return found{}, false, fmt.Errorf("pending reservation %s: %w", id, err)
	case uid != userID:
		return found{}, false, nil
	}
	return found{qty: qty}, true, nil
}

// lostClaim answers for an id no store has: never 404 for a claim the
// buyer was given, pending while it may still land, then its order or its
// failed order.
func (s *Server) lostClaim(ctx context.Context, id, userID string) (found, bool, error) {
	if s.lost == nil {
		return found{}, false, nil
	}
	c, err := s.lost.Resolve(ctx, id, userID)
	switch {
	case err != nil:
		return found{}, false, fmt.Errorf("forgotten reservation %s: %w", id, err)
	case !c.Known:
		return found{}, false, nil
	case c.Order != nil:
		return found{order: c.Order}, true, nil
	case c.Failed != nil:
		return found{failed: c.Failed}, true, nil
	}
	return found{qty: c.Qty}, true, nil
}

// view is the buyer's answer for f.
func (f found) view(id string) (reservationView, error) {
	status, _ := seckill.BuyerStatus(f.order, f.failed)
	switch {
	case f.order != nil:
		return orderView(id, f.order)
	case f.failed != nil:
		return reservationView{ReservationID: id, SaleID: f.failed.SaleID, Qty: f.failed.Qty, Status: status,
			Reason: seckill.BuyerFailReason(f.failed.Reason)}, nil
	}
	saleID, _ := seckill.SaleIDOfReservation(id)
	return reservationView{ReservationID: id, SaleID: saleID, Qty: f.qty, Status: status, PollAfterMS: pollAfterMS}, nil
}

func orderView(id string, o *seckill.Order) (reservationView, error) {
	status, ok := seckill.BuyerStatus(o, nil)
	if !ok {
		// A status this API cannot name is a bug or a bad row; an
		// operator must see it, the buyer must not.
		return reservationView{}, fmt.Errorf("order %s: unknown status %q", id, o.Status)
	}
	payBy := o.PayBy.UTC()
	return reservationView{
		ReservationID: id,
		SaleID:        o.SaleID,
		Qty:           o.Qty,
		Status:        status,
		OrderID:       o.ID,
		PayBy:         &payBy,
		CancelledBy:   cancelledBy(o),
	}, nil
}

// handleReservation serves GET /api/v1/reservations/{id}: the buyer's
// poll after a 202.
func (s *Server) handleReservation(w http.ResponseWriter, r *http.Request) int {
	label, status := s.reservation(w, r)
	s.resMetrics.poll(label)
	return status
}

func (s *Server) reservation(w http.ResponseWriter, r *http.Request) (string, int) {
	userID, err := s.recordsBuyer(r)
	if err != nil {
		return s.failResult(w, r, err)
	}
	id := r.PathValue("id")
	if _, ok := seckill.SaleIDOfReservation(id); !ok {
		return resultNotFound, errReservationNotFound.write(w)
	}
	f, ok, err := s.lookup(r.Context(), id, userID)
	if err != nil {
		return s.failResult(w, r, err)
	} else if !ok {
		return resultNotFound, errReservationNotFound.write(w)
	}
	v, err := f.view(id)
	if err != nil {
		return s.failResult(w, r, err)
	}
	v.PayURL = s.pay.payURL(f.order, s.now())
	return v.Status, s.writeJSON(w, r, http.StatusOK, v)
}

// handlePay serves POST /api/v1/reservations/{id}/pay.
func (s *Server) handlePay(w http.ResponseWriter, r *http.Request) int {
	result, status := s.orderAction(w, r, seckill.OrderPaid)
	s.resMetrics.action(actionPay, result)
	return status
}

// handleCancel serves POST /api/v1/reservations/{id}/cancel.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) int {
	result, status := s.orderAction(w, r, seckill.OrderCancelled)
	s.resMetrics.action(actionCancel, result)
	return status
}

// orderAction moves the buyer's order to target (paid or cancelled).
// The store's conditional update decides races, so a payment and a
// cancel (the buyer's or the pay timeout's) never both win. Asking for
// the state the order is already in answers 200 unchanged, so a client
// may retry a request whose answer it lost.
func (s *Server) orderAction(w http.ResponseWriter, r *http.Request, target seckill.OrderStatus) (string, int) {
	userID, err := s.recordsBuyer(r)
	if err != nil {
		return s.failResult(w, r, err)
	}
	id := r.PathValue("id")
	if _, ok := seckill.SaleIDOfReservation(id); !ok {
		return resultNotFound, errReservationNotFound.write(w)
	}
	if err := checkNoFields(w, r); err != nil {
		return s.failResult(w, r, err)
	}
	f, ok, err := s.lookup(r.Context(), id, userID)
	switch {
	case err != nil:
		return s.failResult(w, r, err)
	case !ok:
		return resultNotFound, errReservationNotFound.write(w)
	case f.failed != nil:
		return resultFailed, s.writeError(w, r, errReservationFail)
	case f.order == nil && target == seckill.OrderCancelled:
		// Still on its way to the database: the cancel is parked, and
		// the order is created cancelled when it lands.
		res, err := s.restorer.Restore(r.Context(), id, buyerCancelReason)
		if err != nil {
			return s.failResult(w, r, fmt.Errorf("cancel pending reservation %s: %w", id, err))
		}
		if res != seckill.RestoreParked { // the order landed meanwhile
			if o, err := s.orders.Order(r.Context(), id); err == nil {
				result := resultDone
				if res == seckill.AlreadyRestored {
					result = resultUnchanged
				}
				return s.answerOrder(w, r, id, o, result)
			}
		}
		return resultDone, s.writeJSON(w, r, http.StatusAccepted, map[string]any{
			"reservation_id": id, "status": statusPending, "cancellation": "parked",
			"poll_after_ms": pollAfterMS,
		})
	case f.order == nil:
		// Still on its way to the database: the order writer usually
		// lands it within a poll interval.
		w.Header().Set("Retry-After", strconv.Itoa(pollAfterMS/1000))
		return resultPending, s.writeError(w, r, errOrderNotCreated)
	}

	if _, err := orderView(id, f.order); err != nil {
		return s.failResult(w, r, err)
	}
	now := s.now()
	if f.order.Status == target {
		return s.answerOrder(w, r, id, f.order, resultUnchanged)
	} else if f.order.Status != seckill.OrderPlaced {
		return resultConflict, s.writeError(w, r, stateConflict(f.order, now))
	}
	var (
		o       *seckill.Order
		changed = true
	)
	if target == seckill.OrderPaid {
		o, err = s.orders.PayOrder(r.Context(), id, now)
	} else {
		var res seckill.RestoreResult
		if res, err = s.restorer.Restore(r.Context(), id, buyerCancelReason); err == nil {
			changed = res == seckill.Restored
			o, err = s.orders.Order(r.Context(), id)
		}
	}
	switch {
	case seckill.ErrorCode(err) == seckill.ESTATECONFLICT:
		return s.lostRace(w, r, id, target, err, now)
	case err != nil:
		return s.failResult(w, r, fmt.Errorf("%s order %s: %w", target, id, err))
	case o == nil:
		return s.failResult(w, r, fmt.Errorf("%s order %s: store returned no order and no error", target, id))
	}
	result := resultDone
	if !changed {
		result = resultUnchanged
	}
	return s.answerOrder(w, r, id, o, result)
}

// lostRace answers a conditional update that found the order in another
// state than ordered: re-read it, and name the state that won.
func (s *Server) lostRace(w http.ResponseWriter, r *http.Request, id string, target seckill.OrderStatus, conflict error, now time.Time) (string, int) {
	o, err := s.orders.Order(r.Context(), id)
	if err != nil || o == nil {
		// The store's conflict is still the right answer; its message is
		// client-safe by contract.
		return resultConflict, s.writeError(w, r, conflict)
	}
	if o.Status == target { // a concurrent request of the same buyer won
		return s.answerOrder(w, r, id, o, resultUnchanged)
	}
	return resultConflict, s.writeError(w, r, stateConflict(o, now))
}

// stateConflict names the state that keeps o from moving.
func stateConflict(o *seckill.Order, now time.Time) error {
	switch {
	case o.Status == seckill.OrderPaid:
		return seckill.Errorf(seckill.ESTATECONFLICT, "The order has already been paid.")
	case o.Status == seckill.OrderCancelled:
		return seckill.Errorf(seckill.ESTATECONFLICT, "The order has already been cancelled.")
	case o.Status == seckill.OrderRefundDue:
		return seckill.Errorf(seckill.ESTATECONFLICT, "The order was cancelled before its payment arrived; the payment will be refunded.")
	case o.Status == seckill.OrderRefunded:
		return seckill.Errorf(seckill.ESTATECONFLICT, "The order was cancelled before its payment arrived; the payment was refunded.")
	case o.Status == seckill.OrderPlaced && !o.CanPay(now):
		return seckill.Errorf(seckill.ESTATECONFLICT, "The payment deadline has passed; the order is being cancelled.")
	}
	return seckill.Errorf(seckill.ESTATECONFLICT, "The order changed state meanwhile; fetch it and retry.")
}

func (s *Server) answerOrder(w http.ResponseWriter, r *http.Request, id string, o *seckill.Order, result string) (string, int) {
	v, err := orderView(id, o)
	if err != nil {
		return s.failResult(w, r, err)
	}
	v.PayURL = s.pay.payURL(o, s.now())
	if o.Status == seckill.OrderCancelled { // the answer to a cancel
		v.Restore = seckill.AlreadyRestored
		if result == resultDone {
			v.Restore = seckill.Restored
		}
	}
	return result, s.writeJSON(w, r, http.StatusOK, v)
}

// handleFailedOrders serves GET
// /admin/v1/failed-orders?sale_id=&state=&limit=&before=: one page of the
// failed orders of a sale (or of every sale), open, resolved or all,
// newest first, and the cursor of the next page (omitted on the last).
// Without parameters it is the newest DefaultFailedOrdersLimit of every
// sale, as before there were filters.
func (s *Server) handleFailedOrders(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	f, err := parseFailedFilter(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, err)
	}
	list, next, err := s.orders.FailedOrders(r.Context(), f)
	if err != nil {
		return s.writeError(w, r, fmt.Errorf("failed orders: %w", err))
	}
	if list == nil {
		list = []*seckill.FailedOrder{} // [] rather than null
	}
	return s.writeJSON(w, r, http.StatusOK, failedOrdersResponse{FailedOrders: list[:min(len(list), f.Limit)], Next: next})
}

var (
	errFailedSale   = seckill.Errorf(seckill.EINVALID, "sale_id must name one sale; leave it out for every sale's failed orders.")
	errFailedState  = seckill.Errorf(seckill.EINVALID, "state must be open, resolved or all.")
	errFailedBefore = seckill.Errorf(seckill.EINVALID, "before must be the next of a previous page; leave it out for the newest.")
)

// parseFailedFilter reads the query of GET /admin/v1/failed-orders. Each
// of sale_id, state and before is optional, but once given it must be
// given once and not empty: an empty before would start again from the
// newest, so a client that follows next past the last page would never
// stop. Whether before is a cursor the store made is the store's to say.
// Other parameters are ignored (cache busters).
func parseFailedFilter(rawQuery string) (seckill.FailedOrderFilter, error) {
	limit, err := parseLimit(rawQuery)
	if err != nil {
		return seckill.FailedOrderFilter{}, err
	}
	q, _ := url.ParseQuery(rawQuery) // parseLimit has checked it parses
	f := seckill.FailedOrderFilter{Limit: limit, State: seckill.FailedAll}
	for _, p := range []struct {
		name string
		to   *string
		bad  error
	}{
		{"sale_id", &f.SaleID, errFailedSale},
		{"state", (*string)(&f.State), errFailedState},
		{"before", &f.Before, errFailedBefore},
	} {
		if vals, ok := q[p.name]; ok {
			if len(vals) != 1 || vals[0] == "" {
				return seckill.FailedOrderFilter{}, p.bad
			}
			*p.to = vals[0]
		}
	}
	switch f.State {
	case seckill.FailedOpen, seckill.FailedResolved, seckill.FailedAll:
	default:
		return seckill.FailedOrderFilter{}, errFailedState
	}
	return f, nil
}

// handleFailedOrderCounts serves GET /admin/v1/failed-orders/counts: how
// many open and resolved failed orders each sale has, the sale with the
// newest first.
func (s *Server) handleFailedOrderCounts(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	counts, err := s.orders.FailedOrderCounts(r.Context())
	if err != nil {
		return s.writeError(w, r, fmt.Errorf("failed order counts: %w", err))
	}
	if counts == nil {
		counts = []seckill.FailedOrderCount{}
	}
	return s.writeJSON(w, r, http.StatusOK, failedOrderCountsResponse{Counts: counts})
}

// parseLimit reads the optional limit of a raw query string: absent means
// DefaultFailedOrdersLimit; otherwise exactly one decimal number from 1 to
// MaxFailedOrdersLimit. Other parameters are ignored (cache busters).
func parseLimit(rawQuery string) (int, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return 0, errQuery
	}
	vals, ok := q["limit"]
	if !ok {
		return DefaultFailedOrdersLimit, nil
	}
	// Digits only: no sign, space or exponent; a short cap keeps Atoi
	// from seeing numbers it would overflow on.
	if len(vals) != 1 || len(vals[0]) == 0 || len(vals[0]) > 4 {
		return 0, errLimit
	}
	for i := 0; i < len(vals[0]); i++ {
		if c := vals[0][i]; c < '0' || c > '9' {
			return 0, errLimit
		}
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < 1 || n > MaxFailedOrdersLimit {
		return 0, errLimit
	}
	return n, nil
}

// checkNoFields accepts the body of a request that takes no fields:
// none at all, or an empty JSON object (many clients send {} with every
// POST). Anything else is rejected, so a field a later version adds is
// never silently ignored by this one.
func checkNoFields(w http.ResponseWriter, r *http.Request) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return decodeError(err)
	}
	return decodeNoFields(r, b)
}

func decodeNoFields(r *http.Request, body []byte) error {
	if len(bytes.Trim(body, " \t\r\n")) == 0 { // JSON's whitespace only
		return nil
	}
	if err := checkContentType(r); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := decodeJSON(bytes.NewReader(body), &fields); err != nil {
		return err
	}
	if fields == nil { // null
		return seckill.Errorf(seckill.EINVALID, "The request body must be a JSON object.")
	}
	if len(fields) != 0 {
		return errActionTakesNoArg
	}
	return nil
}

// failResult answers err and names its result for the metrics.
func (s *Server) failResult(w http.ResponseWriter, r *http.Request, err error) (string, int) {
	status := s.writeError(w, r, err)
	if status == statusClientClosed {
		return resultClientClosed, status
	}
	switch seckill.ErrorCode(err) {
	case seckill.EUNAUTHORIZED:
		return resultUnauthorized, status
	case seckill.EINVALID, seckill.ETOOLARGE:
		return resultInvalid, status
	case seckill.ERATELIMITED:
		return resultRateLimited, status
	}
	return resultError, status
}

// Labels of the reservation metrics. "client_closed" rather than the
// reservation route's "canceled": next to an order status "cancelled" the
// latter would read as one.
const (
	resultDone         = "done"      // paid or cancelled now
	resultUnchanged    = "unchanged" // already in the state asked for
	resultConflict     = seckill.ESTATECONFLICT
	resultPending      = statusPending // no order yet
	resultFailed       = statusFailed  // the reservation failed
	resultNotFound     = seckill.ENOTFOUND
	resultInvalid      = seckill.EINVALID
	resultUnauthorized = seckill.EUNAUTHORIZED
	resultRateLimited  = seckill.ERATELIMITED // the buyer's record requests (readGate)
	resultError        = "error"
	resultClientClosed = "client_closed"

	actionPay    = "pay"
	actionCancel = "cancel"
)

var (
	pollLabels = []string{
		statusPending, string(seckill.OrderPlaced), string(seckill.OrderPaid), string(seckill.OrderCancelled),
		string(seckill.OrderRefundDue), string(seckill.OrderRefunded), statusFailed,
		resultNotFound, resultUnauthorized, resultRateLimited, resultError, resultClientClosed,
	}
	actionLabels = []string{
		resultDone, resultUnchanged, resultConflict, resultPending, resultFailed,
		resultNotFound, resultInvalid, resultUnauthorized, resultRateLimited, resultError, resultClientClosed,
	}
)

// reservationMetrics count the answers of the buyer's reservation routes
// beyond their HTTP status: how many polls still find a reservation
// pending is how far the order pipeline lags.
type reservationMetrics struct {
	polls   map[string]prometheus.Counter
	actions map[string]map[string]prometheus.Counter // action → result
}

func newReservationMetrics(reg prometheus.Registerer) (*reservationMetrics, error) {
	polls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reservation_polls_total",
		Help: "Answers of GET /api/v1/reservations/{id}, by the status answered, or why there was none.",
	}, []string{"status"})
	actions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_order_actions_total",
		Help: "Buyers' pay and cancel requests, by result (done, unchanged, state_conflict, pending, failed, …).",
	}, []string{"action", "result"})
	// Children made up front, as for the reservation outcomes: every
	// label is exported from the start, and the maps are read-only.
	m := &reservationMetrics{polls: map[string]prometheus.Counter{}, actions: map[string]map[string]prometheus.Counter{}}
	for _, l := range pollLabels {
		m.polls[l] = polls.WithLabelValues(l)
	}
	for _, a := range []string{actionPay, actionCancel} {
		m.actions[a] = map[string]prometheus.Counter{}
		for _, l := range actionLabels {
			m.actions[a][l] = actions.WithLabelValues(a, l)
		}
	}
	for _, c := range []prometheus.Collector{polls, actions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *reservationMetrics) poll(label string) {
	if c, ok := m.polls[label]; ok {
		c.Inc()
	} else {
		m.polls[resultError].Inc()
	}
}

func (m *reservationMetrics) action(action, result string) {
	if c, ok := m.actions[action][result]; ok {
		c.Inc()
	} else {
		m.actions[action][resultError].Inc()
	}
}
