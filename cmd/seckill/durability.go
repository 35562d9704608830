package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// healDB is the database as the heal watcher reads it.
type healDB struct {
	sales  *sqlstore.SaleStore
	orders *sqlstore.OrderStore
}

func (d healDB) Sale(ctx context.Context, id string) (*seckill.Sale, error) {
	return d.sales.Sale(ctx, id)
}
func (d healDB) OrdersAfter(ctx context.Context, id, after string, limit int) ([]*seckill.Order, error) {
	return d.orders.OrdersAfter(ctx, id, after, limit)
}
func (d healDB) FailedOrdersAfter(ctx context.Context, id, after string, limit int) ([]*seckill.FailedOrder, error) {
	return d.orders.FailedOrdersAfter(ctx, id, after, limit)
}

// claimKey derives the key that signs reservation ids from the JWT
// secret, which every node of a deployment already shares; a separate
// derivation, so that no id tag can ever serve as a token signature.
func claimKey(jwtSecret string) []byte {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	m.Write([]byte("seckill reservation ids v1"))
	return m.Sum(nil)
}

// checkDurability refuses to start in fsync mode on a Redis that does not
// fsync every write, or whose settings cannot be read unless the operator
// vouches for them (--redis-config-check off).
func checkDurability(ctx context.Context, stock *redis.Store, d redis.Durability, check string, logger *slog.Logger) error {
	switch check {
	case "on", "off":
	default:
		return fmt.Errorf("redis config check %q: want on or off", check)
	}
	if d.Mode != redis.DurabilityFsync {
		return nil
	}
	err := stock.CheckFsync(ctx)
	if errors.Is(err, redis.ErrConfigRefused) && check == "off" {
		logger.Warn("redis durability fsync: CONFIG is refused; trusting the operator that Redis runs appendonly yes and appendfsync always (--redis-config-check off)", "err", err)
		return nil
	}
	return err
}
