package httpapi

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/orderexport"
)

// DefaultOrderPage is the page of GET /admin/v1/sales/{id}/orders without
// a limit.
const DefaultOrderPage = 100

var (
	errOrderListLimit  = seckill.Errorf(seckill.EINVALID, "limit must be a whole number from 1 to %d.", seckill.MaxOrderPage)
	errOrderListStatus = seckill.Errorf(seckill.EINVALID, "status must be ordered, paid, cancelled, refund_due or refunded; leave it out for every order.")
	errOrderListCursor = seckill.Errorf(seckill.EINVALID, "cursor must be the next of a previous page; leave it out for the first.")
)

// orderListResponse is a page of a sale's orders; Next is null after the
// last page.
type orderListResponse struct {
	Orders []orderexport.Row `json:"orders"`
	Next   *string           `json:"next"`
}

// handleSaleOrders serves GET /admin/v1/sales/{id}/orders?limit=&cursor=&status=:
// one page of the sale's orders by reservation id (their claim order),
// paged by key, each with the sale's currency, for the shop's back
// office. Admin token.
func (s *Server) handleSaleOrders(w http.ResponseWriter, r *http.Request) int {
	sale, status := s.adminSale(w, r)
	if sale == nil {
		return status
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, errQuery)
	}
	f := seckill.OrderFilter{SaleID: sale.ID, Limit: DefaultOrderPage}
	if _, ok := q["limit"]; ok {
		n, err := parseLimit(r.URL.RawQuery)
		if err != nil || n > seckill.MaxOrderPage {
			return s.writeError(w, r, errOrderListLimit)
		}
		f.Limit = n
	}
	for _, p := range []struct {
		name string
		to   *string
		bad  error
	}{
		{"status", (*string)(&f.Status), errOrderListStatus},
		{"cursor", &f.Cursor, errOrderListCursor},
	} {
		if vals, ok := q[p.name]; ok {
			if len(vals) != 1 || vals[0] == "" {
				return s.writeError(w, r, p.bad)
			}
			*p.to = vals[0]
		}
	}
	if f.Status != "" && !f.Status.Known() {
		return s.writeError(w, r, errOrderListStatus)
	}
	page, next, err := s.orderList.OrderPage(r.Context(), f)
	if seckill.ErrorCode(err) == seckill.EINVALID && f.Cursor != "" {
		return s.writeError(w, r, errOrderListCursor)
	} else if err != nil {
		return s.writeError(w, r, fmt.Errorf("orders of sale %s: %w", sale.ID, err))
	}
	s.withCurrency(sale)
	resp := orderListResponse{Orders: make([]orderexport.Row, len(page))}
	for i, o := range page {
		resp.Orders[i] = orderexport.RowOf(o, sale.Currency)
	}
	if next != "" {
		resp.Next = &next
	}
	return s.writeJSON(w, r, http.StatusOK, resp)
}
