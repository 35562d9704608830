-- Restore requests: the durable record of one reservation's restore
-- (seckill.RestoreRequest), keyed by its reservation id. parked: the
-- reservation has no order yet, and its order is created cancelled,
-- taking no stock, when it lands; redis_pending: the database step is
-- done, the units are not yet back in Redis; done: both steps are done.
--
-- Only well-formed reservation ids are ever restored (their sale id is
-- part of them), so the sale must exist: the foreign key says so.
-- last_error is '' while no attempt failed; alerted_at_ms is NULL until
-- the request is reported as stuck.
CREATE TABLE restore_requests (
    reservation_id TEXT    NOT NULL PRIMARY KEY,
    sale_id        TEXT    NOT NULL REFERENCES sales (id),
    reason         TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    attempts       INTEGER NOT NULL,
    last_error     TEXT    NOT NULL,
    alerted_at_ms  INTEGER,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    CHECK (state IN ('parked', 'redis_pending', 'done')),
    CHECK (attempts >= 0)
) STRICT;

-- Serves RestoreRequests (one state, oldest first): the retry loop and
-- the alert on requests parked too long.
CREATE INDEX restore_requests_state_created_idx ON restore_requests (state, created_at_ms);

-- Serves per-sale questions (reconciliation) and the foreign key.
CREATE INDEX restore_requests_sale_id_idx ON restore_requests (sale_id);
