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

// EntryKeeper keeps a batch of entries of one sale in the database, in one
// write, and returns what it keeps of each: the entry, or the one its
// buyer had (internal/lottery.Book).
type EntryKeeper interface {
	Keep(ctx context.Context, saleID string, entries []seckill.LotteryEntry) ([]seckill.LotteryEntry, error)
}

// Enterer batches lottery entries per sale, as the Combiner batches
// claims: one script call per batch. With a keeper it is a pipeline of
// two stages, each a Batcher of its own: the stock store's call, then the
// database's write of the entries it answered. A batch leaves the first
// stage as soon as its call returns, so the next batch's script runs
// while the database writes, and entries that wait for the database go
// together in its next write.
type Enterer struct {
	b    *Batcher[entryCall, seckill.EntryResult]
	keep *Batcher[seckill.LotteryEntry, seckill.LotteryEntry] // nil without a keeper
}

type entryCall struct {
	sale *seckill.Sale
	req  seckill.EntryRequest
}

// NewEnterer returns an Enterer in front of store and, if keeper is not
// nil, keeper: an entry is then answered once keeper kept it.
func NewEnterer(store EntryStore, keeper EntryKeeper, cfg Config) *Enterer {
	e := &Enterer{b: NewBatcher(func(ctx context.Context, _ string, batch []entryCall) ([]seckill.EntryResult, error) {
		reqs := make([]seckill.EntryRequest, len(batch))
		for i, c := range batch {
			reqs[i] = c.req
		}
		// Every call of a batch has the same sale: the lane is the sale.
		return store.EnterBatch(ctx, batch[0].sale, reqs)
	}, cfg)}
	if keeper != nil {
		e.keep = NewBatcher(keeper.Keep, cfg) // the lane is the sale id
	}
	return e
}

// Enter records req for sale s, batched with the sale's other entries
// that have as many rate checks (checksLane), then, with a keeper, has the
// entry it answers kept, batched with the sale's other entries to keep.
func (e *Enterer) Enter(ctx context.Context, s *seckill.Sale, req seckill.EntryRequest) (seckill.EntryResult, error) {
	res, err := e.b.Do(ctx, checksLane(s.ID, len(req.RateChecks)), entryCall{sale: s, req: req})
	if err != nil || e.keep == nil {
		return res, err
	}
	entry, ok := seckill.EntryToKeep(res)
	if !ok {
		return res, nil
	}
	kept, err := e.keep.Do(ctx, s.ID, entry)
	if err != nil {
		return seckill.EntryResult{}, err
	}
	return seckill.KeptAnswer(res, kept), nil
}

// Stop drains the batches in flight, the stock store's, then the
// database's.
func (e *Enterer) Stop(ctx context.Context) error {
	if err := e.b.Stop(ctx); err != nil || e.keep == nil {
		return err
	}
	return e.keep.Stop(ctx)
}

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
