-- Failed orders: reservations that could not become orders (the database
-- lacked the stock, or every attempt to persist them failed). One row per
-- reservation; an operator resolves each (refund or re-drive).
--
-- No foreign key to sales: a dead letter may name a sale that does not
-- exist, or none at all (an undecodable message), and must still be
-- recorded. payload is the raw message, for a re-drive. resolved_at_ms is
-- NULL until an operator resolves the row.
CREATE TABLE failed_orders (
    reservation_id TEXT    NOT NULL PRIMARY KEY,
    sale_id        TEXT    NOT NULL,
    user_id        TEXT    NOT NULL,
    qty            INTEGER NOT NULL,
    reason         TEXT    NOT NULL,
    attempts       INTEGER NOT NULL,
    payload        BLOB,
    created_at_ms  INTEGER NOT NULL,
    resolved_at_ms INTEGER
) STRICT;

-- Serves FailedOrders (newest first).
CREATE INDEX failed_orders_created_idx ON failed_orders (created_at_ms);

-- Serves per-sale questions (reconciliation).
CREATE INDEX failed_orders_sale_id_idx ON failed_orders (sale_id);
