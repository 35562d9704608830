package combiner

import (
	"context"
	"strconv"

	"github.com/seckill-dev/seckill"
)

var _ seckill.Enterer = (*Enterer)(nil)

// EntryStore records a batch of lottery entries of one sale in one call
// (internal/redis.Lottery).
type EntryStore interface {
	EnterBatch(ctx context.Context, s *seckill.Sale, reqs []seckill.EntryRequest) ([]seckill.EntryResult, error)
}

// Enterer batches lottery entries per sale, as the Combiner batches
// claims: one script call per batch.
type Enterer struct {
	b *Batcher[entryCall, seckill.EntryResult]
}

type entryCall struct {
	sale *seckill.Sale
	req  seckill.EntryRequest
}

// NewEnterer returns an Enterer in front of store.
func NewEnterer(store EntryStore, cfg Config) *Enterer {
	return &Enterer{b: NewBatcher(func(ctx context.Context, _ string, batch []entryCall) ([]seckill.EntryResult, error) {
		reqs := make([]seckill.EntryRequest, len(batch))
		for i, c := range batch {
			reqs[i] = c.req
		}
		// Every call of a batch has the same sale: the lane is the sale.
		return store.EnterBatch(ctx, batch[0].sale, reqs)
	}, cfg)}
}

// Enter records req for sale s, batched with the sale's other entries
// that have as many rate checks (checksLane).
func (e *Enterer) Enter(ctx context.Context, s *seckill.Sale, req seckill.EntryRequest) (seckill.EntryResult, error) {
	return e.b.Do(ctx, checksLane(s.ID, len(req.RateChecks)), entryCall{sale: s, req: req})
}

// Stop drains the batches in flight.
func (e *Enterer) Stop(ctx context.Context) error { return e.b.Stop(ctx) }

// checksLane is the batch of a sale's request with checks rate checks. The
// node's limits are the same for all its requests, so only a check left
// out (no client address) changes a batch's shape, which the stock store
// needs the same for the whole batch.
func checksLane(saleID string, checks int) string {
	switch checks {
	case 0:
		return saleID
	case 1:
		return saleID + "/1"
	case 2:
		return saleID + "/2"
	}
	return saleID + "/" + strconv.Itoa(checks)
}
