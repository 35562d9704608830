// Package guarded is the backends as the request paths see them: each call
// to Redis or the database goes through that backend's circuit breaker
// (internal/breaker), so that while a backend is down a node answers 503 at
// once instead of sending it every request, and its return is met by one
// probe every OpenFor, not by the whole queue. The background workers have
// back-offs of their own and go straight to the clients.
//
// Each type wraps an interface of exactly the calls the request paths
// make, never the store itself: a call the request paths start making is
// a compile error here until it goes through the breaker too.
package guarded

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/breaker"
)

// NewBreakers makes the two breakers and registers their metrics on reg.
func NewBreakers(reg prometheus.Registerer) (redisB, dbB *breaker.Breaker) {
	open := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "seckill_breaker_state",
		Help: "State of each backend's circuit breaker: 0 closed, 1 open, 2 half-open (one probe in flight).",
	}, []string{"backend"})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_breaker_rejected_total",
		Help: "Calls a backend's open circuit breaker answered unavailable without making them.",
	}, []string{"backend"})
	reg.MustRegister(open, rejected)
	mk := func(name string) *breaker.Breaker {
		open.WithLabelValues(name).Set(0)
		rejected.WithLabelValues(name)
		return breaker.New(breaker.Config{
			Name:     name,
			OnState:  func(n string, s breaker.State) { open.WithLabelValues(n).Set(float64(s)) },
			OnReject: func(n string) { rejected.WithLabelValues(n).Inc() },
		})
	}
	return mk("redis"), mk("database")
}

// StockCalls are the stock store's calls the request paths make
// (internal/redis StockStore).
type StockCalls interface {
	Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error)
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
	Reservation(ctx context.Context, reservationID string) (userID string, qty int64, status string, err error)
	Preheat(ctx context.Context, s *seckill.Sale) (created bool, err error)
}

// Stock is the stock store as requests see it.
type Stock struct {
	Store StockCalls
	B     *breaker.Breaker
}

func (g Stock) Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) ([]seckill.ReserveResult, error) {
		return g.Store.Reserve(ctx, saleID, reqs)
	})
}

func (g Stock) Stock(ctx context.Context, saleID string) (seckill.StockLevel, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (seckill.StockLevel, error) {
		return g.Store.Stock(ctx, saleID)
	})
}

func (g Stock) Reservation(ctx context.Context, reservationID string) (userID string, qty int64, status string, err error) {
	type rec struct {
		user, status string
		qty          int64
	}
	r, err := breaker.Do(ctx, g.B, func(ctx context.Context) (rec, error) {
		u, q, st, err := g.Store.Reservation(ctx, reservationID)
		return rec{u, st, q}, err
	})
	return r.user, r.qty, r.status, err
}

// Preheat loads a sale on an operator's demand (the API's fallback when
// no preheat scheduler is wired).
func (g Stock) Preheat(ctx context.Context, s *seckill.Sale) (bool, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (bool, error) { return g.Store.Preheat(ctx, s) })
}

// Limiter is the shared rate limiter (internal/redis RateLimiter) as
// requests see it: behind the stock store's breaker, on the same Redis.
type Limiter struct {
	Limiter seckill.RateLimiter
	B       *breaker.Breaker
}

// Allow is refused at once while the breaker is open (the guard then lets
// the request through unlimited, as for any limiter failure), but its own
// failures are not counted: it gives up after a short timeout of its own,
// and a Redis merely slow for it must not open the breaker for everyone.
func (g Limiter) Allow(ctx context.Context, key string, limit seckill.RateLimit) (seckill.RateResult, error) {
	if err := g.B.Refusing(); err != nil {
		return seckill.RateResult{}, err
	}
	return g.Limiter.Allow(ctx, key, limit)
}

// SaleCalls are the sale store's calls the request paths make
// (internal/sqlstore SaleStore).
type SaleCalls interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
	CreateSale(ctx context.Context, s *seckill.Sale) error
}

// Sales is the sale store as requests see it.
type Sales struct {
	SaleStore SaleCalls
	B         *breaker.Breaker
}

func (g Sales) Sale(ctx context.Context, id string) (*seckill.Sale, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (*seckill.Sale, error) { return g.SaleStore.Sale(ctx, id) })
}

func (g Sales) CreateSale(ctx context.Context, s *seckill.Sale) error {
	_, err := breaker.Do(ctx, g.B, func(ctx context.Context) (struct{}, error) { return struct{}{}, g.SaleStore.CreateSale(ctx, s) })
	return err
}

// OrderCalls are the order store's calls the buyer's routes make
// (internal/sqlstore OrderStore).
type OrderCalls interface {
	Order(ctx context.Context, reservationID string) (*seckill.Order, error)
	FailedOrder(ctx context.Context, reservationID string) (*seckill.FailedOrder, error)
	FailedOrders(ctx context.Context, f seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error)
	FailedOrderCounts(ctx context.Context) ([]seckill.FailedOrderCount, error)
	PayOrder(ctx context.Context, reservationID string, now time.Time) (*seckill.Order, error)
}

// Orders is the order store as the buyer's routes see it.
type Orders struct {
	OrderStore OrderCalls
	B          *breaker.Breaker
}

func (g Orders) Order(ctx context.Context, id string) (*seckill.Order, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (*seckill.Order, error) { return g.OrderStore.Order(ctx, id) })
}

func (g Orders) FailedOrder(ctx context.Context, id string) (*seckill.FailedOrder, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (*seckill.FailedOrder, error) { return g.OrderStore.FailedOrder(ctx, id) })
}

func (g Orders) FailedOrders(ctx context.Context, f seckill.FailedOrderFilter) ([]*seckill.FailedOrder, string, error) {
	type page struct {
		rows []*seckill.FailedOrder
		next string
	}
	p, err := breaker.Do(ctx, g.B, func(ctx context.Context) (page, error) {
		rows, next, err := g.OrderStore.FailedOrders(ctx, f)
		return page{rows, next}, err
	})
	return p.rows, p.next, err
}

func (g Orders) FailedOrderCounts(ctx context.Context) ([]seckill.FailedOrderCount, error) {
	return breaker.Do(ctx, g.B, g.OrderStore.FailedOrderCounts)
}

func (g Orders) PayOrder(ctx context.Context, id string, now time.Time) (*seckill.Order, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (*seckill.Order, error) { return g.OrderStore.PayOrder(ctx, id, now) })
}

// KeyedOrders is the order store's OrderOfKey as the reservation route
// sees it (internal/sqlstore OrderStore).
type KeyedOrders struct {
	Store interface {
		OrderOfKey(ctx context.Context, saleID, userID, digest string) (*seckill.Order, error)
	}
	B *breaker.Breaker
}

func (g KeyedOrders) OrderOfKey(ctx context.Context, saleID, userID, digest string) (*seckill.Order, error) {
	return breaker.Do(ctx, g.B, func(ctx context.Context) (*seckill.Order, error) {
		return g.Store.OrderOfKey(ctx, saleID, userID, digest)
	})
}
