package sqlstore

import (
	"context"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// MaxBuyerOrders caps BuyerOrders: a buyer's orders of one sale are at
// most its per-user limit (seckill.MaxPurchaseLimit), plus the cancelled
// ones of a buyer who bought again.
const MaxBuyerOrders = 100

// BuyerOrders returns the buyer's orders of a sale, oldest first, at most
// MaxBuyerOrders (on the orders (sale_id, user_id) index). An invalid sale
// or user id has none.
func (st *OrderStore) BuyerOrders(ctx context.Context, saleID, userID string) ([]*seckill.Order, error) {
	if !seckill.ValidSaleID(saleID) || !seckill.ValidUserID(userID) {
		return nil, nil
	}
	b := st.q.bind
	query := `SELECT ` + orderColumns + ` FROM orders WHERE sale_id = ` + b(1) + ` AND user_id = ` + b(2) +
		` ORDER BY created_at_ms, reservation_id LIMIT ` + fmt.Sprint(MaxBuyerOrders)
	orders, err := queryAll(ctx, st.db.read, scanOrder, query, saleID, userID)
	if err != nil {
		return nil, fmt.Errorf("orders of a buyer of sale %s: %w", saleID, st.db.classify(err))
	}
	return orders, nil
}
