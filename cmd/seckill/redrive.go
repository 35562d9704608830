package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis"
)

// redriveResolver is the failed-order resolver of the API: the database's,
// and a re-drive also takes its units in the stock store, unless Redis
// counts them already (the claim it granted is still active there). Else
// the database would have sold a unit Redis never counted, which the heal
// watcher reads as lost writes (a false ALERT and a heal).
//
// The database commits first: a re-drive it refuses changes nothing in
// Redis. Should the Redis step fail, the heal watcher settles the
// difference, as it settles any.
type redriveResolver struct {
	orders interface {
		seckill.FailedOrderResolver
		Order(ctx context.Context, reservationID string) (*seckill.Order, error)
	}
	stock  redis.Redriver
	logger *slog.Logger
}

func (r redriveResolver) ResolveFailedOrder(ctx context.Context, reservationID string, action seckill.FailedOrderAction, note, actor string, now time.Time, payTimeout time.Duration) (*seckill.Resolution, bool, error) {
	res, changed, err := r.orders.ResolveFailedOrder(ctx, reservationID, action, note, actor, now, payTimeout)
	if err != nil || !changed || action != seckill.ResolveRedrive {
		return res, changed, err
	}
	o, err := r.orders.Order(ctx, reservationID)
	if err == nil {
		_, err = r.stock.TakeRedriven(ctx, o, now)
	}
	if err != nil {
		r.logger.Warn("re-drive: the stock store does not count the order's units; the heal watcher will", "reservation", reservationID, "err", err)
	}
	return res, changed, nil
}
