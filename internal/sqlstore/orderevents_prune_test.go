package sqlstore

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/eventdelivery"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestPruneDeletesOnlyOldDeliveredEvents: with delivered events kept a
// week, an event delivered before then is deleted; one delivered within
// the week, a pending one (a month old) and a dead one (dead a month ago)
// are kept: the store agrees with eventdelivery.Expired on every row. A
// batch deletes at most its limit, oldest first; pruning again deletes
// nothing; an order whose delivered event went is still delivered in turn.
func TestPruneDeletesOnlyOldDeliveredEvents(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, st *OrderStore) {
		db.EnableOrderEvents()
		ctx := t.Context()
		es := NewEventStore(db)
		createSale(t, db, "tea", 10)
		evs := events("tea", 1, 1, 1, 1, 1, 1, 1, 1)
		persist(t, st, "tea", evs)
		base := time.Now().Truncate(time.Millisecond)
		claimed, err := es.Claim(ctx, "a", base.Add(time.Second), time.Minute, 100)
		if err != nil || len(claimed) != len(evs) {
			t.Fatalf("Claim = %d events, %v; want %d", len(claimed), err, len(evs))
		}
		// The first five are delivered a month ago, a minute apart and
		// newest first; the sixth five days ago; the seventh dies; the
		// eighth stays pending. Order 0 then gets a pending order.paid.
		for i, d := range claimed[:5] {
			if err := es.Delivered(ctx, []int64{d.Seq}, base.Add(time.Duration(5-i)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		now := base.Add(30 * 24 * time.Hour)
		if err := es.Delivered(ctx, []int64{claimed[5].Seq}, now.Add(-5*24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if ok, err := es.Failed(ctx, claimed[6].Seq, "a", "500", time.Time{}, true, base); err != nil || !ok {
			t.Fatalf("Failed = %v, %v", ok, err)
		}
		if _, err := st.PayOrder(ctx, claimed[0].Event.ReservationID, base); err != nil {
			t.Fatal(err)
		}
		keep := 7 * 24 * time.Hour
		before, ok := eventdelivery.PruneBefore(now, keep)
		if !ok {
			t.Fatal("PruneBefore: no pruning with a week's retention")
		}
		rows := allEvents(t, es)
		var expired []int64
		for _, d := range rows {
			if eventdelivery.Expired(d, now, keep) {
				expired = append(expired, d.Seq)
			}
		}
		if len(expired) != 5 {
			t.Fatalf("%d events expired by the rule, want the 5 delivered a month ago", len(expired))
		}

		// Oldest delivered first: claimed[4], then [3].
		n, err := es.PruneDelivered(ctx, before, 2)
		if err != nil || n != 2 {
			t.Fatalf("PruneDelivered(limit 2) = %d, %v; want 2", n, err)
		}
		left := map[int64]bool{}
		for _, d := range allEvents(t, es) {
			left[d.Seq] = true
		}
		if left[claimed[4].Seq] || left[claimed[3].Seq] || !left[claimed[2].Seq] {
			t.Errorf("first batch left %v; want the two delivered first gone, the third there", left)
		}
		if n, err := es.PruneDelivered(ctx, before, 1000); err != nil || n != 3 {
			t.Fatalf("second batch = %d, %v; want the 3 left", n, err)
		}
		if n, err := es.PruneDelivered(ctx, before, 1000); err != nil || n != 0 {
			t.Errorf("pruning again = %d, %v; want 0", n, err)
		}

		got := allEvents(t, es)
		if len(got) != len(rows)-len(expired) {
			t.Errorf("%d events left, want %d", len(got), len(rows)-len(expired))
		}
		for _, d := range got {
			if eventdelivery.Expired(d, now, keep) {
				t.Errorf("event %d (%s, delivered %v) is left though expired", d.Seq, d.State, d.DeliveredAt)
			}
		}
		states := map[seckill.DeliveryState]int{}
		for _, d := range got {
			states[d.State]++
		}
		if states[seckill.DeliveryDelivered] != 1 || states[seckill.DeliveryDead] != 1 || states[seckill.DeliveryPending] != 2 {
			t.Errorf("left by state %v; want 1 delivered, 1 dead, 2 pending", states)
		}
		// Order 0's created is gone; its paid is its first undelivered
		// event and goes out.
		ds, err := es.Claim(ctx, "b", now, time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		var paid bool
		for _, d := range ds {
			paid = paid || (d.Event.Type == seckill.EventOrderPaid && d.Event.ReservationID == claimed[0].Event.ReservationID)
		}
		if !paid {
			t.Errorf("after pruning claimed %v; want order 0's order.paid among them", ds)
		}
	})
}

// TestPruneRefusesABadLimit: the delete lists its rows, so a batch has
// bounds.
func TestPruneRefusesABadLimit(t *testing.T) {
	es := NewEventStore(openMigrated(t, sqltest.SQLite))
	for _, limit := range []int{0, -1, maxPruneBatch + 1} {
		if _, err := es.PruneDelivered(t.Context(), time.Now(), limit); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("PruneDelivered(limit %d) = %v, want %s", limit, err, seckill.EINVALID)
		}
	}
}

// TestPruneSelectUsesTheDeliveredIndex: a batch is a range of
// order_events_delivered_idx, not a scan of the outbox, as each database's
// planner chooses by itself (no hint) on an outbox a week into its
// sales: 20,000 events delivered over ten days and one in forty pending,
// its statistics taken. The cut is a week ago (the default
// --order-events-keep), nine days ago (little to delete) and now.
func TestPruneSelectUsesTheDeliveredIndex(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		const day, n = int64(86_400_000), 20_000
		now := time.Now().UnixMilli()
		var b strings.Builder
		for chunk := range n / 500 {
			b.Reset()
			b.WriteString(`INSERT INTO order_events (` + eventInsertColumns + `, state, delivered_at_ms) VALUES `)
			for i := range 500 {
				k := int64(chunk*500 + i)
				if i > 0 {
					b.WriteString(", ")
				}
				state, delivered := "'delivered'", fmt.Sprint(now-10*day+k*(10*day/n))
				if k%40 == 0 {
					state, delivered = "'pending'", "NULL"
				}
				fmt.Fprintf(&b, `('e%06d', 'order.created', 'o-tea.r%06d', 'tea.r%06d', 'tea', 'u%d', 1, 100, 'EUR', %d, %d, %d, %s, %s)`,
					k, k, k, k, now, now, now, state, delivered)
			}
			if _, err := db.write.ExecContext(ctx, b.String()); err != nil {
				t.Fatal(err)
			}
		}
		conn := analyzedConn(t, db, "order_events")
		q := NewEventStore(db).q.prunable
		for _, ago := range []int64{7, 9, 0} {
			text := explainPlan(t, conn, db.Dialect(), q, now-ago*day, 1000)
			if !strings.Contains(text, "order_events_delivered_idx") || strings.Contains(strings.ToLower(text), "temp b-tree") ||
				strings.Contains(text, "Sort") || strings.Contains(text, "filesort") {
				t.Errorf("plan of the prune select, cut %d days ago:\n%s\nwant a range of order_events_delivered_idx, no sort", ago, text)
			}
			if db.Dialect() == "mysql" && !strings.Contains(text, "type=range") {
				t.Errorf("plan of the prune select, cut %d days ago:\n%s\nwant a range (type=range), not an index scan", ago, text)
			}
			t.Logf("plan, cut %d days ago:\n%s", ago, text)
		}
	})
}

// analyzedConn takes table's statistics, so that a plan read next is the
// one its data gets, and returns a read connection to explain it on.
func analyzedConn(t *testing.T, db *DB, table string) *sql.Conn {
	t.Helper()
	analyze := map[string]string{"mysql": "ANALYZE TABLE " + table, "postgres": "ANALYZE " + table, "sqlite": "ANALYZE"}[db.Dialect()]
	rows, err := db.write.QueryContext(t.Context(), analyze) // MySQL answers with a table of its own
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	conn, err := db.read.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// explainPlan is the plan the database gives for q with args, one line a
// row, each column as name=value.
func explainPlan(t *testing.T, conn *sql.Conn, dialect, q string, args ...any) string {
	t.Helper()
	explain := "EXPLAIN "
	if dialect == "sqlite" {
		explain = "EXPLAIN QUERY PLAN "
	}
	rows, err := conn.QueryContext(t.Context(), explain+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var line []string
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			line = append(line, cols[i]+"="+strings.TrimSpace(fmt.Sprint(v)))
		}
		plan = append(plan, strings.Join(line, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
