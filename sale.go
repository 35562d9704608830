package seckill

import (
	"context"
	"time"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// Sale is one flash sale: a fixed stock of one product from StartAt until
// EndAt. The database row is the truth; Redis holds the live stock once
// preheated.
type Sale struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	// Currency is ISO 4217; empty on old rows, which show the default.
	Currency string `json:"currency"`
	Stock    int64  `json:"stock"` // units put on sale
	// Unsold is Stock less persisted orders plus restored units: it lags
	// Redis by the orders in flight, and never goes below zero.
	Unsold        int64     `json:"unsold"`
	PurchaseLimit int64     `json:"per_user_limit"`
	StartAt       time.Time `json:"start_at"`
	EndAt         time.Time `json:"end_at"`
	// Buckets spreads the stock over that many Redis Cluster slots (0 or 1:
	// one); see docs/shards.md.
	Buckets   int64     `json:"buckets,omitempty"`
	Admission Admission `json:"admission"` // first come when zero
	Version   int64     `json:"version"`   // the row's optimistic lock
	CreatedAt time.Time `json:"created_at"`
}

// Limits on sale fields: every sum stays inside Lua's 2^53 exact integers.
const (
	MaxSaleStock     = 1_000_000_000
	MaxPurchaseLimit = 1_000_000
	MaxPriceCents    = 1_000_000_000_000
	MaxSaleNameBytes = 200
	MaxSaleDuration  = 366 * 24 * time.Hour
	MaxSaleBuckets   = 64
)

// ValidSaleID: 1 to 64 of A-Z, a-z, 0-9, '_' and '-', safe in Redis hash
// tags, URLs, SQL and logs. A loop, not a regexp: it runs on every request.
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

// ValidCurrency reports whether code is an assigned ISO 4217 code.
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

// SaleStore persists sales (internal/sqlstore).
type SaleStore interface {
	CreateSale(ctx context.Context, s *Sale) error // Version 1; ErrDuplicate
	Sale(ctx context.Context, id string) (*Sale, error)
	// SalesStartingBefore lists sales with StartAt <= t and EndAt > now.
	SalesStartingBefore(ctx context.Context, t, now time.Time) ([]*Sale, error)
}
