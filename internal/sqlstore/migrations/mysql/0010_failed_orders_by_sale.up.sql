-- One sale's failed orders, newest first, a page at a time
-- (OrderStore.FailedOrders with a sale): the index on sale_id alone made
-- each page read and sort all of the sale's failed orders; this one
-- hands them over in the list's order (created_at_ms, reservation_id,
-- read backwards) from the cursor on, and still answers the writer's
-- "has this sale any failed orders" (EXISTS … WHERE sale_id = ?) from
-- its first column.
--
-- One statement: MySQL commits DDL implicitly, and so the table is never
-- without an index on sale_id.
ALTER TABLE failed_orders
    DROP INDEX failed_orders_sale_id_idx,
    ADD INDEX failed_orders_sale_created_idx (sale_id, created_at_ms, reservation_id);
