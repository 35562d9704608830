-- Orders keyed by reservation id alone, and the per-buyer limit read
-- answered from an index.
--
-- The order id is 'o-' || reservation_id (seckill.OrderIDOf), so its
-- primary key duplicated the unique key on reservation_id: one more index
-- for the order writer to insert into and check per order, for a
-- uniqueness the CHECK below now derives from reservation_id's. Nothing
-- looks an order up by id. The unique key on reservation_id becomes the
-- primary key (in the migration's transaction, so never without one).
--
-- orders_sale_user_idx also holds status and qty, so the writer's read of
-- what each buyer of a batch holds (SUM(qty) of the orders not cancelled)
-- is answered from the index alone.
ALTER TABLE orders DROP CONSTRAINT orders_pkey, DROP CONSTRAINT orders_reservation_id_key;
ALTER TABLE orders ADD CONSTRAINT orders_pkey PRIMARY KEY (reservation_id);
ALTER TABLE orders ADD CONSTRAINT orders_id_of_reservation CHECK (id = 'o-' || reservation_id);
DROP INDEX orders_sale_user_idx;
CREATE INDEX orders_sale_user_idx ON orders (sale_id, user_id, status, qty);
