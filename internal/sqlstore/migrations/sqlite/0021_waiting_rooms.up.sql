-- A queue sale's waiting room, kept in the database as well as in Redis
-- (docs/fairness.md, Places are kept).
--
-- A queue sale's places, kept as they are given, before the buyer is told
-- their position (docs/fairness.md, Places are kept): a heal puts them back
-- in a stock store that lost them (a Redis restarted without its data; the
-- embedded store at every restart). score orders the waiting room (a
-- random score below 2^40 for a buyer who joined before the start, 2^40 +
-- the arrival number after); ip is the address the place counts against
-- ('' unknown).
CREATE TABLE queue_places (
    sale_id TEXT    NOT NULL,
    user_id TEXT    NOT NULL,
    score   INTEGER NOT NULL,
    ip      TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (sale_id, user_id)
) STRICT, WITHOUT ROWID;

-- An adaptive queue sale's pace, as a node last moved it (Redis's
-- queue_pace, queue_pace.lua): admitted positions by at_ms, moving on at
-- rate a second. A heal puts it back in a stock store that lost it, so
-- admission goes on from where it was, not from the starting rate.
CREATE TABLE queue_paces (
    sale_id  TEXT    NOT NULL PRIMARY KEY,
    admitted REAL    NOT NULL,
    at_ms    INTEGER NOT NULL,
    rate     INTEGER NOT NULL
) STRICT;
