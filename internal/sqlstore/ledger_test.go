package sqlstore

import (
	"strings"
	"testing"

	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestLedgerPagesSeekTheReservationIndex: each page of a sale's ledger is
// a range of the reservation id's index read in order, never a sort of
// every row of the sale (which would make a reconciliation of a large sale
// cost pages × rows).
func TestLedgerPagesSeekTheReservationIndex(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	q := &db.dialect.sql.ledger
	for _, tt := range []struct{ table, query string }{
		{"orders", q.ordersAfter},
		{"failed_orders", q.failedAfter},
		{"restore_requests", q.restoresAfter},
	} {
		got := sqlitePlan(t, db, tt.query, "tea", "tea.", "tea/", 10)
		if !strings.Contains(got, "(reservation_id>? AND reservation_id<?)") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("plan of a page of %s: %s; want a range of the reservation id's index, no sort", tt.table, got)
		}
	}
}

// sqlitePlan is SQLite's EXPLAIN QUERY PLAN of query, its lines joined.
func sqlitePlan(t *testing.T, db *DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.read.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// TestExpiredOrdersReadTheIndexInOrder: the sweeper's list of expired
// orders reads the (status, pay_by_ms) index in order and stops at its
// limit, never sorting every expired order for each batch.
func TestExpiredOrdersReadTheIndexInOrder(t *testing.T) {
	db := openMigrated(t, sqltest.SQLite)
	got := sqlitePlan(t, db, NewOrderStore(db).q.expiredOrders, "ordered", 1, 500)
	if !strings.Contains(got, "orders_status_pay_by_idx (status=? AND pay_by_ms<?)") || strings.Contains(got, "TEMP B-TREE") {
		t.Errorf("plan of the expired-orders list: %s; want the status, pay_by index in order, no sort", got)
	}
}
