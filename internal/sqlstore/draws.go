package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// DrawStore is the lottery_draws table of a DB (lottery.DrawStore).
type DrawStore struct {
	db *DB
}

// NewDrawStore returns the draw store of db, which must be migrated.
func NewDrawStore(db *DB) *DrawStore { return &DrawStore{db: db} }

// EnsureDraw returns the sale's draw record, inserting one with a fresh
// seed when there is none. Two nodes inserting at once: one insert wins,
// both return its row.
func (st *DrawStore) EnsureDraw(ctx context.Context, saleID string) (seckill.DrawRecord, error) {
	d, err := st.draw(ctx, saleID)
	if !errors.Is(err, seckill.ErrNotFound) {
		return d, err
	}
	_, err = st.db.write.ExecContext(ctx, st.db.dialect.sql.draws.insert,
		saleID, seckill.NewDrawSeed(), toMillis(st.db.now()))
	if err != nil && !st.db.isUniqueViolation(err) {
		return seckill.DrawRecord{}, fmt.Errorf("draw of %s: %w", saleID, st.db.classify(err))
	}
	return st.drawFrom(ctx, st.db.write, saleID)
}

// Draw returns the sale's draw record without making one: ErrNotFound
// when it has none.
func (st *DrawStore) Draw(ctx context.Context, saleID string) (seckill.DrawRecord, error) {
	return st.draw(ctx, saleID)
}

func (st *DrawStore) draw(ctx context.Context, saleID string) (seckill.DrawRecord, error) {
	return st.drawFrom(ctx, st.db.read, saleID)
}

func (st *DrawStore) drawFrom(ctx context.Context, db *sql.DB, saleID string) (seckill.DrawRecord, error) {
	var (
		d       seckill.DrawRecord
		drawnAt int64
		winners sql.NullString
	)
	err := db.QueryRowContext(ctx, st.db.dialect.sql.draws.bySale, saleID).
		Scan(&d.SaleID, &d.Seed, &drawnAt, &d.Entrants, &d.Stock, &winners)
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("draw of %s: %w", saleID, seckill.ErrNotFound)
	} else if err != nil {
		return d, fmt.Errorf("draw of %s: %w", saleID, st.db.classify(err))
	}
	if drawnAt > 0 {
		d.DrawnAt = fromMillis(drawnAt)
		d.Winners = []string{}
		if winners.String != "" {
			d.Winners = strings.Split(winners.String, " ")
		}
	}
	return d, nil
}

// LeaseDraw takes the draw's lease for owner until until when it is free
// at now (expired, or owner's already).
func (st *DrawStore) LeaseDraw(ctx context.Context, saleID, owner string, now, until time.Time) (bool, error) {
	res, err := st.db.write.ExecContext(ctx, st.db.dialect.sql.draws.lease,
		owner, toMillis(until), saleID, toMillis(now), owner)
	if err != nil {
		return false, fmt.Errorf("lease draw of %s: %w", saleID, st.db.classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lease draw of %s: %w", saleID, st.db.classify(err))
	}
	return n == 1, nil
}

// FinishDraw records d as drawn unless a draw is recorded already: the
// first finish stands (every run of a draw computes the same one).
func (st *DrawStore) FinishDraw(ctx context.Context, d seckill.DrawRecord) error {
	_, err := st.db.write.ExecContext(ctx, st.db.dialect.sql.draws.finish,
		max(toMillis(d.DrawnAt), 1), d.Entrants, d.Stock, strings.Join(d.Winners, " "), d.SaleID)
	if err != nil {
		return fmt.Errorf("finish draw of %s: %w", d.SaleID, st.db.classify(err))
	}
	return nil
}

// OpenDraws lists the sales with a draw record that end after now.
func (st *DrawStore) OpenDraws(ctx context.Context, now time.Time) ([]string, error) {
	rows, err := st.db.read.QueryContext(ctx, st.db.dialect.sql.draws.open, toMillis(now))
	if err != nil {
		return nil, fmt.Errorf("open draws: %w", st.db.classify(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("open draws: %w", st.db.classify(err))
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open draws: %w", st.db.classify(err))
	}
	return out, nil
}
