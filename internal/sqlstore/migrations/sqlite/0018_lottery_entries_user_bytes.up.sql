-- Nothing to do: lottery_entries.user_id already compares byte for byte
-- here. MySQL's column was a PAD SPACE collation ('ann' = 'ann '), made
-- bytes in its 0018 (migrations/mysql).
SELECT 1;
