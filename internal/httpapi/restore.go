package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/seckill-dev/seckill"
)

// RestoreLister lists restore requests (restore.Store).
type RestoreLister interface {
	RestoreRequests(ctx context.Context, state seckill.RestoreState, limit int) ([]*seckill.RestoreRequest, error)
}

// maxRestoreReasonBytes bounds an operator's free-text reason.
const maxRestoreReasonBytes = 500

type restoreRequest struct {
	ReservationID string `json:"reservation_id"`
	Reason        string `json:"reason"`
}

// handleRestore serves POST /admin/v1/restores: give a reservation's units
// back. 200 restored | already_restored; 202 parked (no order yet).
func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	if err := checkContentType(r); err != nil {
		return s.writeError(w, r, err)
	}
	var req restoreRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBodyBytes), &req); err != nil {
		return s.writeError(w, r, err)
	}
	if _, ok := seckill.SaleIDOfReservation(req.ReservationID); !ok {
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "reservation_id must be a reservation id."))
	}
	if req.Reason == "" || len(req.Reason) > maxRestoreReasonBytes || !utf8.ValidString(req.Reason) {
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "reason is required: 1-%d bytes of UTF-8.", maxRestoreReasonBytes))
	}
	res, err := s.restorer.Restore(r.Context(), req.ReservationID, req.Reason)
	if err != nil {
		return s.writeError(w, r, err)
	}
	status := http.StatusOK
	if res == seckill.RestoreParked {
		status = http.StatusAccepted
	}
	return s.writeJSON(w, r, status, map[string]any{"reservation_id": req.ReservationID, "status": res})
}

// handleRestores serves GET /admin/v1/restores?state=parked&limit=N:
// restore requests in one state, oldest first. With state=alerted, the
// parked ones that raised an alert (those need an operator).
func (s *Server) handleRestores(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	limit, err := parseLimit(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, err)
	}
	q, _ := url.ParseQuery(r.URL.RawQuery) // parseLimit has checked it parses
	state, alertedOnly := seckill.RestoreStateParked, false
	switch v := q.Get("state"); v {
	case "", "parked":
	case "alerted":
		alertedOnly = true
	case string(seckill.RestoreStateRedisPending), string(seckill.RestoreStateDone):
		state = seckill.RestoreState(v)
	default:
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "state must be parked, alerted, redis_pending or done."))
	}
	list, err := s.restores.RestoreRequests(r.Context(), state, MaxFailedOrdersLimit)
	if err != nil {
		return s.writeError(w, r, err)
	}
	out := make([]*seckill.RestoreRequest, 0, len(list))
	for _, rr := range list {
		if alertedOnly && rr.AlertedAt.IsZero() {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, rr)
	}
	return s.writeJSON(w, r, http.StatusOK, map[string]any{"restores": out})
}

// handleReconciliation serves GET /admin/v1/sales/{id}/reconciliation:
// always 200 with the report when it could be made; its "balanced" and
// "discrepancies" carry the verdict.
func (s *Server) handleReconciliation(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		return errSaleNotFound.write(w)
	}
	report, err := s.reconcile(r.Context(), id)
	if errors.Is(err, seckill.ErrNotFound) {
		return errSaleNotFound.write(w)
	} else if err != nil {
		return s.writeError(w, r, err)
	}
	return s.writeJSON(w, r, http.StatusOK, report)
}
