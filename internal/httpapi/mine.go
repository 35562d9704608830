package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/seckill-dev/seckill"
)

// BuyerClaims reads one buyer's claims on a sale, for a buyer who lost the
// answer to a reservation (seckill.PendingUnits).
type BuyerClaims interface {
	// BuyerOrders is the buyer's orders of the sale (the database).
	BuyerOrders(ctx context.Context, saleID, userID string) ([]*seckill.Order, error)
	// BuyerFailedOrders is the buyer's failed orders of the sale (the
	// database).
	BuyerFailedOrders(ctx context.Context, saleID, userID string) ([]*seckill.FailedOrder, error)
	// Held is the units the stock store counts the buyer as holding.
	Held(ctx context.Context, saleID, userID string) (int64, error)
}

// myClaimsResponse answers GET /api/v1/sales/{id}/reservations/mine.
type myClaimsResponse struct {
	SaleID       string            `json:"sale_id"`
	Reservations []reservationView `json:"reservations"`
	// PendingUnits are units the buyer holds that have no order yet:
	// claims on their way to the database. Ask again shortly.
	PendingUnits int64 `json:"pending_units"`
	PollAfterMS  int   `json:"poll_after_ms,omitempty"` // while units are pending
}

// handleMyClaims serves GET /api/v1/sales/{id}/reservations/mine: the
// caller's reservations of the sale that have orders or failed, and how
// many units they hold whose orders are still on their way. A buyer reads
// only their own (the token names them); a sale that does not exist is 404.
func (s *Server) handleMyClaims(w http.ResponseWriter, r *http.Request) int {
	userID, err := s.recordsBuyer(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		return errSaleNotFound.write(w)
	}
	if _, err := s.cache.get(r.Context(), id); errors.Is(err, seckill.ErrNotFound) {
		return errSaleNotFound.write(w)
	} else if err != nil {
		return s.writeError(w, r, err)
	}
	// The stock store first: a claim persisted between two reads is then
	// counted twice (held, and its order), never missed. Failed orders
	// before orders: one re-driven meanwhile shows as its order.
	held, err := s.buyerClaims.Held(r.Context(), id, userID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	failed, err := s.buyerClaims.BuyerFailedOrders(r.Context(), id, userID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	orders, err := s.buyerClaims.BuyerOrders(r.Context(), id, userID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	recs := seckill.BuyerRecords(orders, failed)
	resp := myClaimsResponse{SaleID: id, Reservations: make([]reservationView, 0, len(recs)), PendingUnits: seckill.PendingUnits(held, recs)}
	for _, rec := range recs {
		v, err := found{order: rec.Order, failed: rec.Failed}.view(rec.ReservationID())
		if err != nil {
			return s.writeError(w, r, err)
		}
		resp.Reservations = append(resp.Reservations, v)
	}
	if resp.PendingUnits > 0 {
		resp.PollAfterMS = pollAfterMS
	}
	return s.writeJSON(w, r, http.StatusOK, resp)
}
