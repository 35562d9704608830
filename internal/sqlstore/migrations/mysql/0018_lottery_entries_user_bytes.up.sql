-- lottery_entries.user_id as bytes. utf8mb4_bin is a PAD SPACE collation:
-- 'ann' and 'ann ' compared equal, so the unique key on (sale_id,
-- user_id) merged two buyers whose ids differ by a trailing space (which
-- seckill.ValidUserID allows, and Redis's hash keeps apart), and the
-- archiver's counts never covered Redis's: such a lottery was refused its
-- archive and copied again on every pass. VARBINARY compares byte for
-- byte, as the other dialects' columns and failed_orders.reservation_id do.
ALTER TABLE lottery_entries MODIFY user_id VARBINARY(512) NOT NULL;
