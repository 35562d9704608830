package redis

import (
	"context"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// Loader preheats sales from their database rows for the preheat
// scheduler. A sale whose row counts units sold, or whose entries or
// places the database keeps (seckill.PreheatHeld), was in the stock store
// before; if its keys are gone, the store lost it with
// no node there to see it go, and a fresh load would sell those units
// again. Loader loads such a sale as a heal left unfinished: `healing`
// holds lostToken, whose time is long past, so the sale refuses claims
// (try later) and the next heal watcher tick on any node takes it over
// as stale and rebuilds it from the database (internal/heal). A sale
// still loaded is never touched, as by Preheat.
type Loader struct {
	*conn
	kept KeptRows
}

// KeptRows counts what the database keeps of a sale that only a sale
// loaded before has: a lottery's entries, a waiting room's places
// (seckill.PreheatHeld).
type KeptRows func(ctx context.Context, s *seckill.Sale) (int64, error)

// Loader returns the store's loader; kept may be nil (nothing counted).
func (s *Store) Loader(kept KeptRows) Loader { return Loader{s.conn, kept} }

// lostToken is the heal token of a sale loaded held: a heal begun at the
// Unix epoch (heal tokens are "<unix ms>:<random>"), stale at once.
const lostToken = "0:lost"

// Preheat is StockStore.Preheat, but loads held a sale that sold units,
// or whose entries or places the database keeps.
func (s Loader) Preheat(ctx context.Context, sale *seckill.Sale) (created bool, err error) {
	var kept int64
	if s.kept != nil {
		if kept, err = s.kept(ctx, sale); err != nil {
			return false, fmt.Errorf("preheat %s: %w", sale.ID, err)
		}
	}
	if seckill.PreheatHeld(sale, kept) {
		return StockStore{s.conn}.preheat(ctx, sale, lostToken)
	}
	return StockStore{s.conn}.Preheat(ctx, sale)
}
