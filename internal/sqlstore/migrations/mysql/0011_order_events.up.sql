-- The order-event outbox: one row per change of an order the shop hears
-- of, inserted in the same transaction as the change, then delivered at
-- least once by the event deliverer (seckill.EventOutbox). seq orders an
-- order's events; id is the event's stable id, unique so that no change
-- is ever recorded twice. state is pending, delivered or dead; a pending
-- row is leased by one deliverer (lease_owner) until lease_until_ms;
-- retry_from_ms starts its window of attempts (the event, or a redelivery).
--
-- One statement (MySQL commits DDL implicitly). Ids are bytes, as a failed
-- order's reservation id may be any 255 bytes. order_events_due_idx serves
-- Claim (pending rows due, soonest first) and the lag and dead letter
-- counts; order_events_order_idx Claim's test that no earlier event of the
-- order is undelivered.
CREATE TABLE order_events (
    seq             BIGINT        NOT NULL AUTO_INCREMENT,
    id              VARBINARY(300) NOT NULL,
    type            VARCHAR(32)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id        VARBINARY(300) NOT NULL,
    reservation_id  VARBINARY(300) NOT NULL,
    sale_id         VARCHAR(255)  NOT NULL,
    user_id         VARCHAR(255)  NOT NULL,
    qty             BIGINT        NOT NULL,
    amount_cents    BIGINT        NOT NULL,
    currency        CHAR(3)       CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    at_ms           BIGINT        NOT NULL,
    state           VARCHAR(16)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'pending',
    attempts        BIGINT        NOT NULL DEFAULT 0,
    next_at_ms      BIGINT        NOT NULL,
    retry_from_ms   BIGINT        NOT NULL,
    lease_owner     VARCHAR(128)  NOT NULL DEFAULT '',
    lease_until_ms  BIGINT        NOT NULL DEFAULT 0,
    last_error      TEXT          NOT NULL DEFAULT '',
    delivered_at_ms BIGINT        NULL,
    dead_at_ms      BIGINT        NULL,
    PRIMARY KEY (seq),
    UNIQUE KEY order_events_id_key (id),
    INDEX order_events_due_idx (state, next_at_ms),
    INDEX order_events_order_idx (order_id, seq),
    CONSTRAINT order_events_state_known CHECK (state IN ('pending', 'delivered', 'dead'))
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
