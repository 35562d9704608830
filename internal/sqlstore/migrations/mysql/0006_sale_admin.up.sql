-- Operating a sale: a currency per sale, the audit log of operators'
-- changes, and how each failed order was resolved.
--
-- MySQL commits DDL implicitly: every statement here can be re-run after a
-- failure halfway only by hand, so each is kept simple and independent.
--
-- currency is an ISO 4217 code; '' on sales made before this migration
-- (they show the deployment's default).
ALTER TABLE sales ADD COLUMN currency CHAR(3) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '';

-- Serves ListSales: newest start first, then id, as the keyset cursor.
CREATE INDEX sales_start_id_idx ON sales (start_at_ms, id);

-- audit_log: one row per change an operator made (who, when, what).
-- subject is the reservation id of a failed order, '' for changes to the
-- sale itself; detail is a JSON object (before and after).
CREATE TABLE audit_log (
    id      BIGINT       NOT NULL AUTO_INCREMENT,
    sale_id VARCHAR(255) NOT NULL,
    subject VARCHAR(255) NOT NULL,
    actor   VARCHAR(255) NOT NULL,
    action  VARCHAR(64)  NOT NULL,
    detail  TEXT         NOT NULL,
    at_ms   BIGINT       NOT NULL,
    PRIMARY KEY (id),
    INDEX audit_log_sale_idx (sale_id, id)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- How an operator closed a failed order (resolved_at_ms, of 0003, says
-- when): 'redrive' or 'refunded', with a note and who did it.
ALTER TABLE failed_orders
    ADD COLUMN resolution      VARCHAR(16)  NULL,
    ADD COLUMN resolution_note TEXT         NULL,
    ADD COLUMN resolved_by     VARCHAR(255) NULL;
