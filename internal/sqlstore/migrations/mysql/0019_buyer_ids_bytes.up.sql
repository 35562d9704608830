-- Buyer ids, and the sale ids a failed order may carry as it came, as
-- bytes. utf8mb4_bin is a PAD SPACE collation: 'ann' and 'ann ' (both
-- valid buyer ids, apart in Redis) compared equal, so the writer's limit
-- read summed their orders as one buyer's (a claim Redis accepted became
-- a failed order, or one past the limit an order), reconciliation counted
-- them as one buyer over the limit, and a buyer's orders and the retry of
-- an Idempotency-Key answered with the other's orders. A dead letter's
-- sale id 'tea ' likewise counted as sale tea's in its failed orders and
-- audit log. VARBINARY compares byte for byte, as the other dialects'
-- columns and lottery_entries.user_id (0018) do; the sizes keep every
-- value the utf8mb4 columns could hold (4 bytes a character).
--
-- Each ALTER rebuilds its table (MariaDB cannot change a column's type
-- in place: ALGORITHM=COPY) and holds back writes to it until done. On a
-- large orders table that takes minutes: run this migration outside a
-- sale. orders_sale_user_idx, failed_orders_sale_created_idx and
-- audit_log_sale_idx are rebuilt with their tables, on the byte columns.
--
-- MySQL commits DDL implicitly: each statement stands alone, and running
-- one again after a failure halfway is harmless.
ALTER TABLE orders MODIFY user_id VARBINARY(512) NOT NULL;
ALTER TABLE failed_orders MODIFY sale_id VARBINARY(1020) NOT NULL, MODIFY user_id VARBINARY(1020) NOT NULL;
ALTER TABLE order_events MODIFY sale_id VARBINARY(1020) NOT NULL, MODIFY user_id VARBINARY(1020) NOT NULL;
ALTER TABLE audit_log MODIFY sale_id VARBINARY(1020) NOT NULL;
