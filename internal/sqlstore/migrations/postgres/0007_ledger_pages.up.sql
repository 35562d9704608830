-- Reconciling a large sale a page at a time: each of a sale's orders,
-- failed orders and restore requests is read in pages by reservation id
-- (keyset paging) in byte order (COLLATE "C", whatever the database's
-- collation), which these indexes serve; orders_sale_reservation_idx
-- replaces orders_sale_id_idx, which it covers.
--
-- sale_archives: what the stock store held of a sale when the archiver
-- dropped its Redis keys (the number of reservation records), so that the
-- sale is reconciled from the database alone from then on.
CREATE INDEX orders_sale_reservation_idx ON orders (sale_id, reservation_id COLLATE "C");
DROP INDEX orders_sale_id_idx;
CREATE INDEX failed_orders_sale_reservation_idx ON failed_orders (sale_id, reservation_id COLLATE "C");
CREATE INDEX restore_requests_sale_reservation_idx ON restore_requests (sale_id, reservation_id COLLATE "C");

CREATE TABLE sale_archives (
    sale_id        VARCHAR(64) NOT NULL PRIMARY KEY,
    archived_at_ms BIGINT      NOT NULL,
    claims         BIGINT      NOT NULL
);
