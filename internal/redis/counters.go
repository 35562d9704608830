package redis

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
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
	Outbox   int64 // reservations in the outbox (OutboxLen)
}

// Counters reads a sale's StockCounters: HMGETs of the stock hash, HLEN of
// the res hash and XLEN of the outbox, pipelined, summed over the sale's
// buckets (units moving between buckets count in neither total).
func (s *Store) Counters(ctx context.Context, saleID string) (StockCounters, error) {
	tags, err := s.tags(ctx, saleID)
	if err != nil {
		return StockCounters{}, fmt.Errorf("counters: %w", err)
	}
	const per = 4 // commands per bucket
	cmds := make(rueidis.Commands, 0, per*len(tags))
	for _, tag := range tags {
		keys := s.keys(tag)
		cmds = append(cmds,
			s.client.B().Hmget().Key(keys[keyStock]).Field("total", "reserved", "restored").Build(),
			s.client.B().Hlen().Key(keys[keyRes]).Build())
		cmds = append(cmds, s.outboxCountCmds(tag)...)
	}
	res := s.client.DoMulti(ctx, cmds...)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return StockCounters{}, fmt.Errorf("counters: %w", classify(err))
		}
	}
	var c StockCounters
	for b := range tags {
		vals, err := res[per*b].ToArray()
		if err != nil || len(vals) != 3 {
			return StockCounters{}, fmt.Errorf("counters: malformed stock hash of %s: %v", tags[b], err)
		}
		if vals[0].IsNil() {
			if b == 0 {
				return StockCounters{}, nil // bucket 0 makes the sale loaded
			}
			continue
		}
		c.Loaded = true
		for i, p := range []*int64{&c.Total, &c.Reserved, &c.Restored} {
			if vals[i].IsNil() {
				continue // no restore yet: no `restored` field
			}
			n, err := vals[i].AsInt64()
			if err != nil {
				return StockCounters{}, fmt.Errorf("counters: malformed stock hash of %s: %w", tags[b], err)
			}
			*p += n
		}
		n, _ := res[per*b+1].AsInt64()
		c.Records += n
		if n, err = outboxCount(res[per*b+2], res[per*b+3]); err != nil {
			return StockCounters{}, fmt.Errorf("counters: outbox of %s: %w", tags[b], err)
		}
		c.Outbox += n
	}
	return c, nil
}
