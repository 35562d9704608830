package httpapi

import "context"

// SaleReadiness tells whether the stock store holds a sale whole: loaded
// and not being healed (internal/redis.Readiness). While it does not, a
// buyer's entry or place it lacks may be one the heal has yet to put back
// from the database.
type SaleReadiness interface {
	SaleReady(ctx context.Context, saleID string) (bool, error)
}

// PlaceCopy is the database's copy of a waiting room's places
// (internal/sqlstore.PlaceStore), which has every place ever answered.
type PlaceCopy interface {
	HasPlace(ctx context.Context, saleID, userID string) (bool, error)
}

// saleReady asks ready whether the stock store holds the sale whole; a
// node without a readiness check takes it as whole.
func saleReady(ctx context.Context, ready SaleReadiness, saleID string) (bool, error) {
	if ready == nil {
		return true, nil
	}
	return ready.SaleReady(ctx, saleID)
}
