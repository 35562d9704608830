package strategies

import (
	"context"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/redis"
)

// testEngine is the engine's reserve path as cmd/seckill wires it for
// `bench compare` (compareEngine there): only the tests import the
// adapters.
type testEngine struct{}

func (testEngine) OpenStock(ctx context.Context, url, keyPrefix string) (EngineStock, error) {
	store, err := redis.New(ctx, url, redis.WithKeyPrefix(keyPrefix))
	if err != nil {
		return nil, err
	}
	return engineStock{store.StockStore(), store, combiner.New(store.StockStore(), combiner.Config{})}, nil
}

type engineStock struct {
	redis.StockStore
	store *redis.Store
	c     *combiner.Combiner
}

func (e engineStock) ReserveOne(ctx context.Context, sale string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return e.c.Reserve(ctx, sale, req)
}

func (e engineStock) Close(ctx context.Context) error {
	err := e.c.Stop(ctx)
	e.store.Close()
	return err
}
