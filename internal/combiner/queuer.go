package combiner

import (
	"context"

	"github.com/seckill-dev/seckill"
)

var _ seckill.Queuer = (*Queuer)(nil)

// QueueStore gives a batch of buyers places in one sale's waiting room in
// one call (internal/redis.Queue).
type QueueStore interface {
	JoinBatch(ctx context.Context, s *seckill.Sale, perIP int64, reqs []seckill.QueueJoin) ([]seckill.QueueJoinResult, error)
}

// Queuer batches waiting-room joins per sale: one script call per batch.
type Queuer struct {
	b *Batcher[joinCall, seckill.QueueJoinResult]
}

type joinCall struct {
	sale  *seckill.Sale
	perIP int64
	req   seckill.QueueJoin
}

// NewQueuer returns a Queuer in front of store.
func NewQueuer(store QueueStore, cfg Config) *Queuer {
	return &Queuer{b: NewBatcher(func(ctx context.Context, _ string, batch []joinCall) ([]seckill.QueueJoinResult, error) {
		reqs := make([]seckill.QueueJoin, len(batch))
		for i, c := range batch {
			reqs[i] = c.req
		}
		return store.JoinBatch(ctx, batch[0].sale, batch[0].perIP, reqs)
	}, cfg)}
}

// Join gives req a place in sale s's waiting room, batched with the
// sale's other joins that have as many rate checks (checksLane).
func (q *Queuer) Join(ctx context.Context, s *seckill.Sale, perIP int64, req seckill.QueueJoin) (seckill.QueueJoinResult, error) {
	return q.b.Do(ctx, checksLane(s.ID, len(req.RateChecks)), joinCall{sale: s, perIP: perIP, req: req})
}

// Stop drains the batches in flight.
func (q *Queuer) Stop(ctx context.Context) error { return q.b.Stop(ctx) }
