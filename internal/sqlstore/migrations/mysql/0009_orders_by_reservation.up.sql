-- Orders keyed by reservation id alone, and the per-buyer limit read
-- answered from an index.
--
-- The order id is CONCAT('o-', reservation_id) (seckill.OrderIDOf), so
-- the unique key on reservation_id duplicated the primary key on id: one
-- more index for the order writer to insert into and check per order, for
-- a uniqueness the CHECK below now derives from the primary key. Nothing
-- looks an order up by id. The clustered index is now the reservation id,
-- which the ledger's pages read in order.
--
-- orders_sale_user_idx also holds status and qty, so the writer's read of
-- what each buyer of a batch holds (SUM(qty) of the orders not cancelled)
-- is answered from the index, without a visit to each order's row.
--
-- One statement: MySQL commits DDL implicitly, and the foreign key needs
-- an index on sale_id at every moment.
ALTER TABLE orders
    DROP PRIMARY KEY,
    ADD PRIMARY KEY (reservation_id),
    DROP INDEX orders_reservation_id_key,
    DROP INDEX orders_sale_user_idx,
    ADD INDEX orders_sale_user_idx (sale_id, user_id, status, qty),
    ADD CONSTRAINT orders_id_of_reservation CHECK (id = CONCAT('o-', reservation_id));
