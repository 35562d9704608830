package redis

import (
	"context"
	"fmt"
)

// Readiness tells whether Redis holds a sale whole: its stock hash loaded
// and not being healed, as sale_ready.lua decides for the scripts that add
// entries and places. A buyer's entry or place Redis does not hold is
// then truly not there; while it does not hold the sale whole, the
// database's copy decides (the heal puts it back).
type Readiness struct{ s *conn }

// Readiness returns the store's readiness check.
func (s *Store) Readiness() *Readiness { return &Readiness{s: s.conn} }

// SaleReady reports whether the sale's stock hash is loaded and not
// healing.
func (r *Readiness) SaleReady(ctx context.Context, saleID string) (bool, error) {
	vs, err := r.s.client.Do(ctx, r.s.client.B().Hmget().Key(r.s.keys(saleID)[keyStock]).Field("total", "healing").Build()).ToArray()
	if err != nil {
		return false, fmt.Errorf("sale ready: %w", classify(err))
	}
	if len(vs) != 2 {
		return false, fmt.Errorf("sale ready: %d values to HMGET of 2 fields", len(vs))
	}
	return !vs[0].IsNil() && vs[1].IsNil(), nil
}
