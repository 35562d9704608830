-- Reconciling a large sale a page at a time: each of a sale's orders,
-- failed orders and restore requests is read in pages by reservation id
-- (keyset paging), which these indexes serve; orders_sale_reservation_idx
-- replaces orders_sale_id_idx, which it covers.
--
-- sale_archives: what the stock store held of a sale when the archiver
-- dropped its Redis keys (the number of reservation records), so that the
-- sale is reconciled from the database alone from then on.
CREATE INDEX orders_sale_reservation_idx ON orders (sale_id, reservation_id);
DROP INDEX orders_sale_id_idx;
CREATE INDEX failed_orders_sale_reservation_idx ON failed_orders (sale_id, reservation_id);
CREATE INDEX restore_requests_sale_reservation_idx ON restore_requests (sale_id, reservation_id);

CREATE TABLE sale_archives (
    sale_id        TEXT    NOT NULL PRIMARY KEY,
    archived_at_ms INTEGER NOT NULL,
    claims         INTEGER NOT NULL
) STRICT;
