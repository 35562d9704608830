package redis

import (
	"context"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// StockCounters are the running counts Redis keeps of a sale as
// reservations and restores happen, updated by the same scripts that
// change them: read in one round trip, whatever the sale's size.
type StockCounters struct {
	Loaded   bool  // false: the sale is not in Redis (not preheated, or archived)
	Total    int64 // units put on sale
	Reserved int64 // units held by active reservations
	Restored int64 // units given back by restores
	Records  int64 // reservation records (HLEN of res)
	Outbox   int64 // outbox entries not yet relayed
}

// Counters reads a sale's StockCounters: HMGET of the stock hash, HLEN of
// the res hash and XLEN of the outbox, pipelined.
func (s *Store) Counters(ctx context.Context, saleID string) (StockCounters, error) {
	if !seckill.ValidSaleID(saleID) {
		return StockCounters{}, fmt.Errorf("counters: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	keys := s.keys(saleID)
	res := s.client.DoMulti(ctx,
		s.client.B().Hmget().Key(keys[keyStock]).Field("total", "reserved", "restored").Build(),
		s.client.B().Hlen().Key(keys[keyRes]).Build(),
		s.client.B().Xlen().Key(keys[keyOutbox]).Build(),
	)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return StockCounters{}, fmt.Errorf("counters: %w", classify(err))
		}
	}
	vals, err := res[0].ToArray()
	if err != nil || len(vals) != 3 {
		return StockCounters{}, fmt.Errorf("counters: malformed stock hash of %s: %v", saleID, err)
	}
	var c StockCounters
	if vals[0].IsNil() {
		return c, nil
	}
	c.Loaded = true
	for i, p := range []*int64{&c.Total, &c.Reserved, &c.Restored} {
		if vals[i].IsNil() {
			continue // no restore yet: no `restored` field
		}
		if *p, err = vals[i].AsInt64(); err != nil {
			return StockCounters{}, fmt.Errorf("counters: malformed stock hash of %s: %w", saleID, err)
		}
	}
	c.Records, _ = res[1].AsInt64()
	c.Outbox, _ = res[2].AsInt64()
	return c, nil
}
