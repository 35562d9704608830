-- Reconciling a large sale a page at a time: each of a sale's orders,
-- failed orders and restore requests is read in pages by reservation id
-- (keyset paging), which these indexes serve; orders_sale_reservation_idx
-- replaces orders_sale_id_idx, which it covers (the foreign key included).
--
-- sale_archives: what the stock store held of a sale when the archiver
-- dropped its Redis keys (the number of reservation records), so that the
-- sale is reconciled from the database alone from then on.
--
-- MySQL commits DDL implicitly: every statement here can be re-run after a
-- failure halfway only by hand, so each is kept simple and independent.
ALTER TABLE orders ADD INDEX orders_sale_reservation_idx (sale_id, reservation_id), DROP INDEX orders_sale_id_idx;

CREATE INDEX failed_orders_sale_reservation_idx ON failed_orders (sale_id, reservation_id);

CREATE INDEX restore_requests_sale_reservation_idx ON restore_requests (sale_id, reservation_id);

CREATE TABLE sale_archives (
    sale_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    archived_at_ms BIGINT      NOT NULL,
    claims         BIGINT      NOT NULL,
    PRIMARY KEY (sale_id)
) ENGINE = InnoDB;
