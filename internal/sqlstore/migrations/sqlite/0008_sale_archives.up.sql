-- sale_archives: what the stock store held of a sale when the archiver
-- dropped its Redis keys (the number of reservation records, its claims),
-- so that the sale is reconciled from the database alone from then on.
--
-- Reconciliation reads a sale's orders, failed orders and restore
-- requests in pages by reservation id through their unique index on it
-- (a sale's ids share the prefix "<sale>.", and TEXT compares as bytes):
-- no index of its own, so the order writer pays for none.
CREATE TABLE sale_archives (
    sale_id        TEXT    NOT NULL PRIMARY KEY,
    archived_at_ms INTEGER NOT NULL,
    claims         INTEGER NOT NULL
) STRICT;
