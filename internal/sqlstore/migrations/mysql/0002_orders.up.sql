-- Orders: one row per reservation that became an order. The order id is
-- derived from the reservation id (seckill.OrderIDOf), and reservation_id
-- is unique: at-least-once delivery from the broker can never create a
-- second order for one reservation.
--
-- One statement, so the file either applies or can be re-run (MySQL
-- commits DDL implicitly). Ids are ASCII with a binary collation, like
-- sales.id (and the foreign key needs sale_id to match it exactly).
-- amount_cents is qty × the sale's price at the time of the order;
-- cancel_reason is NULL until the order is cancelled.
--
-- orders_status_pay_by_idx serves ExpiredOrders (status = 'ordered' AND
-- pay_by_ms <= now, oldest deadline first); orders_sale_id_idx serves
-- per-sale questions (reconciliation) and the foreign key.
CREATE TABLE orders (
    id             VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    reservation_id VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    sale_id        VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    user_id        VARCHAR(128) NOT NULL,
    qty            BIGINT       NOT NULL,
    amount_cents   BIGINT       NOT NULL,
    status         VARCHAR(16)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    pay_by_ms      BIGINT       NOT NULL,
    reserved_at_ms BIGINT       NOT NULL,
    created_at_ms  BIGINT       NOT NULL,
    updated_at_ms  BIGINT       NOT NULL,
    cancel_reason  TEXT         NULL,
    PRIMARY KEY (id),
    UNIQUE KEY orders_reservation_id_key (reservation_id),
    INDEX orders_status_pay_by_idx (status, pay_by_ms),
    INDEX orders_sale_id_idx (sale_id),
    CONSTRAINT orders_sale_fk FOREIGN KEY (sale_id) REFERENCES sales (id),
    CONSTRAINT orders_qty_positive CHECK (qty > 0),
    CONSTRAINT orders_amount_nonnegative CHECK (amount_cents >= 0),
    CONSTRAINT orders_status_known CHECK (status IN ('ordered', 'paid', 'cancelled'))
) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
