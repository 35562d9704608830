-- Restore requests: the durable record of one reservation's restore
-- (seckill.RestoreRequest), keyed by its reservation id. parked: the
-- reservation has no order yet, and its order is created cancelled,
-- taking no stock, when it lands; redis_pending: the database step is
-- done, the units are not yet back in Redis; done: both steps are done.
--
-- Only well-formed reservation ids are ever restored (their sale id is
-- part of them), so the sale must exist: the foreign key says so.
CREATE TABLE restore_requests (
    reservation_id TEXT        NOT NULL PRIMARY KEY,
    sale_id        VARCHAR(64) NOT NULL REFERENCES sales (id),
    reason         TEXT        NOT NULL,
    state          TEXT        NOT NULL,
    attempts       BIGINT      NOT NULL,
    -- '' while no attempt failed.
    last_error     TEXT        NOT NULL,
    -- NULL until the request is reported as stuck.
    alerted_at_ms  BIGINT,
    created_at_ms  BIGINT      NOT NULL,
    updated_at_ms  BIGINT      NOT NULL,
    CONSTRAINT restore_requests_state_known CHECK (state IN ('parked', 'redis_pending', 'done')),
    CONSTRAINT restore_requests_attempts_nonnegative CHECK (attempts >= 0)
);

-- Serves RestoreRequests (one state, oldest first): the retry loop and the
-- alert on requests parked too long.
CREATE INDEX restore_requests_state_created_idx ON restore_requests (state, created_at_ms);

-- Serves per-sale questions (reconciliation) and the foreign key.
CREATE INDEX restore_requests_sale_id_idx ON restore_requests (sale_id);
