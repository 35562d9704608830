-- Orders keyed by reservation id alone, and the per-buyer limit read
-- answered from an index.
--
-- The order id is "o-" || reservation_id (seckill.OrderIDOf), so its own
-- unique index (the PRIMARY KEY of 0002) duplicated the one on
-- reservation_id: one more b-tree for the order writer to insert into
-- per order, for a uniqueness the CHECK below now derives from
-- reservation_id's. Nothing looks an order up by id.
--
-- orders_sale_user_idx also holds status and qty, so the writer's read of
-- what each buyer of a batch holds (SUM(qty) of the orders not cancelled)
-- is answered from the index, without a visit to each order's row.
--
-- SQLite changes neither a key nor a CHECK in place: the table is built
-- anew and its rows copied (inside the migration's transaction).
CREATE TABLE orders_0009 (
    id             TEXT    NOT NULL,
    reservation_id TEXT    NOT NULL PRIMARY KEY,
    sale_id        TEXT    NOT NULL REFERENCES sales (id),
    user_id        TEXT    NOT NULL,
    qty            INTEGER NOT NULL,
    amount_cents   INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    pay_by_ms      INTEGER NOT NULL,
    reserved_at_ms INTEGER NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    cancel_reason  TEXT,
    CHECK (id = 'o-' || reservation_id),
    CHECK (qty > 0),
    CHECK (amount_cents >= 0),
    CHECK (status IN ('ordered', 'paid', 'cancelled'))
) STRICT;
INSERT INTO orders_0009 (id, reservation_id, sale_id, user_id, qty, amount_cents, status,
        pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason)
    SELECT id, reservation_id, sale_id, user_id, qty, amount_cents, status,
        pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason
    FROM orders;
DROP TABLE orders;
ALTER TABLE orders_0009 RENAME TO orders;

-- As in 0002: serves ExpiredOrders.
CREATE INDEX orders_status_pay_by_idx ON orders (status, pay_by_ms);
-- As in 0007, and covering the limit read.
CREATE INDEX orders_sale_user_idx ON orders (sale_id, user_id, status, qty);
