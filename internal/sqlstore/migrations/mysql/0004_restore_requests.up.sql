-- Restore requests: the durable record of one reservation's restore
-- (seckill.RestoreRequest), keyed by its reservation id. parked: the
-- reservation has no order yet, and its order is created cancelled,
-- taking no stock, when it lands; redis_pending: the database step is
-- done, the units are not yet back in Redis; done: both steps are done.
--
-- One statement, so the file either applies or can be re-run (MySQL
-- commits DDL implicitly). Only well-formed reservation ids are ever
-- restored (the store refuses others before they reach a query), so the
-- ids are ASCII with a binary collation exactly like orders.reservation_id
-- and sales.id: the foreign key needs sale_id to match sales.id exactly,
-- and a well-formed id has no trailing space for the _bin collations'
-- padding to blur (the reason failed_orders, whose ids may be anything,
-- uses VARBINARY instead). last_error is '' while no attempt failed;
-- alerted_at_ms is NULL until the request is reported as stuck.
--
-- restore_requests_state_created_idx serves RestoreRequests (one state,
-- oldest first); restore_requests_sale_id_idx serves per-sale questions
-- (reconciliation) and the foreign key.
CREATE TABLE restore_requests (
    reservation_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sale_id        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reason         TEXT         NOT NULL,
    state          VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempts       BIGINT       NOT NULL,
    last_error     TEXT         NOT NULL,
    alerted_at_ms  BIGINT       NULL,
    created_at_ms  BIGINT       NOT NULL,
    updated_at_ms  BIGINT       NOT NULL,
    PRIMARY KEY (reservation_id),
    INDEX restore_requests_state_created_idx (state, created_at_ms),
    INDEX restore_requests_sale_id_idx (sale_id),
    CONSTRAINT restore_requests_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id),
    CONSTRAINT restore_requests_state_known CHECK (state IN ('parked', 'redis_pending', 'done')),
    CONSTRAINT restore_requests_attempts_nonnegative CHECK (attempts >= 0)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
