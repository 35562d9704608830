package httpapi

import (
	"cmp"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
)

// saleView is what anyone may see of a sale.
type saleView struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	PriceCents    int64             `json:"price_cents"`
	Currency      string            `json:"currency"`
	Stock         int64             `json:"stock"`
	Remaining     int64             `json:"remaining"`
	PurchaseLimit int64             `json:"per_user_limit"`
	StartAt       time.Time         `json:"start_at"`
	EndAt         time.Time         `json:"end_at"`
	State         seckill.SaleState `json:"state"`
	Admission     seckill.Admission `json:"admission"`
	// Stale is set when the view is the last good copy, served while a
	// backend is down; AgeMS is then how old its oldest part is.
	Stale bool   `json:"stale,omitempty"`
	AgeMS *int64 `json:"age_ms,omitempty"`
}

type preheatResponse struct {
	SaleID    string `json:"sale_id"`
	Preheated bool   `json:"preheated"`
	Created   bool   `json:"created"`
}

var errSaleIDTaken = seckill.Errorf(seckill.ECONFLICT, "A sale with this id already exists.")

// handleCreateSale serves POST /admin/v1/sales.
func (s *Server) handleCreateSale(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	if err := checkContentType(r); err != nil {
		return s.writeError(w, r, err)
	}
	sale, err := decodeSaleRequest(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return s.writeError(w, r, err)
	}
	now := s.now()
	if sale.ID == "" {
		sale.ID = newSaleID(now)
	}
	if sale.Currency == "" {
		sale.Currency = s.currency
	}
	if err := sale.Validate(); err != nil {
		return s.writeError(w, r, err)
	}
	sale.Version = 1
	sale.CreatedAt = now.UTC().Truncate(time.Microsecond)
	if err := s.sales.CreateSale(r.Context(), sale); errors.Is(err, seckill.ErrDuplicate) {
		return s.writeError(w, r, errSaleIDTaken)
	} else if err != nil {
		return s.writeError(w, r, err)
	}
	// A "not found" cached here before the sale existed must not hide it.
	s.cache.forget(sale.ID)
	if s.onSaleCreated != nil {
		c := *sale
		s.onSaleCreated(&c)
	}
	s.adminMetrics.changes.WithLabelValues("create").Inc()
	if s.salesAdmin != nil {
		actor, _ := operator(r)
		if actor == "" {
			actor = "admin"
		}
		detail, _ := json.Marshal(sale)
		if err := s.salesAdmin.RecordAudit(r.Context(), &seckill.AuditEntry{SaleID: sale.ID, Actor: actor,
			Action: seckill.AuditSaleCreated, Detail: string(detail), At: now}); err != nil {
			// The sale exists: its creation must not be answered as a
			// failure (a retry would meet "id taken").
			s.logger.ErrorContext(r.Context(), "audit of a created sale", "sale_id", sale.ID, "err", err)
		}
	}
	w.Header().Set("Location", "/admin/v1/sales/"+sale.ID)
	return s.writeJSON(w, r, http.StatusCreated, sale)
}

// adminSale reads the sale named in the path straight from the store:
// operators see the source of truth, not the cache.
func (s *Server) adminSale(w http.ResponseWriter, r *http.Request) (*seckill.Sale, int) {
	if !s.isAdmin(r) {
		return nil, errAdminAuth.write(w)
	}
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		return nil, errSaleNotFound.write(w)
	}
	sale, err := s.sales.Sale(r.Context(), id)
	if errors.Is(err, seckill.ErrNotFound) {
		return nil, errSaleNotFound.write(w)
	} else if err != nil {
		return nil, s.writeError(w, r, err)
	}
	return sale, 0
}

// handleAdminSale serves GET /admin/v1/sales/{id}.
func (s *Server) handleAdminSale(w http.ResponseWriter, r *http.Request) int {
	if s.salesAdmin != nil {
		return s.handleAdminSaleView(w, r)
	}
	sale, status := s.adminSale(w, r)
	if sale == nil {
		return status
	}
	return s.writeJSON(w, r, http.StatusOK, sale)
}

