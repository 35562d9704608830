package sqlstore

import (
	"context"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// SaleWork counts, in one statement, what the database still has to do
// for a sale, as the archiver (internal/archive) asks before it frees the
// sale's Redis keys: recorded is the number of reservations with an order
// or a failed order, awaitingPayment the orders still ordered (the
// payment timeout will cancel and restore them), openRestores the restore
// requests not done (parked or redis_pending).
func (st *OrderStore) SaleWork(ctx context.Context, saleID string) (recorded, awaitingPayment, openRestores int64, err error) {
	b := st.q.bind
	query := `SELECT (SELECT COUNT(*) FROM orders WHERE sale_id = ` + b(1) + `),
		(SELECT COUNT(*) FROM failed_orders WHERE sale_id = ` + b(2) + `),
		(SELECT COUNT(*) FROM orders WHERE sale_id = ` + b(3) + ` AND status = ` + b(4) + `),
		(SELECT COUNT(*) FROM restore_requests WHERE sale_id = ` + b(5) + ` AND state <> ` + b(6) + `)`
	var orders, failed int64
	err = st.db.read.QueryRowContext(ctx, query, saleID, saleID, saleID, string(seckill.OrderPlaced), saleID,
		string(seckill.RestoreStateDone)).Scan(&orders, &failed, &awaitingPayment, &openRestores)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("work of sale %s: %w", saleID, err)
	}
	return orders + failed, awaitingPayment, openRestores, nil
}
