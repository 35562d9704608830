package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
)

// keptBatch is how many rows one INSERT of keptRows writes: at most 5
// parameters each, under every driver's limit on a statement's parameters.
const keptBatch = 500

// keptRows is a table of one row a buyer a sale, written as the stock
// store gives them out and before the buyer is told (a lottery's entries,
// a waiting room's places): a row already there is kept, and its buyer is
// answered with it.
type keptRows[T any] struct {
	db   *DB
	what string // "entries", "places": for errors
	// insert is "INSERT … VALUES ", completed with tuples of width values
	// (values), then tail, which keeps a row already there.
	insert, tail string
	width        int
	values       func(saleID string, v T) []any
	// byUsers selects sale $1's rows of buyers $2…, completed with their
	// list; scan reads one.
	byUsers string
	scan    func(rows *sql.Rows) (T, error)
	user    func(v T) string
}

// keep writes vs of the sale and returns what the table keeps of each:
// kept[i] is vs[i], or the row its buyer had. One statement a batch of
// keptBatch; a second, reading the buyers back, only when some row was
// there already.
func (k keptRows[T]) keep(ctx context.Context, saleID string, vs []T) ([]T, error) {
	kept := make([]T, 0, len(vs))
	for b := 0; b < len(vs); b += keptBatch {
		batch := vs[b:min(b+keptBatch, len(vs))]
		args := make([]any, 0, k.width*len(batch))
		for _, v := range batch {
			args = append(args, k.values(saleID, v)...)
		}
		res, err := k.db.write.ExecContext(ctx, k.insert+k.db.dialect.sql.orders.tuples(len(batch), k.width)+k.tail, args...)
		if err != nil {
			return nil, fmt.Errorf("keep %s of %s: %w", k.what, saleID, k.db.classify(err))
		}
		if n, err := res.RowsAffected(); err == nil && n == int64(len(batch)) {
			kept = append(kept, batch...)
			continue
		}
		had, err := k.of(ctx, saleID, batch)
		if err != nil {
			return nil, err
		}
		for _, v := range batch {
			h, ok := had[k.user(v)]
			if !ok {
				return nil, fmt.Errorf("keep %s of %s: the row of buyer %q is neither written nor there", k.what, saleID, k.user(v))
			}
			kept = append(kept, h)
		}
	}
	return kept, nil
}

// of reads the rows of the buyers of batch, by buyer, from the primary:
// the row that stopped an insert may be seconds old.
func (k keptRows[T]) of(ctx context.Context, saleID string, batch []T) (map[string]T, error) {
	args := make([]any, 0, 1+len(batch))
	args = append(args, saleID)
	for _, v := range batch {
		args = append(args, k.user(v))
	}
	rows, err := k.db.write.QueryContext(ctx, k.byUsers+k.db.dialect.sql.orders.list(2, len(batch)), args...)
	if err != nil {
		return nil, fmt.Errorf("keep %s of %s: %w", k.what, saleID, k.db.classify(err))
	}
	defer rows.Close()
	had := make(map[string]T, len(batch))
	for rows.Next() {
		v, err := k.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("keep %s of %s: %w", k.what, saleID, k.db.classify(err))
		}
		had[k.user(v)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("keep %s of %s: %w", k.what, saleID, k.db.classify(err))
	}
	return had, nil
}
