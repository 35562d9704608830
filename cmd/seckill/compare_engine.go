package main

import (
	"context"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/strategies"
)

// compareEngine is seckill's own reserve path for the "seckill" strategy
// of `bench compare`: internal/redis's stock store behind
// internal/combiner, as serve wires them.
type compareEngine struct{}

func (compareEngine) OpenStock(ctx context.Context, url, keyPrefix string) (strategies.EngineStock, error) {
	store, err := redis.New(ctx, url, redis.WithKeyPrefix(keyPrefix))
	if err != nil {
		return nil, err
	}
	return &combinedStock{Store: store, comb: combiner.New(store, combiner.Config{})}, nil
}

type combinedStock struct {
	*redis.Store
	comb *combiner.Combiner
}

func (c *combinedStock) ReserveOne(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return c.comb.Reserve(ctx, saleID, req)
}

func (c *combinedStock) Close(ctx context.Context) error {
	err := c.comb.Stop(ctx)
	c.Store.Close()
	return err
}
