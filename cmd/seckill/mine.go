package main

import (
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// buyerClaims is httpapi.BuyerClaims over the database (a buyer's orders)
// and the stock store (the units it counts as theirs).
type buyerClaims struct {
	*sqlstore.OrderStore
	redis.StockStore
}
