package redis

import (
	"context"

	"github.com/seckill-dev/seckill"
)

// Loader preheats sales from their database rows for the preheat
// scheduler. A sale whose row counts units sold (seckill.PreheatHeld) was
// in the stock store before; if its keys are gone, the store lost it with
// no node there to see it go, and a fresh load would sell those units
// again. Loader loads such a sale as a heal left unfinished: `healing`
// holds lostToken, whose time is long past, so the sale refuses claims
// (try later) and the next heal watcher tick on any node takes it over
// as stale and rebuilds it from the database (internal/heal). A sale
// still loaded is never touched, as by Preheat.
type Loader struct{ *conn }

// Loader returns the store's loader.
func (s *Store) Loader() Loader { return Loader{s.conn} }

// lostToken is the heal token of a sale loaded held: a heal begun at the
// Unix epoch (heal tokens are "<unix ms>:<random>"), stale at once.
const lostToken = "0:lost"

// Preheat is StockStore.Preheat, but loads a sale that sold units held.
func (s Loader) Preheat(ctx context.Context, sale *seckill.Sale) (created bool, err error) {
	if seckill.PreheatHeld(sale) {
		return StockStore{s.conn}.preheat(ctx, sale, lostToken)
	}
	return StockStore{s.conn}.Preheat(ctx, sale)
}
