package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// SalesAdmin is the operator's side of sales (internal/saleadmin): each
// change goes to the database with its audit entry, then to the live
// stock store and to every node.
type SalesAdmin interface {
	List(ctx context.Context, f seckill.SaleFilter) (views []*seckill.SaleView, next string, err error)
	Get(ctx context.Context, id string) (*seckill.SaleView, error)
	Edit(ctx context.Context, id string, e seckill.SaleEdit, version int64, actor string) (*seckill.Sale, error)
	End(ctx context.Context, id, actor string) (s *seckill.Sale, changed bool, err error)
	AddStock(ctx context.Context, id string, n int64, actor string) (*seckill.Sale, error)
	AuditLog(ctx context.Context, saleID string, limit int) ([]*seckill.AuditEntry, error)
	RecordAudit(ctx context.Context, e *seckill.AuditEntry) error
}

// OperatorHeader names the operator making an admin call, for the audit
// log. The admin token is shared, so the name is what the caller says it
// is: the log records who claimed a change, and from which address.
const OperatorHeader = "X-Seckill-Operator"

// DefaultSalesPage is the page size of GET /admin/v1/sales without limit.
const DefaultSalesPage = 50

type adminMetrics struct {
	changes  *prometheus.CounterVec
	resolved *prometheus.CounterVec
}

func newAdminMetrics(reg prometheus.Registerer) (*adminMetrics, error) {
	m := &adminMetrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_sale_changes_total",
			Help: "Operators' changes to sales, by action (create, edit, end, add_stock).",
		}, []string{"action"}),
		resolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_failed_orders_resolved_total",
			Help: "Failed-order resolutions, by action (redrive, refunded) and result (resolved, unchanged, refused).",
		}, []string{"action", "result"}),
	}
	for _, a := range []string{"create", "edit", "end", "add_stock"} {
		m.changes.WithLabelValues(a)
	}
	for _, a := range []seckill.FailedOrderAction{seckill.ResolveRedrive, seckill.ResolveRefunded} {
		for _, r := range []string{"resolved", "unchanged", "refused"} {
			m.resolved.WithLabelValues(string(a), r)
		}
	}
	for _, c := range []prometheus.Collector{m.changes, m.resolved} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// operator is who the request says made it, with its address.
func operator(r *http.Request) (string, error) {
	name := r.Header.Get(OperatorHeader)
	if name == "" {
		name = "admin"
	}
	actor := name + " (" + r.RemoteAddr + ")"
	if !seckill.ValidActor(actor) {
		return "", seckill.Errorf(seckill.EINVALID, "%s must be a printable name of at most 64 bytes.", OperatorHeader)
	}
	return actor, nil
}

type salesListResponse struct {
	Sales []*seckill.SaleView `json:"sales"`
	Next  string              `json:"next,omitempty"`
}

// handleListSales serves GET /admin/v1/sales?state=&limit=&after=.
func (s *Server) handleListSales(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, errQuery)
	}
	f := seckill.SaleFilter{Limit: DefaultSalesPage, After: q.Get("after")}
	switch st := seckill.SaleState(q.Get("state")); st {
	case "", seckill.SaleScheduled, seckill.SaleLive, seckill.SaleEnded:
		f.State = st
	default:
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "state must be scheduled, live or ended."))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > seckill.MaxSalePage || len(v) > 3 {
			return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "limit must be a whole number from 1 to %d.", seckill.MaxSalePage))
		}
		f.Limit = n
	}
	views, next, err := s.salesAdmin.List(r.Context(), f)
	if err != nil {
		return s.writeError(w, r, err)
	}
	for _, v := range views {
		s.withCurrency(v.Sale)
	}
	return s.writeJSON(w, r, http.StatusOK, salesListResponse{Sales: views, Next: next})
}

// withCurrency shows the default currency on a row made before sales had
// one.
func (s *Server) withCurrency(sale *seckill.Sale) {
	if sale.Currency == "" {
		sale.Currency = s.currency
	}
}

// adminSaleID checks the admin token and the sale id of the path.
func (s *Server) adminSaleID(w http.ResponseWriter, r *http.Request) (string, int) {
	if !s.isAdmin(r) {
		return "", errAdminAuth.write(w)
	}
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		return "", errSaleNotFound.write(w)
	}
	return id, 0
}

