package seckill

import (
	"context"
	"time"
)

// Running a sale from the operator's side: editing it, resolving failed
// orders, and the audit log every change leaves.

// SaleFilter selects a page of sales. State ("" for all) goes by the window
// alone, so "live" includes sold-out sales.
type SaleFilter struct {
	State SaleState
	Now   time.Time
	Limit int    // 1..MaxSalePage
	After string // the previous page's Next; "" for the first
}

// MaxSalePage is the largest page of a sale list.
const MaxSalePage = 200

// SalePage is one page of a sale list, newest start first (then by id).
type SalePage struct {
	Sales []*Sale `json:"sales"`
	Next  string  `json:"next,omitempty"` // empty on the last page
}

// SaleEdit is what an operator may change before a sale starts. Nil
// fields stay as they are.
type SaleEdit struct {
	Name          *string    `json:"name,omitempty"`
	PriceCents    *int64     `json:"price_cents,omitempty"`
	Currency      *string    `json:"currency,omitempty"`
	Stock         *int64     `json:"stock,omitempty"`
	PurchaseLimit *int64     `json:"per_user_limit,omitempty"`
	StartAt       *time.Time `json:"start_at,omitempty"`
	EndAt         *time.Time `json:"end_at,omitempty"`
}

// Apply returns a copy of s with the edit's fields set, validated.
func (e SaleEdit) Apply(s *Sale) (*Sale, error) {
	c := *s
	applyField(&c.Name, e.Name)
	applyField(&c.PriceCents, e.PriceCents)
	applyField(&c.Currency, e.Currency)
	if e.Stock != nil {
		c.Stock, c.Unsold = *e.Stock, *e.Stock // nothing is sold before the start
	}
	applyField(&c.PurchaseLimit, e.PurchaseLimit)
	applyField(&c.StartAt, e.StartAt)
	applyField(&c.EndAt, e.EndAt)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// applyField sets *dst to an edit's field v, unless v is nil (unchanged).
func applyField[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Empty reports whether the edit changes nothing.
func (e SaleEdit) Empty() bool {
	return e.Name == nil && e.PriceCents == nil && e.Currency == nil && e.Stock == nil &&
		e.PurchaseLimit == nil && e.StartAt == nil && e.EndAt == nil
}

// Phases of an ended sale.
const (
	PhaseDraining = "draining" // stock-store keys kept: orders may be in flight
	PhaseArchived = "archived" // keys gone: the database alone remembers it
)

// SaleView is what an operator sees of a sale.
type SaleView struct {
	*Sale
	Remaining int64     `json:"remaining"` // RemainingOf
	State     SaleState `json:"state"`
	Loaded    bool      `json:"loaded"` // the stock store holds the sale
	// LiveUnavailable: the stock store could not be read; Remaining and
	// State are the database's alone.
	LiveUnavailable bool   `json:"live_unavailable,omitempty"`
	Phase           string `json:"phase,omitempty"`      // once ended
	OutboxLen       *int64 `json:"outbox_len,omitempty"` // one sale's view only
}

// RemainingOf is what a buyer may still get: the stock store's figure (the
// stock before it is loaded), never above the database's unsold units, as
// the database is the truth and would refuse the excess.
func RemainingOf(s *Sale, lvl StockLevel, loaded bool) int64 {
	r := s.Stock
	if loaded {
		r = lvl.Remaining()
	}
	return max(min(r, s.Unsold), 0)
}

// Actions recorded in the audit log.
const (
	AuditSaleCreated     = "sale.create"
	AuditSaleEdited      = "sale.edit"
	AuditSaleEnded       = "sale.end"
	AuditSaleStockAdded  = "sale.add_stock"
	AuditFailedRedriven  = "failed_order.redrive"
	AuditFailedRefunded  = "failed_order.refunded"
	MaxAuditActorBytes   = 128
	MaxResolutionNoteLen = 1000
)

// AuditEntry is one change an operator made: who, when, what.
type AuditEntry struct {
	ID      int64     `json:"id"`
	SaleID  string    `json:"sale_id"`
	Subject string    `json:"subject,omitempty"` // a failed order's reservation id
	Actor   string    `json:"actor"`
	Action  string    `json:"action"`
	Detail  string    `json:"detail"` // JSON: before and after
	At      time.Time `json:"at"`
}

// ValidActor: 1 to MaxAuditActorBytes of printable UTF-8.
func ValidActor(name string) bool { return printable(name, MaxAuditActorBytes) }

// FailedOrderAction is what an operator decides for a failed order.
type FailedOrderAction string

const (
	ResolveRedrive  FailedOrderAction = "redrive"  // make the order, if stock and limit allow
	ResolveRefunded FailedOrderAction = "refunded" // the buyer was refunded or told; no order
)

// Resolution is how a failed order was closed.
type Resolution struct {
	Action     FailedOrderAction `json:"action"`
	Note       string            `json:"note,omitempty"`
	Actor      string            `json:"actor"`
	ResolvedAt time.Time         `json:"resolved_at"`
	OrderID    string            `json:"order_id,omitempty"` // a re-drive's order
}

// Reasons a re-drive is refused (409), in the Message of an
// ESTATECONFLICT error.
const (
	RedriveNoStock      = "the database has not enough unsold stock"
	RedriveLimitReached = "the buyer would exceed the per-user limit"
	RedriveResolved     = "the failed order is already resolved another way"
	RedriveNoSale       = "the failed order names no sale that exists"
	RedriveRestored     = "the reservation's units were restored"
	RedriveInvalid      = "the failed order is not a well-formed reservation"
)

// FailedOrderResolver closes failed orders (internal/sqlstore). The same
// action again returns the first resolution; the other is ESTATECONFLICT.
type FailedOrderResolver interface {
	// ResolveFailedOrder applies action with its audit entry in one
	// transaction; a refused re-drive is ESTATECONFLICT with a Redrive* reason.
	ResolveFailedOrder(ctx context.Context, reservationID string, action FailedOrderAction, note, actor string, now time.Time, payTimeout time.Duration) (r *Resolution, changed bool, err error)
}
