-- Nothing to do: buyer ids and failed orders' sale ids already compare
-- byte for byte here. MySQL's columns were a PAD SPACE collation ('ann' =
-- 'ann '), made bytes in its 0019 (migrations/mysql).
SELECT 1;
