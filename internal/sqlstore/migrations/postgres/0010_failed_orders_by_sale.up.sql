-- One sale's failed orders, newest first, a page at a time
-- (OrderStore.FailedOrders with a sale): the index on sale_id alone made
-- each page read and sort all of the sale's failed orders; this one
-- hands them over in the list's order (created_at_ms, reservation_id in
-- byte order, read backwards) from the cursor on, and still answers the
-- writer's "has this sale any failed orders" (EXISTS … WHERE sale_id = $1)
-- from its first column. The list compares and sorts reservation ids
-- COLLATE "C", so the index does too.
DROP INDEX failed_orders_sale_id_idx;
CREATE INDEX failed_orders_sale_created_idx ON failed_orders (sale_id, created_at_ms, reservation_id COLLATE "C");
