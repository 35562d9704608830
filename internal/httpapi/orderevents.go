package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/seckill-dev/seckill"
)

// OrderEvents is the operator's side of order-event delivery
// (sqlstore.EventStore): the outbox's events by state, how it stands, and
// the redelivery of a dead letter.
type OrderEvents interface {
	Events(ctx context.Context, state seckill.DeliveryState, limit int) ([]*seckill.EventDelivery, error)
	Stats(ctx context.Context) (seckill.OutboxStats, error)
	Redeliver(ctx context.Context, id string, now time.Time) (*seckill.EventDelivery, error)
}

type orderEventsResponse struct {
	seckill.OutboxStats
	// LagSeconds is how far behind the shop is: the age of the oldest
	// event not delivered yet (0 when none).
	LagSeconds float64                  `json:"lag_seconds"`
	Events     []*seckill.EventDelivery `json:"events"`
}

// handleOrderEvents serves GET /admin/v1/order-events?state=&limit=: the
// newest events of a state (pending, delivered, dead; all when absent),
// with the outbox's counts and lag. Delivered events are listed only
// until the retention (--order-events-keep) deletes them.
func (s *Server) handleOrderEvents(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	limit, err := parseLimit(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, err)
	}
	q, _ := url.ParseQuery(r.URL.RawQuery) // parseLimit has checked it parses
	state := seckill.DeliveryState(q.Get("state"))
	switch state {
	case "", seckill.DeliveryPending, seckill.DeliveryDelivered, seckill.DeliveryDead:
	default:
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "state must be pending, delivered or dead."))
	}
	stats, err := s.orderEvents.Stats(r.Context())
	if err != nil {
		return s.writeError(w, r, err)
	}
	list, err := s.orderEvents.Events(r.Context(), state, limit)
	if err != nil {
		return s.writeError(w, r, err)
	}
	out := orderEventsResponse{OutboxStats: stats, Events: list}
	if !stats.OldestPending.IsZero() {
		out.LagSeconds = max(s.now().Sub(stats.OldestPending).Seconds(), 0)
	}
	if out.Events == nil {
		out.Events = []*seckill.EventDelivery{}
	}
	return s.writeJSON(w, r, http.StatusOK, out)
}

// handleRedeliverOrderEvent serves POST
// /admin/v1/order-events/{id}/redeliver: a dead-lettered event goes back
// to pending, due now, with a fresh window of attempts. 200 with the
// event; 404 for an unknown id; 409 state_conflict for an event that is
// not dead.
func (s *Server) handleRedeliverOrderEvent(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	actor, err := operator(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	id := r.PathValue("id")
	d, err := s.orderEvents.Redeliver(r.Context(), id, s.now())
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return s.writeError(w, r, seckill.Errorf(seckill.ENOTFOUND, "No order event with this id."))
	case err != nil:
		return s.writeError(w, r, err)
	}
	s.logger.Info("order event redelivered by an operator", "event", id, "operator", actor)
	return s.writeJSON(w, r, http.StatusOK, d)
}
