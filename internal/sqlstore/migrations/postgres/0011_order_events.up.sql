-- The order-event outbox: one row per change of an order the shop hears
-- of, inserted in the same transaction as the change, then delivered at
-- least once by the event deliverer (seckill.EventOutbox). seq orders an
-- order's events; id is the event's stable id, unique so that no change
-- is ever recorded twice. state is pending, delivered or dead; a pending
-- row is leased by one deliverer (lease_owner) until lease_until_ms;
-- retry_from_ms starts its window of attempts (the event, or a redelivery).
CREATE TABLE order_events (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT        NOT NULL,
    type            VARCHAR(32) NOT NULL,
    order_id        TEXT        NOT NULL,
    reservation_id  TEXT        NOT NULL,
    sale_id         TEXT        NOT NULL,
    user_id         TEXT        NOT NULL,
    qty             BIGINT      NOT NULL,
    amount_cents    BIGINT      NOT NULL,
    currency        VARCHAR(3)  NOT NULL,
    at_ms           BIGINT      NOT NULL,
    state           VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts        BIGINT      NOT NULL DEFAULT 0,
    next_at_ms      BIGINT      NOT NULL,
    retry_from_ms   BIGINT      NOT NULL,
    lease_owner     TEXT        NOT NULL DEFAULT '',
    lease_until_ms  BIGINT      NOT NULL DEFAULT 0,
    last_error      TEXT        NOT NULL DEFAULT '',
    delivered_at_ms BIGINT,
    dead_at_ms      BIGINT,
    CONSTRAINT order_events_id_key UNIQUE (id),
    CONSTRAINT order_events_state_known CHECK (state IN ('pending', 'delivered', 'dead'))
);

-- Serves Claim (pending rows due, soonest first) and the lag and dead
-- letter counts.
CREATE INDEX order_events_due_idx ON order_events (state, next_at_ms);

-- Serves Claim's test that no earlier event of the order is undelivered.
CREATE INDEX order_events_order_idx ON order_events (order_id, seq);
