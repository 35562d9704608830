-- Orders: one row per reservation that became an order. The order id is
-- derived from the reservation id (seckill.OrderIDOf), and reservation_id
-- is unique: at-least-once delivery from the broker can never create a
-- second order for one reservation.
--
-- amount_cents is qty × the sale's price at the time of the order;
-- cancel_reason is NULL until the order is cancelled.
CREATE TABLE orders (
    id             TEXT    NOT NULL PRIMARY KEY,
    reservation_id TEXT    NOT NULL UNIQUE,
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
    CHECK (qty > 0),
    CHECK (amount_cents >= 0),
    CHECK (status IN ('ordered', 'paid', 'cancelled'))
) STRICT;

-- Serves ExpiredOrders (status = 'ordered' AND pay_by_ms <= now, oldest
-- deadline first).
CREATE INDEX orders_status_pay_by_idx ON orders (status, pay_by_ms);

-- Serves per-sale questions (reconciliation) and the foreign key.
CREATE INDEX orders_sale_id_idx ON orders (sale_id);
