-- Serves the order writer's per-buyer limit check (the units each buyer of
-- a batch holds in a sale: sale_id = ? AND user_id IN (…)). With only
-- orders_sale_id_idx that read visited every order of the sale, once per
-- batch, so a sale's writes slowed down as it sold. The new index also
-- serves what orders_sale_id_idx did (its prefix: per-sale questions and
-- the foreign key), which goes.
--
-- One statement: MySQL commits DDL implicitly, and the foreign key needs
-- an index on sale_id at every moment.
ALTER TABLE orders ADD INDEX orders_sale_user_idx (sale_id, user_id), DROP INDEX orders_sale_id_idx;
