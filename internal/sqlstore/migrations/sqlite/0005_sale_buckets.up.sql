-- Stock buckets: a sale's stock split over that many Redis hash slots
-- (1: one slot, as before).
ALTER TABLE sales ADD COLUMN buckets INTEGER NOT NULL DEFAULT 1;
