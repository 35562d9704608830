-- Payments confirmed by the shop's side (seckill.DecidePayment).
--
-- MySQL commits DDL implicitly: each statement is simple and independent.
--
-- Orders take two more statuses: refund_due (paid after the order was
-- cancelled and its unit went back) and refunded.
ALTER TABLE orders
    DROP CONSTRAINT orders_status_known,
    ADD CONSTRAINT orders_status_known CHECK (status IN ('ordered', 'paid', 'cancelled', 'refund_due', 'refunded'));

-- payment_events: every payment event received, once per event id (the
-- provider's, printable ASCII): the same id again is answered from here
-- and changes nothing. outcome is what it did (seckill.PaymentOutcome);
-- from_status and to_status the order's move (equal when it did not move).
-- The outcome index serves the operator's lists, newest first; the
-- reservation index an order's payments.
CREATE TABLE payment_events (
    event_id       VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    type           VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reservation_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sale_id        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    amount_cents   BIGINT       NOT NULL,
    currency       CHAR(3)      CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    source         VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    outcome        VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    from_status    VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    to_status      VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    detail         TEXT         NOT NULL,
    received_at_ms BIGINT       NOT NULL,
    PRIMARY KEY (event_id),
    INDEX payment_events_outcome_idx (outcome, received_at_ms, event_id),
    INDEX payment_events_reservation_idx (reservation_id)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
