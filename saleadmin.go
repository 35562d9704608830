package seckill

import (
	"context"
	"time"
)

// Running a sale from the operator's side: listing sales, changing one
// (edit before the start, end early, add stock while live), resolving
// failed orders, and the audit log every such change leaves behind.

// SaleFilter selects sales for a list. The state filter works on the
// sale's window alone (the database does not know the live stock), so
// "live" includes sales that are sold out.
type SaleFilter struct {
	// State is "" (all), SaleScheduled, SaleLive or SaleEnded, at Now.
	State SaleState
	Now   time.Time
	// Limit is the most sales in one page (1..MaxSalePage).
	Limit int
	// After is the cursor of the previous page ("" for the first): the
	// Next of the SalePage that came before.
	After string
}

// MaxSalePage is the largest page of a sale list.
const MaxSalePage = 200

// SalePage is one page of a sale list, newest start first (then by id).
type SalePage struct {
	Sales []*Sale `json:"sales"`
	// Next is the cursor of the following page; empty on the last one.
	Next string `json:"next,omitempty"`
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
	// PhaseDraining: the sale has ended and its stock-store keys are still
	// there: orders may still be in flight (outbox, broker), waiting for
	// payment or for their restores.
	PhaseDraining = "draining"
	// PhaseArchived: its stock-store keys are gone; only the database
	// remembers it, and reconciliation works from the database alone.
	PhaseArchived = "archived"
)

// SaleView is what an operator sees of a sale.
type SaleView struct {
	*Sale
	// Remaining is the live stock store's figure, never above the
	// database's unsold units.
	Remaining int64     `json:"remaining"`
	State     SaleState `json:"state"`
	// Loaded says the stock store holds the sale.
	Loaded bool `json:"loaded"`
	// LiveUnavailable says the stock store could not be read: Remaining
	// and State are the database's alone.
	LiveUnavailable bool `json:"live_unavailable,omitempty"`
	// Phase is PhaseDraining or PhaseArchived once the sale has ended.
	Phase string `json:"phase,omitempty"`
	// OutboxLen is the reservations not yet relayed (only on a single
	// sale's view; absent when unknown).
	OutboxLen *int64 `json:"outbox_len,omitempty"`
}

// RemainingOf is what a buyer may still get: the stock store's remaining
// units, but never more than the database's unsold stock (when the two
// disagree, the database is the truth and would refuse the excess), and
// the sale's stock when it is not loaded yet.
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
	ID     int64  `json:"id"`
	SaleID string `json:"sale_id"`
	// Subject is what the action was on beyond the sale: the reservation
	// id of a failed order; empty for changes to the sale itself.
	Subject string `json:"subject,omitempty"`
	Actor   string `json:"actor"`
	Action  string `json:"action"`
	// Detail is a JSON object describing the change (before and after).
	Detail string    `json:"detail"`
	At     time.Time `json:"at"`
}

// ValidActor reports whether name can stand for an operator in the audit
// log: printable UTF-8, 1 to MaxAuditActorBytes bytes.
func ValidActor(name string) bool { return printable(name, MaxAuditActorBytes) }

// SaleAdmin is the database side of the changes an operator makes to a
// sale (internal/sqlstore). Every change and its audit entry are written
// in one transaction, and every change bumps the sale's Version.
type SaleAdmin interface {
	// ListSales returns one page of sales matching f.
	ListSales(ctx context.Context, f SaleFilter) (*SalePage, error)
	// EditSale replaces the sale's fields with those of s (id, Version
	// and CreatedAt are taken from the row) while the sale has not
	// started at now. version, when not 0, must equal the row's
	// (ECONFLICT otherwise). A started sale is ESTATECONFLICT; no sale,
	// ErrNotFound.
	EditSale(ctx context.Context, s *Sale, version int64, actor string, now time.Time) (*Sale, error)
	// EndSale moves the sale's end to now (and its start, if later, to
	// just before now), so that it is over. A sale already ended is
	// returned unchanged with changed false and no audit entry.
	EndSale(ctx context.Context, id, actor string, now time.Time) (s *Sale, changed bool, err error)
	// AddStock puts n more units on sale (stock and unsold + n) while the
	// sale has not ended at now; an ended one is ESTATECONFLICT.
	AddStock(ctx context.Context, id string, n int64, actor string, now time.Time) (*Sale, error)
	// RecordAudit appends an entry (ID and At are set by the store from
	// e.At, or now when zero).
	RecordAudit(ctx context.Context, e *AuditEntry) error
	// AuditLog lists a sale's entries, newest first; saleID "" lists all.
	AuditLog(ctx context.Context, saleID string, limit int) ([]*AuditEntry, error)
}

// FailedOrderAction is what an operator decides for a failed order.
type FailedOrderAction string

const (
	// ResolveRedrive turns the failed order into an order, if the
	// database's stock and the buyer's limit allow it.
	ResolveRedrive FailedOrderAction = "redrive"
	// ResolveRefunded records that the buyer was refunded (or told):
	// the row is closed and no order is made.
	ResolveRefunded FailedOrderAction = "refunded"
)

// Resolution is how a failed order was closed.
type Resolution struct {
	Action     FailedOrderAction `json:"action"`
	Note       string            `json:"note,omitempty"`
	Actor      string            `json:"actor"`
	ResolvedAt time.Time         `json:"resolved_at"`
	// OrderID is the order a re-drive created.
	OrderID string `json:"order_id,omitempty"`
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

// FailedOrderResolver closes failed orders (internal/sqlstore). Both
// actions are idempotent: the same action again returns the first
// resolution with changed false; the other action on a resolved row is
// ESTATECONFLICT.
type FailedOrderResolver interface {
	// ResolveFailedOrder applies action to the failed order of
	// reservationID in one transaction with its audit entry. A re-drive
	// inserts the order (status ordered, PayBy = now+payTimeout) and takes
	// its units with the order writer's optimistic-lock update, or refuses
	// with ESTATECONFLICT and one of the Redrive* reasons. No failed order:
	// ErrNotFound.
	ResolveFailedOrder(ctx context.Context, reservationID string, action FailedOrderAction, note, actor string, now time.Time, payTimeout time.Duration) (r *Resolution, changed bool, err error)
}
