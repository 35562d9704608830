package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/seckill-dev/seckill"
)

// keyDigestOf is the key digest an order of e keeps: e's, when it has the
// shape of one (a broker carries outside bytes), else none.
func keyDigestOf(e seckill.ReservationEvent) string {
	if seckill.ValidIdempotencyDigest(e.KeyDigest) {
		return e.KeyDigest
	}
	return ""
}

// keyDigestArg is the key_digest column's value of an order: NULL when it
// has none.
func keyDigestArg(d string) any {
	if d == "" {
		return nil
	}
	return d
}

// OrderOfKey returns the buyer's order of a sale whose reservation was made
// under the Idempotency-Key of digest (seckill.IdempotencyDigest), on the
// orders (sale_id, user_id) index; seckill.ErrNotFound when there is none.
// It answers a retry whose key the stock store no longer remembers.
func (st *Orders) OrderOfKey(ctx context.Context, saleID, userID, digest string) (*seckill.Order, error) {
	if !seckill.ValidSaleID(saleID) || !seckill.ValidUserID(userID) || !seckill.ValidIdempotencyDigest(digest) {
		return nil, seckill.ErrNotFound
	}
	o, err := scanOrder(st.db.read.QueryRowContext(ctx, st.q.orderOfKey, saleID, userID, digest))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, seckill.ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("order of a key of sale %s: %w", saleID, st.db.classify(err))
	}
	return o, nil
}
