-- Payments confirmed by the shop's side (seckill.DecidePayment).
--
-- Orders take two more statuses: refund_due (paid after the order was
-- cancelled and its unit went back) and refunded.
ALTER TABLE orders DROP CONSTRAINT orders_status_known,
    ADD CONSTRAINT orders_status_known CHECK (status IN ('ordered', 'paid', 'cancelled', 'refund_due', 'refunded'));

-- payment_events: every payment event received, once per event id (the
-- provider's): the same id again is answered from here and changes
-- nothing. outcome is what it did (seckill.PaymentOutcome); from_status
-- and to_status the order's move (equal when it did not move).
CREATE TABLE payment_events (
    event_id       VARCHAR(128) NOT NULL,
    type           VARCHAR(32)  NOT NULL,
    reservation_id VARCHAR(128) NOT NULL,
    sale_id        VARCHAR(64)  NOT NULL,
    amount_cents   BIGINT       NOT NULL,
    currency       VARCHAR(3)   NOT NULL,
    source         VARCHAR(16)  NOT NULL,
    outcome        VARCHAR(16)  NOT NULL,
    from_status    VARCHAR(16)  NOT NULL,
    to_status      VARCHAR(16)  NOT NULL,
    detail         TEXT         NOT NULL,
    received_at_ms BIGINT       NOT NULL,
    CONSTRAINT payment_events_pkey PRIMARY KEY (event_id)
);

-- Serves the operator's lists by outcome, newest first (ids compared byte
-- for byte, whatever the database's collation).
CREATE INDEX payment_events_outcome_idx ON payment_events (outcome, received_at_ms, event_id COLLATE "C");
-- Serves an order's payments.
CREATE INDEX payment_events_reservation_idx ON payment_events (reservation_id);
