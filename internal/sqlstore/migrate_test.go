package sqlstore

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// schemaSnapshot describes the database's schema and migration history,
// so that a second Migrate can be shown to change nothing.
func schemaSnapshot(t *testing.T, db *DB) []string {
	t.Helper()
	queries := map[string][]string{
		"sqlite": {
			`SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_schema ORDER BY type, name`,
		},
		"mysql": {
			`SELECT CONCAT_WS(' ', table_name, column_name, column_type, is_nullable) FROM information_schema.columns
				WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position`,
			`SELECT CONCAT_WS(' ', table_name, index_name, seq_in_index, column_name) FROM information_schema.statistics
				WHERE table_schema = DATABASE() ORDER BY table_name, index_name, seq_in_index`,
		},
		"postgres": {
			`SELECT concat_ws(' ', table_name, column_name, data_type, is_nullable) FROM information_schema.columns
				WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
			`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`,
		},
	}[db.Dialect()]
	queries = append(queries, `SELECT CONCAT(version, ' ', name, ' ', applied_at_ms) FROM schema_migrations ORDER BY version`)
	var out []string
	for _, q := range queries {
		rows, err := db.read.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatalf("snapshot %q: %v", q, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// wantIndexes checks, on every dialect, that the migrated schema has each
// of indexes.
func wantIndexes(t *testing.T, indexes ...string) {
	t.Helper()
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		schema := strings.Join(schemaSnapshot(t, db), "\n")
		for _, idx := range indexes {
			if !strings.Contains(schema, idx) {
				t.Errorf("schema has no %s", idx)
			}
		}
	})
}

// appliedVersions lists schema_migrations, checking each row's name.
func appliedVersions(t *testing.T, db *DB) []int64 {
	t.Helper()
	ms, err := loadMigrations(db.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.read.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []int64
	for rows.Next() {
		var (
			v    int64
			name string
		)
		if err := rows.Scan(&v, &name); err != nil {
			t.Fatal(err)
		}
		if v < 1 || v > int64(len(ms)) || ms[v-1].name != name {
			t.Errorf("schema_migrations has (%d, %q), which is not a migration", v, name)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func allVersions(t *testing.T, dialect string) []int64 {
	t.Helper()
	ms, err := loadMigrations(dialect)
	if err != nil {
		t.Fatal(err)
	}
	var vs []int64
	for _, m := range ms {
		vs = append(vs, m.version)
	}
	return vs
}

func TestMigrateTwice(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			db := openMigrated(t, d.url)
			if got, want := appliedVersions(t, db), allVersions(t, d.name); !reflect.DeepEqual(got, want) {
				t.Fatalf("applied %v, want %v", got, want)
			}
			before := schemaSnapshot(t, db)
			if !strings.Contains(strings.Join(before, "\n"), "sales_end_start_idx") {
				t.Errorf("schema has no sales_end_start_idx:\n%s", strings.Join(before, "\n"))
			}
			// Later than any applied_at_ms: a re-applied migration would show.
			db.Now = func() time.Time { return time.Now().Add(time.Hour) }
			if err := db.Migrate(t.Context()); err != nil {
				t.Fatalf("second Migrate: %v", err)
			}
			if after := schemaSnapshot(t, db); !reflect.DeepEqual(after, before) {
				t.Errorf("second Migrate changed the schema:\nbefore:\n%s\nafter:\n%s",
					strings.Join(before, "\n"), strings.Join(after, "\n"))
			}
		})
	}
}

// TestMigrateConcurrent: processes that start together on a fresh
// database all migrate successfully, and each migration runs once.
func TestMigrateConcurrent(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			url := d.url(t)
			const n = 3
			dbs := make([]*DB, n)
			for i := range dbs {
				dbs[i] = openDB(t, url) // separate pools, as separate processes
			}
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				errs  = make([]error, n)
			)
			for i, db := range dbs {
				wg.Go(func() {
					<-start
					errs[i] = db.Migrate(t.Context())
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("Migrate #%d: %v", i, err)
				}
			}
			if got, want := appliedVersions(t, dbs[0]), allVersions(t, d.name); !reflect.DeepEqual(got, want) {
				t.Fatalf("applied %v, want %v", got, want)
			}
			s := &seckill.Sale{ID: "after_migrate", Name: "x", Stock: 1, PurchaseLimit: 1,
				StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
			if err := NewSaleStore(dbs[n-1]).CreateSale(t.Context(), s); err != nil {
				t.Fatalf("CreateSale after concurrent Migrate: %v", err)
			}
		})
	}
}

// TestMigrationsMatchAcrossDialects: every dialect has the same numbered
// list, so a schema change is never made for one database only.
func TestMigrationsMatchAcrossDialects(t *testing.T) {
	names := func(dialect string) []string {
		ms, err := loadMigrations(dialect)
		if err != nil {
			t.Fatalf("loadMigrations(%s): %v", dialect, err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%04d_%s", m.version, m.name))
		}
		return out
	}
	want := names("sqlite")
	if len(want) == 0 {
		t.Fatal("no sqlite migrations")
	}
	for _, d := range []string{"mysql", "postgres"} {
		if got := names(d); !reflect.DeepEqual(got, want) {
			t.Errorf("%s migrations %v, sqlite has %v", d, got, want)
		}
	}
}

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"only comments", "-- a;\n# b;\n  \n", nil},
		{"one without semicolon", "CREATE TABLE a (x INT)", []string{"CREATE TABLE a (x INT)"}},
		{"two", "CREATE TABLE a (x INT);\nCREATE TABLE b (y INT);\n", []string{"CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)"}},
		{"comment before", "-- makes a; and b\nCREATE TABLE a (x INT);", []string{"-- makes a; and b\nCREATE TABLE a (x INT)"}},
		{"trailing comment", "SELECT 1; -- done;", []string{"SELECT 1"}},
		{"block comment", "SELECT /* ; */ 1; SELECT 2", []string{"SELECT /* ; */ 1", "SELECT 2"}},
		{"single quotes", "SELECT 'a;b', 'it''s;'; SELECT 2", []string{"SELECT 'a;b', 'it''s;'", "SELECT 2"}},
		{"backslash escape", `SELECT 'a\';b'; SELECT 2`, []string{`SELECT 'a\';b'`, "SELECT 2"}},
		{"double quotes", `SELECT "a;b"; SELECT 2`, []string{`SELECT "a;b"`, "SELECT 2"}},
		{"backticks", "CREATE TABLE `a;b` (x INT); SELECT 2", []string{"CREATE TABLE `a;b` (x INT)", "SELECT 2"}},
		{"quote in comment", "-- it's\nSELECT 1; SELECT 2", []string{"-- it's\nSELECT 1", "SELECT 2"}},
		{"empty statements", ";;SELECT 1;;", []string{"SELECT 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := splitStatements(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitStatements(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	// The MySQL migrations themselves: one statement each, comments kept
	// out of the way.
	ms, err := loadMigrations("mysql")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, stmt := range splitStatements(m.sql) {
			if !strings.Contains(stmt, "CREATE") && !strings.Contains(stmt, "ALTER") &&
				!strings.Contains(stmt, "INSERT") && !strings.Contains(stmt, "UPDATE") {
				t.Errorf("%04d_%s: odd statement %q", m.version, m.name, stmt)
			}
		}
	}
}

// TestMigration0009KeepsOrders: a database that holds orders when it is
// upgraded to 0009 (which rebuilds the orders table's keys) keeps every
// one of them as it was, and the new key still refuses what the old ones
// did: a second order for a reservation, and an order id that is not its
// reservation's.
func TestMigration0009KeepsOrders(t *testing.T) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			ctx := t.Context()
			db := openDB(t, d.url(t))
			ms, err := loadMigrations(d.name)
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for i < len(ms) && ms[i].version < 9 {
				i++
			}
			if i == len(ms) || ms[i].version != 9 {
				t.Fatal("no migration 0009")
			}
			migrateSteps(t, db, ms[:i])
			// The row as that schema has it: CreateSale writes the
			// columns of later migrations too.
			ins := `INSERT INTO sales (id, name, price_cents, stock, initial_stock, per_user_limit,
				start_at_ms, end_at_ms, version, created_at_ms, updated_at_ms, buckets, currency)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
			if db.dialect == postgresDialect {
				ins = rebind(ins)
			}
			nowMs := time.Now().UnixMilli()
			if _, err := db.write.ExecContext(ctx, ins, "tea", "tea", 100, 10, 10, 10, nowMs, nowMs+3600_000, 1, nowMs, nowMs, 1, ""); err != nil {
				t.Fatal(err)
			}
			// Orders as that schema has them: today's writer sets columns
			// of later migrations too.
			evs := events("tea", 1, 2, 3)
			insOrder := `INSERT INTO orders (id, reservation_id, sale_id, user_id, qty, amount_cents, status,
				pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
			if db.dialect == postgresDialect {
				insOrder = rebind(insOrder)
			}
			for _, e := range evs {
				if _, err := db.write.ExecContext(ctx, insOrder, seckill.OrderIDOf(e.ReservationID), e.ReservationID, "tea", e.UserID,
					e.Qty, 100*e.Qty, "ordered", nowMs+60_000, e.ReservedAt.UnixMilli(), nowMs, nowMs); err != nil {
					t.Fatalf("before 0009: %v", err)
				}
			}
			if _, err := db.write.ExecContext(ctx, `UPDATE sales SET stock = stock - 6, version = version + 1`); err != nil {
				t.Fatal(err)
			}
			before := map[string]*seckill.Order{}
			for _, e := range evs {
				o, err := NewOrderStore(db).Order(ctx, e.ReservationID)
				if err != nil {
					t.Fatal(err)
				}
				before[e.ReservationID] = o
			}

			migrateSteps(t, db, ms[i:])
			st := NewOrderStore(db)
			for id, want := range before {
				if got, err := st.Order(ctx, id); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("after 0009 order %s = %+v, %v; before %+v", id, got, err, want)
				}
			}
			if got := outcomesString(persist(t, st, "tea", append(evs[:1:1], events("tea", 4)...))); got != "duplicate created" {
				t.Errorf("after 0009, an ordered reservation and a new one: %s; want duplicate created", got)
			}
			if stock, _ := saleRow(t, db, "tea"); stock != 0 {
				t.Errorf("stock %d after 10 units ordered; want 0", stock)
			}
			q := &db.dialect.sql.orders
			_, err = db.write.ExecContext(ctx, `UPDATE orders SET id = 'o-x' WHERE reservation_id = `+q.bind(1), evs[1].ReservationID)
			if err == nil {
				t.Error("an order id that is not its reservation's was stored")
			}
		})
	}
}

// TestMigration0019KeepsBuyerIDs: on MySQL, 0019 makes buyer ids (and a
// failed order's sale id) bytes with every value the utf8mb4 columns held
// kept as it was: a trailing space, and as many 4-byte characters as
// the column took. The other dialects' 0019 changes nothing.
func TestMigration0019KeepsBuyerIDs(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, sqltest.MySQL(t))
	ms, err := loadMigrations(db.Dialect())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 19 || ms[18].version != 19 {
		t.Fatal("no migration 0019")
	}
	migrateSteps(t, db, ms[:18])
	createSale(t, db, "tea", 10)
	long128, long255 := strings.Repeat("\U0001F375", 128), strings.Repeat("\U0001F375", 255) // the columns' most characters
	users := []string{"ann", "ann ", long128}
	evs := events("tea", 1, 1, 1)
	nowMs := time.Now().UnixMilli()
	for i, e := range evs {
		evs[i].UserID = users[i]
		if _, err := db.write.ExecContext(ctx, `INSERT INTO orders (id, reservation_id, sale_id, user_id, qty, amount_cents, status,
			pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			seckill.OrderIDOf(e.ReservationID), e.ReservationID, "tea", users[i], 1, 100, "ordered", nowMs+60_000, nowMs, nowMs, nowMs); err != nil {
			t.Fatalf("before 0019: %v", err)
		}
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO failed_orders (reservation_id, sale_id, user_id, qty, reason, attempts, created_at_ms)
		VALUES ('f1', 'tea ', ?, 1, 'dead letter', 1, ?)`, long255, nowMs); err != nil {
		t.Fatalf("before 0019: %v", err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO order_events (id, type, order_id, reservation_id, sale_id, user_id, qty,
		amount_cents, currency, at_ms, next_at_ms, retry_from_ms) VALUES ('e1', 'order.failed', 'o-f1', 'f1', ?, ?, 1, 0, '', ?, ?, ?)`,
		long255, long255, nowMs, nowMs, nowMs); err != nil {
		t.Fatalf("before 0019: %v", err)
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO audit_log (sale_id, subject, actor, action, detail, at_ms)
		VALUES (?, 'f1', 'op', 'failed_order.refunded', '{}', ?)`, long255, nowMs); err != nil {
		t.Fatalf("before 0019: %v", err)
	}

	migrateSteps(t, db, ms[18:])
	for i, e := range evs {
		var got string
		if err := db.read.QueryRowContext(ctx, `SELECT user_id FROM orders WHERE reservation_id = ?`, e.ReservationID).Scan(&got); err != nil || got != users[i] {
			t.Errorf("after 0019 order %d's buyer = %q, %v; want %q", i, got, err, users[i])
		}
	}
	for _, c := range []struct{ what, query, want string }{
		{"failed order's sale", `SELECT sale_id FROM failed_orders`, "tea "},
		{"failed order's buyer", `SELECT user_id FROM failed_orders`, long255},
		{"event's sale", `SELECT sale_id FROM order_events`, long255},
		{"event's buyer", `SELECT user_id FROM order_events`, long255},
		{"audit entry's sale", `SELECT sale_id FROM audit_log`, long255},
	} {
		var got string
		if err := db.read.QueryRowContext(ctx, c.query).Scan(&got); err != nil || got != c.want {
			t.Errorf("after 0019 the %s = %q, %v; want %q", c.what, got, err, c.want)
		}
	}
	if got, err := NewOrderStore(db).BuyerOrders(ctx, "tea", "ann"); err != nil || len(got) != 1 || got[0].ReservationID != evs[0].ReservationID {
		t.Errorf(`after 0019 BuyerOrders("ann") = %v, %v; want ann's order only`, got, err)
	}
	if got, _, err := NewOrderStore(db).FailedOrders(ctx, seckill.FailedOrderFilter{SaleID: "tea", Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf(`after 0019 FailedOrders of tea = %v, %v; want none (the dead letter's sale is "tea ")`, got, err)
	}
}

// migrateSteps applies ms to db on a connection of its own for the
// step only: SQLite's writer pool has one connection, which the stores a
// test uses between steps need too.
func migrateSteps(t *testing.T, db *DB, ms []migration) {
	t.Helper()
	conn, err := db.write.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := db.migrate(t.Context(), conn, ms); err != nil {
		t.Fatal(err)
	}
}

// TestIndexesBuiltConcurrently: on PostgreSQL the indexes that migrations
// add to tables the order writer fills (0017 on order_events, 0020 on
// failed_orders) are built CONCURRENTLY, outside a transaction (where
// PostgreSQL would refuse them), so an upgrade does not hold back a live
// sale's writes. A process stopped after the build and before recording
// it builds again, also over what a failed concurrent build leaves (an
// invalid index).
func TestIndexesBuiltConcurrently(t *testing.T) {
	noTx := map[string][]int64{}
	for _, d := range dialects {
		ms, err := loadMigrations(d.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.noTx {
				noTx[d.name] = append(noTx[d.name], m.version)
			}
		}
	}
	if want := map[string][]int64{"postgres": {17, 20}}; !reflect.DeepEqual(noTx, want) {
		t.Errorf("migrations outside a transaction: %v, want %v", noTx, want)
	}

	db := openMigrated(t, sqltest.Postgres) // fails if a build ran in a transaction
	valid := func(index string) bool {
		t.Helper()
		var ok bool
		// ::regclass finds the index in this test's schema (search_path):
		// other tests' schemas in the database have indexes of that name.
		err := db.read.QueryRowContext(t.Context(), `SELECT indisvalid FROM pg_index WHERE indexrelid = $1::regclass`, index).Scan(&ok)
		if err != nil {
			t.Fatalf("index %s: %v", index, err)
		}
		return ok
	}
	for _, index := range []string{"order_events_delivered_idx", "failed_orders_sale_user_idx"} {
		if !valid(index) {
			t.Errorf("%s is not valid after Migrate", index)
		}
	}
	// Stopped after the build, before the record; the build had failed.
	for _, stmt := range []string{
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'failed_orders_sale_user_idx'::regclass`,
		`DELETE FROM schema_migrations WHERE version = 20`,
	} {
		if _, err := db.write.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	if valid("failed_orders_sale_user_idx") {
		t.Fatal("the index is still valid: the test did not break it")
	}
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if !valid("failed_orders_sale_user_idx") {
		t.Error("failed_orders_sale_user_idx is still invalid after Migrate ran 0020 again")
	}
	if got, want := appliedVersions(t, db), allVersions(t, "postgres"); !reflect.DeepEqual(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}
