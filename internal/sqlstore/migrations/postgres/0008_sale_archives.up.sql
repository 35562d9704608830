-- sale_archives: what the stock store held of a sale when the archiver
-- dropped its Redis keys (the number of reservation records, its claims),
-- so that the sale is reconciled from the database alone from then on.
--
-- Reconciliation reads a sale's orders, failed orders and restore
-- requests in pages by reservation id, in byte order (COLLATE "C"): the
-- unique indexes on reservation_id follow the database's collation,
-- which may not be byte order, so these indexes serve the pages.
CREATE TABLE sale_archives (
    sale_id        VARCHAR(64) NOT NULL PRIMARY KEY,
    archived_at_ms BIGINT      NOT NULL,
    claims         BIGINT      NOT NULL
);
CREATE INDEX orders_sale_reservation_idx ON orders (sale_id, reservation_id COLLATE "C");
CREATE INDEX failed_orders_sale_reservation_idx ON failed_orders (sale_id, reservation_id COLLATE "C");
CREATE INDEX restore_requests_sale_reservation_idx ON restore_requests (sale_id, reservation_id COLLATE "C");
