-- Payments confirmed by the shop's side (seckill.DecidePayment).
--
-- Orders take two more statuses: refund_due (paid after the order was
-- cancelled and its unit went back) and refunded. SQLite changes no CHECK
-- in place: the table is built anew and its rows copied (inside the
-- migration's transaction), as in 0009; without the foreign key to sales, as in 0013.
CREATE TABLE orders_0014 (
    id             TEXT    NOT NULL,
    reservation_id TEXT    NOT NULL PRIMARY KEY,
    sale_id        TEXT    NOT NULL,
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
    CHECK (status IN ('ordered', 'paid', 'cancelled', 'refund_due', 'refunded'))
) STRICT;
INSERT INTO orders_0014 (id, reservation_id, sale_id, user_id, qty, amount_cents, status,
        pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason)
    SELECT id, reservation_id, sale_id, user_id, qty, amount_cents, status,
        pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason
    FROM orders;
DROP TABLE orders;
ALTER TABLE orders_0014 RENAME TO orders;
CREATE INDEX orders_status_pay_by_idx ON orders (status, pay_by_ms);
CREATE INDEX orders_sale_user_idx ON orders (sale_id, user_id, status, qty);

-- payment_events: every payment event received, once per event id (the
-- provider's): the same id again is answered from here and changes
-- nothing. outcome is what it did (seckill.PaymentOutcome); from_status
-- and to_status the order's move (equal when it did not move).
CREATE TABLE payment_events (
    event_id       TEXT    NOT NULL PRIMARY KEY,
    type           TEXT    NOT NULL,
    reservation_id TEXT    NOT NULL,
    sale_id        TEXT    NOT NULL,
    amount_cents   INTEGER NOT NULL,
    currency       TEXT    NOT NULL,
    source         TEXT    NOT NULL,
    outcome        TEXT    NOT NULL,
    from_status    TEXT    NOT NULL,
    to_status      TEXT    NOT NULL,
    detail         TEXT    NOT NULL,
    received_at_ms INTEGER NOT NULL
) STRICT;

-- Serves the operator's lists by outcome, newest first.
CREATE INDEX payment_events_outcome_idx ON payment_events (outcome, received_at_ms, event_id);
-- Serves an order's payments.
CREATE INDEX payment_events_reservation_idx ON payment_events (reservation_id);
