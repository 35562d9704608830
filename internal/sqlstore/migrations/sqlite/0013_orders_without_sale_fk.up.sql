-- Orders without the foreign key to sales.
--
-- Every order is inserted by the order writer's transaction, which has
-- read the sale's row and updated it (taking the stock) before it inserts,
-- so the row is there until the commit; sales are never deleted. The
-- key's check was one more lookup per inserted order.
--
-- SQLite drops no constraint in place: the table is built anew and its
-- rows copied (inside the migration's transaction), as in 0009.
CREATE TABLE orders_0013 (
    id             TEXT    NOT NULL,
    reservation_id TEXT    NOT NULL PRIMARY KEY,
    sale_id        TEXT    NOT NULL,
    user_id        TEXT    NOT NULL,
    qty            INTEGER NOT NULL,
    amount_cents   INTEGER NOT NULL,
    status         TEXT    NOT NULL,
    pay_by_ms      INTEGER NOT NULL,
    reserved_at_ms INTEGER NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    cancel_reason  TEXT,
    CHECK (id = 'o-' || reservation_id),
    CHECK (qty > 0),
    CHECK (amount_cents >= 0),
    CHECK (status IN ('ordered', 'paid', 'cancelled'))
) STRICT;
INSERT INTO orders_0013 (id, reservation_id, sale_id, user_id, qty, amount_cents, status,
        pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason)
    SELECT id, reservation_id, sale_id, user_id, qty, amount_cents, status,
        pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms, cancel_reason
    FROM orders;
DROP TABLE orders;
ALTER TABLE orders_0013 RENAME TO orders;

-- As in 0009.
CREATE INDEX orders_status_pay_by_idx ON orders (status, pay_by_ms);
CREATE INDEX orders_sale_user_idx ON orders (sale_id, user_id, status, qty);
