-- A lottery's entries, copied from Redis by the archiver once the draw is
-- finished, before the sale's keys go (docs/fairness.md, Archiving): the
-- list GET /draw/entries publishes (id and qty) and who entered
-- (entries/mine). id is the entry id (seckill.NewEntryID, unique across
-- sales); reservation_id is what the draw gave the buyer, '' for none.
CREATE TABLE lottery_entries (
    id             TEXT    NOT NULL PRIMARY KEY,
    sale_id        TEXT    NOT NULL,
    user_id        TEXT    NOT NULL,
    qty            INTEGER NOT NULL,
    reservation_id TEXT    NOT NULL DEFAULT '',
    CONSTRAINT lottery_entries_sale_user_key UNIQUE (sale_id, user_id)
) STRICT;
