package main

import (
	"context"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/admitpace"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/repeats"
	"github.com/seckill-dev/seckill/internal/soldout"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/ticket"
)

// admittedStock is the stock store as a queue's ticket holders claim from
// it: a sale that is not first come takes their batches.
type admittedStock struct{ s redis.StockStore }

func (a admittedStock) Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return a.s.ReserveAdmitted(ctx, saleID, reqs)
}

// newQueue returns the API's side of queue sales: joins batched per sale
// like claims, the pace of adaptive sales (timed on the ticket holders'
// claims, as the combiner and the stock store serve them), tickets signed with a key every node derives from the JWT
// secret, and a combiner of its own for ticket holders' claims.
func (m *Main) newQueue(w *wired) *httpapi.QueueConfig {
	cfg := &m.Config
	// A place is answered once the database keeps it (waitroom.Book).
	batched := combiner.NewQueuer(m.stock.Queue(), w.places, combiner.Config{MaxBatch: cfg.MaxBatch, CallTimeout: cfg.RequestBudget})
	admitted := combiner.New(admittedStock{m.stock.StockStore()}, combiner.Config{MaxBatch: cfg.MaxBatch, CallTimeout: cfg.RequestBudget})
	m.closers = append(m.closers, batched.Stop, admitted.Stop)
	// A buyer's repeated join, once places are final, is answered from
	// memory: the same place.
	queuer := repeats.NewQueuer(batched, repeats.Config{Now: m.requestClock()})
	// Its own sold-out flag, so that a sell-out is told to everyone still
	// waiting from memory. Restores clear it through m.gate's announcement
	// only after its safety interval.
	gate := soldout.New(admitpace.Timed{Next: admitted, Latency: w.admitLatency}, soldout.Config{SafetyInterval: cfg.SoldOutInterval, Now: m.requestClock()})
	return &httpapi.QueueConfig{
		Queuer: queuer, Positions: m.stock.Queue(), Admitted: gate, SoldOut: gate.AnswerSoldOutAt,
		Tickets:     ticket.New(jwt.DeriveKey([]byte(cfg.JWTSecret), "seckill admission tickets v1")),
		OpensBefore: cfg.QueueOpensBefore, PerIP: int64(cfg.QueuePerIP), Pace: w.pacer.Pace,
		Kept: sqlstore.NewPlaceStore(m.db), Ready: m.stock.Readiness(),
	}
}
