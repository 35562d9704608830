-- Operating a sale: a currency per sale, the audit log of operators'
-- changes, and how each failed order was resolved.
--
-- currency is an ISO 4217 code; '' on sales made before this migration
-- (they show the deployment's default).
ALTER TABLE sales ADD COLUMN currency VARCHAR(3) NOT NULL DEFAULT '';

-- Serves ListSales: newest start first, then id, as the keyset cursor.
CREATE INDEX sales_start_id_idx ON sales (start_at_ms, id);

-- audit_log: one row per change an operator made (who, when, what).
-- subject is the reservation id of a failed order, '' for changes to the
-- sale itself; detail is a JSON object (before and after).
CREATE TABLE audit_log (
    id      BIGSERIAL PRIMARY KEY,
    sale_id TEXT   NOT NULL,
    subject TEXT   NOT NULL,
    actor   TEXT   NOT NULL,
    action  TEXT   NOT NULL,
    detail  TEXT   NOT NULL,
    at_ms   BIGINT NOT NULL
);

-- Serves AuditLog of one sale, newest first.
CREATE INDEX audit_log_sale_idx ON audit_log (sale_id, id);

-- How an operator closed a failed order (resolved_at_ms, of 0003, says
-- when): 'redrive' or 'refunded', with a note and who did it.
ALTER TABLE failed_orders ADD COLUMN resolution TEXT;
ALTER TABLE failed_orders ADD COLUMN resolution_note TEXT;
ALTER TABLE failed_orders ADD COLUMN resolved_by TEXT;
