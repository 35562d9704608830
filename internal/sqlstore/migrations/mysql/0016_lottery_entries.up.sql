-- A lottery's entries, copied from Redis by the archiver once the draw is
-- finished, before the sale's keys go (docs/fairness.md, Archiving): the
-- list GET /draw/entries publishes (id and qty) and who entered
-- (entries/mine). id is the entry id (seckill.NewEntryID, unique across
-- sales); reservation_id is what the draw gave the buyer, '' for none.
-- user_id compares byte for byte, as Redis's hash fields do.
CREATE TABLE lottery_entries (
    id             VARCHAR(32)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sale_id        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    qty            BIGINT       NOT NULL,
    reservation_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY lottery_entries_sale_user_key (sale_id, user_id)
) ENGINE = InnoDB;
