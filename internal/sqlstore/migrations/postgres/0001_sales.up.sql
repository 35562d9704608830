-- Sales: one row per flash sale. Times are unix milliseconds (UTC) in
-- BIGINT *_ms columns, identical in every dialect.
CREATE TABLE sales (
    id             VARCHAR(64) NOT NULL PRIMARY KEY,
    name           TEXT        NOT NULL,
    price_cents    BIGINT      NOT NULL,
    -- stock is what the database still counts as unsold; the order writer
    -- decrements it, a restore increments it. It can never leave
    -- [0, initial_stock]: the last line of defence against overselling.
    stock          BIGINT      NOT NULL,
    initial_stock  BIGINT      NOT NULL,
    per_user_limit BIGINT      NOT NULL,
    start_at_ms    BIGINT      NOT NULL,
    end_at_ms      BIGINT      NOT NULL,
    version        BIGINT      NOT NULL DEFAULT 1,
    created_at_ms  BIGINT      NOT NULL,
    updated_at_ms  BIGINT      NOT NULL,
    CONSTRAINT sales_stock_range CHECK (stock >= 0 AND stock <= initial_stock),
    CONSTRAINT sales_version_positive CHECK (version >= 1)
);

-- Serves SalesStartingBefore (start_at_ms <= t AND end_at_ms > now). End
-- comes first: ended sales pile up forever while unended ones stay few, so
-- end_at_ms > now is the selective range.
CREATE INDEX sales_end_start_idx ON sales (end_at_ms, start_at_ms);
