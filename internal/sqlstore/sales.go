package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// SaleStore is the seckill.SaleStore of a DB.
type SaleStore struct {
	db *DB
}

var _ seckill.SaleStore = (*SaleStore)(nil)

// NewSaleStore returns the sale store of db, which must be migrated.
func NewSaleStore(db *DB) *SaleStore { return &SaleStore{db: db} }

// CreateSale validates and inserts s with Version 1. On success it sets
// s.Version and s.CreatedAt, and truncates s.StartAt and s.EndAt to the
// stored millisecond in UTC, so s equals what Sale returns. The database's
// unsold stock starts at s.Stock. ErrDuplicate when the id is taken.
func (st *SaleStore) CreateSale(ctx context.Context, s *seckill.Sale) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("create sale: %w", st.db.classify(err))
	}
	now := toMillis(st.db.now())
	start, end := toMillis(s.StartAt), toMillis(s.EndAt)
	_, err := st.db.write.ExecContext(ctx, st.db.dialect.sql.sales.insert,
		s.ID, s.Name, s.PriceCents, s.Stock, s.Stock, s.PurchaseLimit,
		start, end, 1, now, now, s.BucketCount(), s.Currency, encodeAdmission(s.Admission))
	if st.db.isUniqueViolation(err) {
		return fmt.Errorf("create sale %s: %w", s.ID, seckill.ErrDuplicate)
	} else if err != nil {
		return fmt.Errorf("create sale %s: %w", s.ID, st.db.classify(err))
	}
	s.Version, s.Unsold, s.Buckets = 1, s.Stock, s.BucketCount()
	s.CreatedAt = fromMillis(now)
	s.StartAt, s.EndAt = fromMillis(start), fromMillis(end)
	s.Admission, _ = decodeAdmission(encodeAdmission(s.Admission)) // as Sale reads it back
	if s.Admission.Of() == seckill.AdmitLottery {
		// The seed, and so the commitment, from the start. Should this
		// fail, the first reader of the draw makes it (EnsureDraw).
		if _, err := NewDrawStore(st.db).EnsureDraw(ctx, s.ID); err != nil {
			return fmt.Errorf("create sale %s: %w", s.ID, err)
		}
	}
	return nil
}

// Sale returns one sale; ErrNotFound when there is none. Its Stock is the
// stock put on sale; Unsold is what the database has not yet turned into
// orders.
func (st *SaleStore) Sale(ctx context.Context, id string) (*seckill.Sale, error) {
	if !seckill.ValidSaleID(id) {
		// No such row can exist, and a malformed id must not reach a
		// dialect that would reject it differently (MySQL's ASCII column).
		return nil, fmt.Errorf("sale %q: %w", id, seckill.ErrNotFound)
	}
	s, err := scanSale(st.db.read.QueryRowContext(ctx, st.db.dialect.sql.sales.byID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sale %s: %w", id, seckill.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("sale %s: %w", id, st.db.classify(err))
	}
	return s, nil
}

// SalesStartingBefore lists the sales with StartAt <= t and EndAt > now,
// by StartAt then ID. Both bounds are compared at millisecond precision,
// the precision of stored times.
func (st *SaleStore) SalesStartingBefore(ctx context.Context, t, now time.Time) ([]*seckill.Sale, error) {
	sales, err := queryAll(ctx, st.db.read, scanSale, st.db.dialect.sql.sales.startingBefore, toMillis(t), toMillis(now))
	if err != nil {
		return nil, fmt.Errorf("list sales starting before %s: %w", t.UTC().Format(time.RFC3339Nano), st.db.classify(err))
	}
	return sales, nil
}

// scanSale reads the columns of saleColumns.
func scanSale(row interface{ Scan(...any) error }) (*seckill.Sale, error) {
	var (
		s                       seckill.Sale
		start, end, createdAtMs int64
		admission               string
	)
	err := row.Scan(&s.ID, &s.Name, &s.PriceCents, &s.Stock, &s.Unsold, &s.PurchaseLimit,
		&start, &end, &s.Version, &createdAtMs, &s.Buckets, &s.Currency, &admission)
	if err != nil {
		return nil, err
	}
	if s.Admission, err = decodeAdmission(admission); err != nil {
		return nil, fmt.Errorf("sale %s: stored %w", s.ID, err)
	}
	s.StartAt, s.EndAt, s.CreatedAt = fromMillis(start), fromMillis(end), fromMillis(createdAtMs)
	return &s, nil
}

// toMillis is t as unix milliseconds, rounded down: a stored time never
// lies after the time it was made from.
func toMillis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis is the UTC time of unix milliseconds ms.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