// saleError answers a store's ErrNotFound as sale_not_found.
func (s *Server) saleError(w http.ResponseWriter, r *http.Request, err error) int {
	if errors.Is(err, seckill.ErrNotFound) {
		return errSaleNotFound.write(w)
	}
	return s.writeError(w, r, err)
}

// handleAdminSaleView serves GET /admin/v1/sales/{id} when SalesAdmin is
// set: the row with its live state, remaining units and phase.
func (s *Server) handleAdminSaleView(w http.ResponseWriter, r *http.Request) int {
	id, status := s.adminSaleID(w, r)
	if id == "" {
		return status
	}
	v, err := s.salesAdmin.Get(r.Context(), id)
	if err != nil {
		return s.saleError(w, r, err)
	}
	s.withCurrency(v.Sale)
	return s.writeJSON(w, r, http.StatusOK, v)
}

// editRequest is the body of PATCH /admin/v1/sales/{id}: the fields to
// change, and optionally the version they were read at.
// adminChange reads what every change to a sale starts with: the sale id
// (admin only), the operator who asks and, when body is not nil, its JSON
// body. An empty id means the answer is written, with that status.
func (s *Server) adminChange(w http.ResponseWriter, r *http.Request, body any) (id, actor string, status int) {
	id, status = s.adminSaleID(w, r)
	if id == "" {
		return "", "", status
	}
	actor, err := operator(r)
	if err == nil && body != nil {
		if err = checkContentType(r); err == nil {
			err = decodeJSON(http.MaxBytesReader(w, r.Body, MaxBodyBytes), body)
		}
	}
	if err != nil {
		return "", "", s.writeError(w, r, err)
	}
	return id, actor, 0
}

type editRequest struct {
	Version       int64   `json:"version"`
	Name          *string `json:"name"`
	PriceCents    *int64  `json:"price_cents"`
	Currency      *string `json:"currency"`
	Stock         *int64  `json:"stock"`
	PurchaseLimit *int64  `json:"per_user_limit"`
	StartAt       *string `json:"start_at"`
	EndAt         *string `json:"end_at"`
}

// handleEditSale serves PATCH /admin/v1/sales/{id}: edit a sale before
// its start. 409 state_conflict once it has started; 409 conflict when
// version is given and stale.
func (s *Server) handleEditSale(w http.ResponseWriter, r *http.Request) int {
	var req editRequest
	id, actor, status := s.adminChange(w, r, &req)
	if id == "" {
		return status
	}
	e := seckill.SaleEdit{Name: req.Name, PriceCents: req.PriceCents, Currency: req.Currency, Stock: req.Stock, PurchaseLimit: req.PurchaseLimit}
	for _, f := range []struct {
		name string
		in   *string
		out  **time.Time
	}{{"start_at", req.StartAt, &e.StartAt}, {"end_at", req.EndAt, &e.EndAt}} {
		if f.in != nil {
			t, err := parseTime(f.name, *f.in)
			if err != nil {
				return s.writeError(w, r, err)
			}
			*f.out = &t
		}
	}
	sale, err := s.salesAdmin.Edit(r.Context(), id, e, req.Version, actor)
	if err != nil {
		return s.saleError(w, r, err)
	}
	s.afterChange(sale, "edit")
	return s.writeJSON(w, r, http.StatusOK, sale)
}

// handleEndSale serves POST /admin/v1/sales/{id}/end: new claims stop at
// once on every node. 200 {sale, changed}; ending an ended sale changes
// nothing.
func (s *Server) handleEndSale(w http.ResponseWriter, r *http.Request) int {
	id, actor, status := s.adminChange(w, r, nil)
	if id == "" {
		return status
	}
	sale, changed, err := s.salesAdmin.End(r.Context(), id, actor)
	if err != nil {
		return s.saleError(w, r, err)
	}
	if changed {
		s.afterChange(sale, "end")
	}
	return s.writeJSON(w, r, http.StatusOK, map[string]any{"sale": sale, "changed": changed})
}

