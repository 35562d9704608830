-- The digest of the Idempotency-Key an order's reservation was made under
-- (seckill.IdempotencyDigest), NULL without one: a retry with the same key
-- that the stock store no longer remembers (its record lost to a failover,
-- or to a heal) is answered with this order instead of limit_exceeded.
-- Looked up with the sale and the buyer, on orders_sale_user_idx.
ALTER TABLE orders ADD COLUMN key_digest VARCHAR(22);
