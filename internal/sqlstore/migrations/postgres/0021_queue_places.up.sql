-- A queue sale's places, kept as they are given, before the buyer is told
-- their position (docs/fairness.md, Places are kept): a heal puts them back
-- in a stock store that lost them (a Redis restarted without its data; the
-- embedded store at every restart). score orders the waiting room (a
-- random score below 2^40 for a buyer who joined before the start, 2^40 +
-- the arrival number after); ip is the address the place counts against
-- ('' unknown).
CREATE TABLE queue_places (
    sale_id TEXT   NOT NULL,
    user_id TEXT   NOT NULL,
    score   BIGINT NOT NULL,
    ip      TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (sale_id, user_id)
);
