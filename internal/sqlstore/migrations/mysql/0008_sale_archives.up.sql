-- sale_archives: what the stock store held of a sale when the archiver
-- dropped its Redis keys (the number of reservation records, its claims),
-- so that the sale is reconciled from the database alone from then on.
--
-- Reconciliation reads a sale's orders, failed orders and restore
-- requests in pages by reservation id through their unique index on it
-- (a sale's ids share the prefix "<sale>.", and ids are ascii_bin): no
-- index of its own, so the order writer pays for none.
CREATE TABLE sale_archives (
    sale_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    archived_at_ms BIGINT      NOT NULL,
    claims         BIGINT      NOT NULL,
    PRIMARY KEY (sale_id)
) ENGINE = InnoDB;
