package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// PlaceStore is the queue_places table of a DB: a queue sale's places,
// kept as they are given, before the buyer is told (KeepPlaces), and read
// back by a heal that puts them in a stock store that lost them.
type PlaceStore struct {
	db *DB
}

// NewPlaceStore returns the place store of db, which must be migrated.
func NewPlaceStore(db *DB) *PlaceStore { return &PlaceStore{db: db} }

// KeepPlaces writes places of sale saleID and returns what the table
// keeps for each: kept[i] is places[i], or the place its buyer already
// had (a buyer has one place a sale; a stock store that lost the first
// gave another).
func (st *PlaceStore) KeepPlaces(ctx context.Context, saleID string, places []seckill.QueuePlace) ([]seckill.QueuePlace, error) {
	q := &st.db.dialect.sql.places
	return keptRows[seckill.QueuePlace]{
		db: st.db, what: "places", insert: q.insert, tail: q.keep, width: 4, byUsers: q.byUsers,
		values: func(saleID string, p seckill.QueuePlace) []any { return []any{saleID, p.UserID, p.Score, p.IP} },
		scan:   scanPlace,
		user:   func(p seckill.QueuePlace) string { return p.UserID },
	}.keep(ctx, saleID, places)
}

// ForgetPlaces deletes the sale's places (an ended sale's, when it is
// archived) and returns how many there were.
func (st *PlaceStore) ForgetPlaces(ctx context.Context, saleID string) (int64, error) {
	res, err := st.db.write.ExecContext(ctx, st.db.dialect.sql.places.forget, saleID)
	if err != nil {
		return 0, fmt.Errorf("forget places of %s: %w", saleID, st.db.classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("forget places of %s: %w", saleID, st.db.classify(err))
	}
	return n, nil
}

// PlaceCount returns how many places of the sale the table keeps.
func (st *PlaceStore) PlaceCount(ctx context.Context, saleID string) (int64, error) {
	var n int64
	if err := st.db.read.QueryRowContext(ctx, st.db.dialect.sql.places.count, saleID).Scan(&n); err != nil {
		return 0, fmt.Errorf("place count of %s: %w", saleID, st.db.classify(err))
	}
	return n, nil
}

// HasPlace reports whether the table keeps a place of userID in the sale.
func (st *PlaceStore) HasPlace(ctx context.Context, saleID, userID string) (bool, error) {
	var one int
	err := st.db.read.QueryRowContext(ctx, st.db.dialect.sql.places.has, saleID, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("place of %s in %s: %w", userID, saleID, st.db.classify(err))
	}
	return true, nil
}

// KeepPace writes an adaptive queue sale's pace as a node moved it,
// unless the table holds a later one (another node's).
func (st *PlaceStore) KeepPace(ctx context.Context, saleID string, p seckill.QueuePace) error {
	if _, err := st.db.write.ExecContext(ctx, st.db.dialect.sql.places.keepPace, saleID, p.Admitted, p.At.UnixMilli(), p.Rate); err != nil {
		return fmt.Errorf("keep the pace of %s: %w", saleID, st.db.classify(err))
	}
	return nil
}

// Pace returns the sale's pace the table keeps, as KeepPace wrote it
// (Start is not kept: the sale's); ok is false when it has none.
func (st *PlaceStore) Pace(ctx context.Context, saleID string) (p seckill.QueuePace, ok bool, err error) {
	var ms int64
	err = st.db.read.QueryRowContext(ctx, st.db.dialect.sql.places.pace, saleID).Scan(&p.Admitted, &ms, &p.Rate)
	if errors.Is(err, sql.ErrNoRows) {
		return seckill.QueuePace{}, false, nil
	} else if err != nil {
		return seckill.QueuePace{}, false, fmt.Errorf("pace of %s: %w", saleID, st.db.classify(err))
	}
	p.At = time.UnixMilli(ms)
	return p, true, nil
}

// Places returns every place the table keeps of the sale, in no order.
func (st *PlaceStore) Places(ctx context.Context, saleID string) ([]seckill.QueuePlace, error) {
	rows, err := st.db.read.QueryContext(ctx, st.db.dialect.sql.places.bySale, saleID)
	if err != nil {
		return nil, fmt.Errorf("places of %s: %w", saleID, st.db.classify(err))
	}
	defer rows.Close()
	var out []seckill.QueuePlace
	for rows.Next() {
		p, err := scanPlace(rows)
		if err != nil {
			return nil, fmt.Errorf("places of %s: %w", saleID, st.db.classify(err))
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("places of %s: %w", saleID, st.db.classify(err))
	}
	return out, nil
}

func scanPlace(rows *sql.Rows) (seckill.QueuePlace, error) {
	var p seckill.QueuePlace
	err := rows.Scan(&p.UserID, &p.Score, &p.IP)
	return p, err
}
