-- Sales: one row per flash sale. Times are unix milliseconds (UTC) in
-- BIGINT *_ms columns, identical in every dialect.
--
-- MySQL commits DDL implicitly, so a migration cannot be rolled back
-- halfway: keep each file to statements that either all succeed or can be
-- re-run. Statements end with ';' (the runner splits them, see migrate.go).
--
-- The id is ASCII with a binary collation: sale ids are case-sensitive
-- everywhere else (Redis keys, SQLite, PostgreSQL), so 'Tea' and 'tea'
-- must be two sales here too.
--
-- stock is what the database still counts as unsold; the order writer
-- decrements it, a restore increments it. It can never leave
-- [0, initial_stock]: the last line of defence against overselling.
--
-- The index serves SalesStartingBefore (start_at_ms <= t AND
-- end_at_ms > now). End comes first: ended sales pile up forever while
-- unended ones stay few, so end_at_ms > now is the selective range.
CREATE TABLE sales (
    id             VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name           VARCHAR(200) NOT NULL,
    price_cents    BIGINT       NOT NULL,
    stock          BIGINT       NOT NULL,
    initial_stock  BIGINT       NOT NULL,
    per_user_limit BIGINT       NOT NULL,
    start_at_ms    BIGINT       NOT NULL,
    end_at_ms      BIGINT       NOT NULL,
    version        BIGINT       NOT NULL DEFAULT 1,
    created_at_ms  BIGINT       NOT NULL,
    updated_at_ms  BIGINT       NOT NULL,
    PRIMARY KEY (id),
    INDEX sales_end_start_idx (end_at_ms, start_at_ms),
    CONSTRAINT sales_stock_range CHECK (stock >= 0 AND stock <= initial_stock),
    CONSTRAINT sales_version_positive CHECK (version >= 1)
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