// handlePreheat serves POST /admin/v1/sales/{id}/preheat.
func (s *Server) handlePreheat(w http.ResponseWriter, r *http.Request) int {
	sale, status := s.adminSale(w, r)
	if sale == nil {
		return status
	}
	created, err := s.preheater.Preheat(r.Context(), sale)
	if err != nil {
		return s.writeError(w, r, err)
	}
	return s.writeJSON(w, r, http.StatusOK, preheatResponse{SaleID: sale.ID, Preheated: true, Created: created})
}

// handlePublicSale serves GET /api/v1/sales/{id}: the sale row from the
// cache, the remaining units live from the stock store. While the database
// or Redis is down, the last good copy of what cannot be read is served
// instead, marked stale with its age: a buyer's page keeps showing the
// sale rather than an error, and nothing is decided on this view.
func (s *Server) handlePublicSale(w http.ResponseWriter, r *http.Request) int {
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		return errSaleNotFound.write(w)
	}
	now := s.now()
	var staleSince time.Time // zero: fresh
	sale, err := s.cache.get(r.Context(), id)
	if errors.Is(err, seckill.ErrNotFound) {
		return errSaleNotFound.write(w)
	} else if err != nil {
		good, at, ok := s.cache.lastGood(id)
		if !ok || clientGone(r.Context()) {
			return s.writeError(w, r, err)
		}
		sale, staleSince = good, at
	}
	// Never above the database's unsold units: when Redis and the
	// database disagree (203 of 200), the database is the truth.
	level, err := s.stock.Stock(r.Context(), id)
	remaining := seckill.RemainingOf(sale, seckill.StockLevel{}, false) // not preheated yet: nothing sold
	switch {
	case err == nil:
		remaining = seckill.RemainingOf(sale, level, true)
		s.levels.put(id, remaining, now)
	case errors.Is(err, seckill.ErrNotFound):
		s.levels.put(id, remaining, now)
	default:
		last, at, ok := s.levels.get(id)
		if !ok || clientGone(r.Context()) {
			return s.writeError(w, r, err)
		}
		remaining = max(min(last, sale.Unsold), 0)
		if staleSince.IsZero() || at.Before(staleSince) {
			staleSince = at
		}
	}
	v := saleView{
		ID:            sale.ID,
		Name:          sale.Name,
		PriceCents:    sale.PriceCents,
		Currency:      cmp.Or(sale.Currency, s.currency),
		Stock:         sale.Stock,
		Remaining:     remaining,
		PurchaseLimit: sale.PurchaseLimit,
		StartAt:       sale.StartAt,
		EndAt:         sale.EndAt,
		State:         sale.State(now, remaining),
		Admission:     sale.Admission,
	}
	if !staleSince.IsZero() {
		age := max(now.Sub(staleSince).Milliseconds(), 0)
		v.Stale, v.AgeMS = true, &age
		s.metrics.degrade(r.Pattern, degradedStale)
	}
	return s.writeJSON(w, r, http.StatusOK, v)
}

// lastLevels keeps the last remaining count read of each sale, for the
// public view to serve while Redis is down. Only sales that exist get in,
// and it starts over past saleCacheMax of them.
type lastLevels struct {
	mu sync.Mutex
	m  map[string]goodLevel
}

type goodLevel struct {
	remaining int64
	at        time.Time
}

func (l *lastLevels) put(id string, remaining int64, at time.Time) {
	l.mu.Lock()
	if l.m == nil || len(l.m) >= saleCacheMax {
		l.m = map[string]goodLevel{}
	}
	l.m[id] = goodLevel{remaining, at}
	l.mu.Unlock()
}

func (l *lastLevels) get(id string) (int64, time.Time, bool) {
	l.mu.Lock()
	g, ok := l.m[id]
	l.mu.Unlock()
	return g.remaining, g.at, ok
}

var saleIDEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// newSaleID returns "sale-" and 26 characters: a millisecond timestamp and
// 80 random bits, so generated ids sort by creation time and never collide
// in practice.
func newSaleID(now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return "sale-" + saleIDEncoding.EncodeToString(b[:])
}
