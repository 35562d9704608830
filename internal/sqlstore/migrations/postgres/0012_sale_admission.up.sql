-- Admission modes (docs/fairness.md): a sale's rule, "" for first come or
-- its JSON; and a lottery's draw record: the secret seed (its SHA-256 is
-- published from the start), the lease that lets one node at a time run
-- the draw, and what the draw published once done.
ALTER TABLE sales ADD COLUMN admission VARCHAR(400) NOT NULL DEFAULT '';
CREATE TABLE lottery_draws (
    sale_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
    seed           VARCHAR(64)  NOT NULL,
    lease_owner    VARCHAR(128) NOT NULL DEFAULT '',
    lease_until_ms BIGINT       NOT NULL DEFAULT 0,
    entrants       BIGINT       NOT NULL DEFAULT 0,
    stock          BIGINT       NOT NULL DEFAULT 0,
    winners        TEXT         NULL,
    drawn_at_ms    BIGINT       NOT NULL DEFAULT 0,
    created_at_ms  BIGINT       NOT NULL
);
