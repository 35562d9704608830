package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// SaleWork counts, in one statement, what the database still has to do
// for a sale, as the archiver (internal/archive) asks before it frees the
// sale's Redis keys: recorded is the number of reservations with an order
// or a failed order, awaitingPayment the orders still ordered (the
// payment timeout will cancel and restore them), openRestores the restore
// requests not done (parked or redis_pending).
func (st *LedgerStore) SaleWork(ctx context.Context, saleID string) (recorded, awaitingPayment, openRestores int64, err error) {
	var orders, failed int64
	err = st.db.read.QueryRowContext(ctx, st.sql.ledger.saleWork, saleID, saleID, saleID, string(seckill.OrderPlaced), saleID,
		string(seckill.RestoreStateDone)).Scan(&orders, &failed, &awaitingPayment, &openRestores)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("work of sale %s: %w", saleID, err)
	}
	return orders + failed, awaitingPayment, openRestores, nil
}

// SaleCounters are the database's counts of a sale for the
// reconciliation gauges, read without walking its orders: the sale's row
// (its stock is updated in the same transactions that create, cancel and
// restore orders), and its failed orders and unfinished restore requests,
// which are few.
type SaleCounters struct {
	Stock        int64 // units put on sale
	Unsold       int64 // units not in an order ordered or paid
	FailedOrders int64
	FailedUnits  int64
	Parked       int64 // restore requests waiting for their order
	RedisPending int64 // restore requests waiting for their Redis step
	Alerted      int64 // unfinished restore requests that raised an alert
}

// SaleCounters reads a sale's SaleCounters in one statement; ErrNotFound
// for an unknown sale. The restore counts use the (state, created) index:
// they cost what is unfinished, not the sale's history.
func (st *LedgerStore) SaleCounters(ctx context.Context, saleID string) (SaleCounters, error) {
	parked, pending := string(seckill.RestoreStateParked), string(seckill.RestoreStateRedisPending)
	var c SaleCounters
	err := st.db.read.QueryRowContext(ctx, st.sql.ledger.saleCounters, saleID, saleID,
		parked, parked, pending, saleID,
		pending, parked, pending, saleID,
		parked, pending, saleID, saleID).Scan(&c.Stock, &c.Unsold, &c.FailedOrders, &c.FailedUnits, &c.Parked, &c.RedisPending, &c.Alerted)
	if errors.Is(err, sql.ErrNoRows) {
		return SaleCounters{}, fmt.Errorf("counters of sale %s: %w", saleID, seckill.ErrNotFound)
	} else if err != nil {
		return SaleCounters{}, fmt.Errorf("counters of sale %s: %w", saleID, err)
	}
	return c, nil
}
