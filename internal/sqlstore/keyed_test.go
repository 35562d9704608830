package sqlstore

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/seckill-dev/seckill"
)

// TestOrderOfKeyFindsTheKeyedOrder: an order keeps the key digest its
// event carried, and OrderOfKey finds it by sale, buyer and digest only;
// an event without one, or with a value that is no digest, keeps NULL.
func TestOrderOfKeyFindsTheKeyedOrder(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		createSale(t, db, "tea", 10)
		k1, k2 := seckill.IdempotencyDigest("k-1"), seckill.IdempotencyDigest("k-2")
		evs := events("tea", 2, 1, 1)
		evs[0].KeyDigest = k1
		evs[2].KeyDigest = "not a digest"
		persist(t, st, "tea", evs)
		// One more, alone in its batch.
		late := events("tea", 1)
		late[0].UserID, late[0].KeyDigest = "u9", k2
		persist(t, st, "tea", late)

		o, err := st.OrderOfKey(t.Context(), "tea", "u0", k1)
		if err != nil || o.ReservationID != evs[0].ReservationID || o.Qty != 2 {
			t.Errorf("OrderOfKey(u0, k-1) = %+v, %v; want the order of %s, qty 2", o, err, evs[0].ReservationID)
		}
		if o, err := st.OrderOfKey(t.Context(), "tea", "u9", k2); err != nil || o.ReservationID != late[0].ReservationID {
			t.Errorf("OrderOfKey(u9, k-2) = %+v, %v; want the order of %s", o, err, late[0].ReservationID)
		}
		for _, q := range []struct{ sale, user, digest string }{
			{"tea", "u0", k2},             // another key
			{"tea", "u1", k1},             // another buyer's key
			{"coffee", "u0", k1},          // another sale
			{"tea", "u0", "not a digest"}, // no digest at all
		} {
			if o, err := st.OrderOfKey(t.Context(), q.sale, q.user, q.digest); !errors.Is(err, seckill.ErrNotFound) {
				t.Errorf("OrderOfKey(%+v) = %+v, %v; want ErrNotFound", q, o, err)
			}
		}
		for i, want := range []sql.NullString{{String: k1, Valid: true}, {}, {}} {
			var got sql.NullString
			err := db.read.QueryRowContext(t.Context(), `SELECT key_digest FROM orders WHERE reservation_id = `+(&db.dialect.sql.orders).bind(1),
				evs[i].ReservationID).Scan(&got)
			if err != nil || got != want {
				t.Errorf("key_digest of event %d = %+v, %v; want %+v", i, got, err, want)
			}
		}
	})
}
