-- Failed orders: reservations that could not become orders (the database
-- lacked the stock, or every attempt to persist them failed). One row per
-- reservation; an operator resolves each (refund or re-drive).
--
-- One statement, so the file either applies or can be re-run. No foreign
-- key to sales, and utf8mb4 rather than ASCII ids: a dead letter may name a
-- sale that does not exist, or carry a malformed id, and must still be
-- recorded. reservation_id is VARBINARY so that, as in the other dialects,
-- keys compare byte for byte: the _bin collations of MariaDB pad spaces,
-- so 'x' and 'x ' would collide. payload is the raw message, for a
-- re-drive; resolved_at_ms is NULL until an operator resolves the row.
--
-- failed_orders_created_idx serves FailedOrders (newest first);
-- failed_orders_sale_id_idx serves per-sale questions (reconciliation).
CREATE TABLE failed_orders (
    reservation_id VARBINARY(255) NOT NULL,
    sale_id        VARCHAR(255) NOT NULL,
    user_id        VARCHAR(255) NOT NULL,
    qty            BIGINT       NOT NULL,
    reason         TEXT         NOT NULL,
    attempts       BIGINT       NOT NULL,
    payload        MEDIUMBLOB   NULL,
    created_at_ms  BIGINT       NOT NULL,
    resolved_at_ms BIGINT       NULL,
    PRIMARY KEY (reservation_id),
    INDEX failed_orders_created_idx (created_at_ms),
    INDEX failed_orders_sale_id_idx (sale_id)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
