package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// EntryStore is the lottery_entries table of a DB: a lottery's entries,
// kept as they are made (KeepEntries, before the buyer is told "entered";
// a heal puts them back in a stock store that lost them), completed by
// the archiver's copy with what each won before the sale's keys go, and
// read from here once they have gone.
type EntryStore struct {
	db *DB
}

// NewEntryStore returns the entry store of db, which must be migrated.
func NewEntryStore(db *DB) *EntryStore { return &EntryStore{db: db} }

// entryBatch is how many entries one INSERT copies: 5 parameters each,
// under every driver's limit on a statement's parameters.
const entryBatch = keptBatch

// CopyEntries writes entries, all of sale saleID, each with the
// reservation won gives its buyer ("" for none), in statements of
// entryBatch rows: the draw's winners as they are drawn, every entry when
// the sale is archived. Copying again changes nothing but a reservation
// won has since given (an entry's row takes the latest); "" never clears
// one.
func (st *EntryStore) CopyEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry, won map[string]string) error {
	q := &st.db.dialect.sql.entries
	for b := 0; b < len(entries); b += entryBatch {
		batch := entries[b:min(b+entryBatch, len(entries))]
		args := make([]any, 0, 5*len(batch))
		for _, e := range batch {
			args = append(args, e.ID, saleID, e.UserID, e.Qty, won[e.UserID])
		}
		text := q.insert + st.db.dialect.sql.orders.tuples(len(batch), 5) + q.upsert
		if _, err := st.db.write.ExecContext(ctx, text, args...); err != nil {
			return fmt.Errorf("copy entries of %s: %w", saleID, st.db.classify(err))
		}
	}
	return nil
}

// KeepEntries writes entries of sale saleID as they are made, before
// their buyers are told "entered", and returns what the table keeps for
// each: kept[i] is entries[i], or the entry its buyer already had (a
// buyer has one entry a sale; a stock store that lost the first made
// another).
func (st *EntryStore) KeepEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry) ([]seckill.LotteryEntry, error) {
	q := &st.db.dialect.sql.entries
	return keptRows[seckill.LotteryEntry]{
		db: st.db, what: "entries", insert: q.insert, tail: q.keep, width: 5, byUsers: q.byUsers,
		values: func(saleID string, e seckill.LotteryEntry) []any { return []any{e.ID, saleID, e.UserID, e.Qty, ""} },
		scan: func(rows *sql.Rows) (seckill.LotteryEntry, error) {
			var e seckill.LotteryEntry
			err := rows.Scan(&e.UserID, &e.ID, &e.Qty)
			return e, err
		},
		user: func(e seckill.LotteryEntry) string { return e.UserID },
	}.keep(ctx, saleID, entries)
}

// EntryCounts returns how many entries of the sale the table holds, and
// how many of them won a reservation.
func (st *EntryStore) EntryCounts(ctx context.Context, saleID string) (entries, winners int64, err error) {
	err = st.db.read.QueryRowContext(ctx, st.db.dialect.sql.entries.counts, saleID).Scan(&entries, &winners)
	if err != nil {
		return 0, 0, fmt.Errorf("entry counts of %s: %w", saleID, st.db.classify(err))
	}
	return entries, winners, nil
}

// KeptEntry returns userID's copied entry in the sale and the
// reservation it won ("" for none); ok is false when there is none.
func (st *EntryStore) KeptEntry(ctx context.Context, saleID, userID string) (e seckill.LotteryEntry, reservationID string, ok bool, err error) {
	e.UserID = userID
	err = st.db.read.QueryRowContext(ctx, st.db.dialect.sql.entries.byUser, saleID, userID).Scan(&e.ID, &e.Qty, &reservationID)
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.LotteryEntry{}, "", false, nil
	} else if err != nil {
		return seckill.LotteryEntry{}, "", false, fmt.Errorf("kept entry: %w", st.db.classify(err))
	}
	return e, reservationID, true, nil
}

// KeptEntries returns every copied entry of the sale, by entry id.
func (st *EntryStore) KeptEntries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error) {
	rows, err := st.db.read.QueryContext(ctx, st.db.dialect.sql.entries.bySale, saleID)
	if err != nil {
		return nil, fmt.Errorf("kept entries of %s: %w", saleID, st.db.classify(err))
	}
	defer rows.Close()
	var out []seckill.LotteryEntry
	for rows.Next() {
		var e seckill.LotteryEntry
		if err := rows.Scan(&e.ID, &e.UserID, &e.Qty); err != nil {
			return nil, fmt.Errorf("kept entries of %s: %w", saleID, st.db.classify(err))
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("kept entries of %s: %w", saleID, st.db.classify(err))
	}
	return out, nil
}

// KeptWon returns every buyer of the sale whose copied entry won a
// reservation, with it: what AllWon answered from Redis.
func (st *EntryStore) KeptWon(ctx context.Context, saleID string) (map[string]string, error) {
	rows, err := st.db.read.QueryContext(ctx, st.db.dialect.sql.entries.wonBySale, saleID)
	if err != nil {
		return nil, fmt.Errorf("kept winners of %s: %w", saleID, st.db.classify(err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var user, res string
		if err := rows.Scan(&user, &res); err != nil {
			return nil, fmt.Errorf("kept winners of %s: %w", saleID, st.db.classify(err))
		}
		out[user] = res
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("kept winners of %s: %w", saleID, st.db.classify(err))
	}
	return out, nil
}
