package combiner

import (
	"context"

	"github.com/seckill-dev/seckill"
)

var _ seckill.Queuer = (*Queuer)(nil)

// QueueStore gives a batch of buyers places in one sale's waiting room in
// one call (internal/redis.Queue), and reads a buyer's position.
type QueueStore interface {
	JoinBatch(ctx context.Context, s *seckill.Sale, perIP int64, reqs []seckill.QueueJoin) ([]seckill.QueueJoinResult, error)
	Position(ctx context.Context, saleID, userID string) (pos int64, ok bool, err error)
}

// PlaceKeeper keeps a batch of places of one sale in the database, in one
// write, and returns what it keeps of each: the place, or the one its
// buyer had, which the stock store is given back (internal/waitroom.Book).
type PlaceKeeper interface {
	Keep(ctx context.Context, saleID string, places []seckill.QueuePlace) ([]seckill.QueuePlace, error)
}

// Queuer batches waiting-room joins per sale: one script call per batch.
// With a keeper it is a pipeline of two stages, as the Enterer is: the
// stock store's call, then the database's write of the places it gave.
type Queuer struct {
	store QueueStore
	b     *Batcher[joinCall, seckill.QueueJoinResult]
	keep  *Batcher[seckill.QueuePlace, seckill.QueuePlace] // nil without a keeper
}

type joinCall struct {
	sale  *seckill.Sale
	perIP int64
	req   seckill.QueueJoin
}

// NewQueuer returns a Queuer in front of store and, if keeper is not nil,
// keeper: a place is then answered once keeper kept it.
func NewQueuer(store QueueStore, keeper PlaceKeeper, cfg Config) *Queuer {
	q := &Queuer{store: store, b: NewBatcher(func(ctx context.Context, _ string, batch []joinCall) ([]seckill.QueueJoinResult, error) {
		reqs := make([]seckill.QueueJoin, len(batch))
		for i, c := range batch {
			reqs[i] = c.req
		}
		return store.JoinBatch(ctx, batch[0].sale, batch[0].perIP, reqs)
	}, cfg)}
	if keeper != nil {
		q.keep = NewBatcher(keeper.Keep, cfg) // the lane is the sale id
	}
	return q
}

// Join gives req a place in sale s's waiting room, batched with the
// sale's other joins that have as many rate checks (checksLane), then,
// with a keeper, has the place kept, batched with the sale's other places
// to keep. A buyer the database knew with another place is answered that
// place, at its position now.
func (q *Queuer) Join(ctx context.Context, s *seckill.Sale, perIP int64, req seckill.QueueJoin) (seckill.QueueJoinResult, error) {
	res, err := q.b.Do(ctx, checksLane(s.ID, len(req.RateChecks)), joinCall{sale: s, perIP: perIP, req: req})
	if err != nil || q.keep == nil {
		return res, err
	}
	place, ok := seckill.PlaceToKeep(res)
	if !ok {
		return res, nil
	}
	kept, err := q.keep.Do(ctx, s.ID, place)
	if err != nil || kept == place {
		return res, err
	}
	pos, ok, err := q.store.Position(ctx, s.ID, kept.UserID)
	if err != nil {
		return seckill.QueueJoinResult{}, err
	}
	if !ok {
		return seckill.QueueJoinResult{Refused: seckill.ETRYLATER}, nil
	}
	return seckill.QueueJoinResult{Position: pos, Place: kept}, nil
}

// Stop drains the batches in flight, the stock store's, then the
// database's.
func (q *Queuer) Stop(ctx context.Context) error {
	if err := q.b.Stop(ctx); err != nil || q.keep == nil {
		return err
	}
	return q.keep.Stop(ctx)
}