type addStockRequest struct {
	Add *int64 `json:"add"`
}

// handleAddStock serves POST /admin/v1/sales/{id}/stock {add: n}: put n
// more units on a live or scheduled sale. add = 0 only finishes an
// earlier call whose stock-store step failed (answered 503).
func (s *Server) handleAddStock(w http.ResponseWriter, r *http.Request) int {
	var req addStockRequest
	id, actor, status := s.adminChange(w, r, &req)
	if id == "" {
		return status
	}
	if req.Add == nil || *req.Add < 0 || *req.Add > seckill.MaxSaleStock {
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "add must be a whole number from 0 to %d.", seckill.MaxSaleStock))
	}
	sale, err := s.salesAdmin.AddStock(r.Context(), id, *req.Add, actor)
	if err != nil {
		return s.saleError(w, r, err)
	}
	if *req.Add > 0 {
		s.afterChange(sale, "add_stock")
	}
	return s.writeJSON(w, r, http.StatusOK, sale)
}

// afterChange drops this node's cached row and early flag, and counts the
// change.
func (s *Server) afterChange(sale *seckill.Sale, action string) {
	s.ForgetSale(sale.ID)
	s.adminMetrics.changes.WithLabelValues(action).Inc()
}

// ForgetSale drops the cached row and early flag of a sale, so the next
// read sees a change made on another node (the restock announcement
// carries it).
func (s *Server) ForgetSale(id string) {
	s.cache.forget(id)
	s.early.forget(id)
}

// handleSaleAudit serves GET /admin/v1/sales/{id}/audit?limit=N.
func (s *Server) handleSaleAudit(w http.ResponseWriter, r *http.Request) int {
	id, status := s.adminSaleID(w, r)
	if id == "" {
		return status
	}
	limit, err := parseLimit(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, err)
	}
	log, err := s.salesAdmin.AuditLog(r.Context(), id, limit)
	if err != nil {
		return s.writeError(w, r, err)
	}
	if log == nil {
		log = []*seckill.AuditEntry{}
	}
	return s.writeJSON(w, r, http.StatusOK, map[string]any{"audit": log})
}

type resolveRequest struct {
	Action seckill.FailedOrderAction `json:"action"`
	Note   string                    `json:"note"`
}

// handleResolveFailed serves POST /admin/v1/failed-orders/{id}/resolve
// {action: redrive|refunded, note}: 200 {resolution, changed}; 409
// state_conflict with the reason when a re-drive is refused or the row
// was resolved the other way; 404 when there is no such failed order.
func (s *Server) handleResolveFailed(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	actor, err := operator(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	if err := checkContentType(r); err != nil {
		return s.writeError(w, r, err)
	}
	var req resolveRequest
	if err := decodeJSON(http.MaxBytesReader(w, r.Body, MaxBodyBytes), &req); err != nil {
		return s.writeError(w, r, err)
	}
	if req.Action != seckill.ResolveRedrive && req.Action != seckill.ResolveRefunded {
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "action must be redrive or refunded."))
	}
	if len(req.Note) > seckill.MaxResolutionNoteLen {
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "note must be at most %d bytes.", seckill.MaxResolutionNoteLen))
	}
	id := r.PathValue("id")
	res, changed, err := s.resolver.ResolveFailedOrder(r.Context(), id, req.Action, req.Note, actor, s.now(), s.payTimeout)
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return s.writeError(w, r, seckill.Errorf(seckill.ENOTFOUND, "No failed order for this reservation."))
	case seckill.ErrorCode(err) == seckill.ESTATECONFLICT:
		s.adminMetrics.resolved.WithLabelValues(string(req.Action), "refused").Inc()
		return s.writeError(w, r, err)
	case err != nil:
		return s.writeError(w, r, err)
	}
	result := "unchanged"
	if changed {
		result = "resolved"
		if sale, ok := seckill.SaleIDOfReservation(id); ok {
			s.cache.forget(sale)
		}
	}
	s.adminMetrics.resolved.WithLabelValues(string(req.Action), result).Inc()
	return s.writeJSON(w, r, http.StatusOK, map[string]any{"reservation_id": id, "resolution": res, "changed": changed})
}
