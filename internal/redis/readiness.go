package redis

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
)

// saleReadyScript asks sale_ready.lua itself, so that the rule is written
// once for the scripts that add entries and places and for this question.
// It only reads, so it may be replayed.
var saleReadyScript = rueidis.NewLuaScriptRetryable(lua("sale_ready.lua", "sale_ready_ask.lua"))

// Readiness tells whether Redis holds a sale whole: its stock hash loaded
// and not being healed, by sale_ready.lua, the rule of the scripts that
// add entries and places. A buyer's entry or place Redis does not hold is
// then truly not there; while it does not hold the sale whole, the
// database's copy decides (the heal puts it back).
type Readiness struct{ s *conn }

// Readiness returns the store's readiness check.
func (s *Store) Readiness() *Readiness { return &Readiness{s: s.conn} }

// SaleReady reports whether the sale's stock hash is loaded and not
// healing.
func (r *Readiness) SaleReady(ctx context.Context, saleID string) (bool, error) {
	ready, err := saleReadyScript.Exec(ctx, r.s.client, []string{r.s.keys(saleID)[keyStock]}, nil).AsInt64()
	if err != nil {
		return false, fmt.Errorf("sale ready: %w", classify(err))
	}
	return ready == 1, nil
}
