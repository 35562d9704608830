package seckill

import (
	"context"
	"time"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// Sale is one flash sale: a fixed stock of one product offered from StartAt
// until EndAt. The database row is the source of truth; Redis holds the live
// copy of the stock once the sale is preheated.
type Sale struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	// Currency is the ISO 4217 code of PriceCents ("EUR"); empty on rows
	// made before sales had one, which show the deployment's default.
	Currency string `json:"currency"`
	Stock    int64  `json:"stock"` // units put on sale
	// Unsold is the database's count of units not yet turned into orders:
	// Stock minus persisted orders, plus restored units. It lags the live
	// stock in Redis by the orders still in flight; the order writer's
	// optimistic-lock update never lets it go below zero.
	Unsold        int64     `json:"unsold"`
	PurchaseLimit int64     `json:"per_user_limit"`
	StartAt       time.Time `json:"start_at"`
	EndAt         time.Time `json:"end_at"`
	// Buckets splits the stock over that many Redis hash slots, so one hot
	// sale can use several Cluster shards (0 or 1: one slot). Each buyer
	// reserves in a home bucket chosen by their user id; a bucket that runs
	// out takes unreserved units from the others. See internal/redis.
	Buckets int64 `json:"buckets,omitempty"`
	// Admission is how buyers get in: first come (the zero value), a
	// lottery or a queue (admission.go).
	Admission Admission `json:"admission"`
	// Version is the optimistic-lock counter of the sales row.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
}

// Limits on sale fields. They keep every number well inside int64 and Lua's
// 2^53 exact-integer range, so no arithmetic on them can overflow anywhere.
const (
	MaxSaleStock     = 1_000_000_000
	MaxPurchaseLimit = 1_000_000
	MaxPriceCents    = 1_000_000_000_000
	MaxSaleNameBytes = 200
	MaxSaleDuration  = 366 * 24 * time.Hour
	MaxSaleBuckets   = 64
)

// ValidSaleID reports whether id is a well-formed sale id: 1 to 64 of
// A-Z, a-z, 0-9, '_' and '-'. That keeps ids safe inside Redis hash tags
// ({id}), URLs, SQL and log lines: no braces, slashes, dots, spaces or
// control characters. (A loop, not a regexp: it runs on every request.)
func ValidSaleID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidCurrency reports whether code is an ISO 4217 currency code: three
// capital letters that ISO 4217 assigns (golang.org/x/text knows the list).
func ValidCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	_, err := currency.ParseISO(code)
	return err == nil
}

// Validate checks the fields an operator supplies when creating a sale.
func (s *Sale) Validate() error {
	switch {
	case !ValidSaleID(s.ID):
		return Errorf(EINVALID, "id must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-'")
	case s.Name == "" || len(s.Name) > MaxSaleNameBytes || !utf8.ValidString(s.Name):
		return Errorf(EINVALID, "name must be 1-%d bytes of UTF-8", MaxSaleNameBytes)
	case s.PriceCents < 0 || s.PriceCents > MaxPriceCents:
		return Errorf(EINVALID, "price_cents must be between 0 and %d", int64(MaxPriceCents))
	case s.Currency != "" && !ValidCurrency(s.Currency):
		return Errorf(EINVALID, "currency must be an ISO 4217 code of three capital letters, e.g. EUR")
	case s.Stock < 1 || s.Stock > MaxSaleStock:
		return Errorf(EINVALID, "stock must be between 1 and %d", MaxSaleStock)
	case s.PurchaseLimit < 1 || s.PurchaseLimit > MaxPurchaseLimit:
		return Errorf(EINVALID, "per_user_limit must be between 1 and %d", MaxPurchaseLimit)
	case s.Buckets < 0 || s.Buckets > MaxSaleBuckets:
		return Errorf(EINVALID, "buckets must be between 1 and %d (0: one)", MaxSaleBuckets)
	case s.StartAt.IsZero() || s.EndAt.IsZero():
		return Errorf(EINVALID, "start_at and end_at are required (RFC 3339)")
	case !s.EndAt.After(s.StartAt):
		return Errorf(EINVALID, "end_at must be after start_at")
	case s.EndAt.Sub(s.StartAt) > MaxSaleDuration:
		return Errorf(EINVALID, "a sale may last at most %s", MaxSaleDuration)
	}
	if err := s.Admission.validate(s); err != nil {
		return err
	}
	for _, r := range s.Name {
		if r < 0x20 || r == 0x7f {
			return Errorf(EINVALID, "name must not contain control characters")
		}
	}
	return nil
}

// BucketCount is the number of stock buckets: Buckets, or 1 when unset.
func (s *Sale) BucketCount() int64 { return max(s.Buckets, 1) }

// SaleState is what a buyer sees of a sale.
type SaleState string

const (
	SaleScheduled SaleState = "scheduled"
	SaleLive      SaleState = "live"
	SaleSoldOut   SaleState = "sold_out"
	SaleEnded     SaleState = "ended"
)

// State derives the buyer-facing state at now, given the units remaining.
func (s *Sale) State(now time.Time, remaining int64) SaleState {
	switch {
	case now.Before(s.StartAt):
		return SaleScheduled
	case !now.Before(s.EndAt):
		return SaleEnded
	case remaining <= 0:
		return SaleSoldOut
	}
	return SaleLive
}

// SaleStore persists sales. Implemented per SQL dialect in internal/sqlstore.
type SaleStore interface {
	// CreateSale inserts s with Version 1. ErrDuplicate when the id is taken.
	CreateSale(ctx context.Context, s *Sale) error
	// Sale returns one sale; ErrNotFound when there is none.
	Sale(ctx context.Context, id string) (*Sale, error)
	// SalesStartingBefore lists sales with StartAt <= t and EndAt > now:
	// the ones that should be preheated by now.
	SalesStartingBefore(ctx context.Context, t, now time.Time) ([]*Sale, error)
}
