-- Orders: one row per reservation that became an order. The order id is
-- derived from the reservation id (seckill.OrderIDOf), and reservation_id
-- is unique: at-least-once delivery from the broker can never create a
-- second order for one reservation.
CREATE TABLE orders (
    id             TEXT        NOT NULL PRIMARY KEY,
    reservation_id TEXT        NOT NULL,
    sale_id        VARCHAR(64) NOT NULL REFERENCES sales (id),
    user_id        TEXT        NOT NULL,
    qty            BIGINT      NOT NULL,
    -- qty × the sale's price at the time of the order.
    amount_cents   BIGINT      NOT NULL,
    status         TEXT        NOT NULL,
    pay_by_ms      BIGINT      NOT NULL,
    reserved_at_ms BIGINT      NOT NULL,
    created_at_ms  BIGINT      NOT NULL,
    updated_at_ms  BIGINT      NOT NULL,
    -- NULL until the order is cancelled.
    cancel_reason  TEXT,
    CONSTRAINT orders_reservation_id_key UNIQUE (reservation_id),
    CONSTRAINT orders_qty_positive CHECK (qty > 0),
    CONSTRAINT orders_amount_nonnegative CHECK (amount_cents >= 0),
    CONSTRAINT orders_status_known CHECK (status IN ('ordered', 'paid', 'cancelled'))
);

-- Serves ExpiredOrders (status = 'ordered' AND pay_by_ms <= now, oldest
-- deadline first).
CREATE INDEX orders_status_pay_by_idx ON orders (status, pay_by_ms);

-- Serves per-sale questions (reconciliation) and the foreign key.
CREATE INDEX orders_sale_id_idx ON orders (sale_id);
