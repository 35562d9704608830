-- One buyer's failed orders of a sale (FailedOrderStore.BuyerFailedOrders,
-- behind GET /api/v1/sales/{id}/reservations/mine, which a buyer's page
-- polls while units are pending): failed_orders_sale_created_idx made
-- each read go through every failed order of the sale, and a sale gathers
-- failed orders by the thousand exactly when its buyers poll most, during
-- an outage. This index hands over the buyer's few rows; they are sorted
-- in memory.
--
-- Built CONCURRENTLY, so outside a transaction: writes to failed_orders go
-- on while it reads the table. The drop makes the build safe to repeat
-- (noTxMarker in migrate.go).
-- seckill:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS failed_orders_sale_user_idx;
CREATE INDEX CONCURRENTLY failed_orders_sale_user_idx ON failed_orders (sale_id, user_id);
