package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of the PostgreSQL baseline

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// persistRounds is how many rounds BenchmarkOrderPersistence runs; each
// round persists b.N orders the textbook way and b.N through each pipeline
// configuration.
const persistRounds = 5

// persistDB is a database BenchmarkOrderPersistence runs on: a fresh one
// of the shared server, and its server's process name (for its CPU).
type persistDB struct {
	name, process string
	url           func(testing.TB) string
}

var persistDBs = []persistDB{
	{"mariadb", "mariadbd", sqltest.MySQL},
	{"postgres", "postgres", sqltest.Postgres},
}

// BenchmarkOrderPersistence compares, in one run on each of MariaDB and
// PostgreSQL, the per-order-transaction baseline with seckill's whole
// pipeline (Redis reserve script → outbox → relay → RabbitMQ → order
// writer, a transaction per batch), at the default configuration and at a
// few others.
//
// The baseline is the textbook way, on the same tables: one transaction
// per order, a conditional stock update and the insert, both prepared
// once, 32 concurrent writers. Each round gives both sides the same data:
// a fresh sale of b.N units (limit 1 each) bought by the same b.N buyers,
// one unit each. The baseline and the pipelines take turns inside each
// round (the order flips every round), and a pipeline's ratio is the
// median of its per-round ratios to that round's baseline. A warm-up round
// of up to 500 orders each, not counted, comes first: it pays what a
// running engine paid long before (statements prepared, connections
// opened). Orders per transaction are read from the sale's version, which
// each of the writer's transactions moves by one. CPU per order
// is reported for this process (getrusage: the baseline's clients, or the
// pipeline's reserve calls, relay and writer) and for the database server
// (every process of its name, so a shared server's other clients too),
// read from /proc when it runs on this machine:
//
//	go test -run XXX -bench OrderPersistence -benchtime 5000x ./cmd/seckill
func BenchmarkOrderPersistence(b *testing.B) {
	for _, d := range persistDBs {
		b.Run(d.name, func(b *testing.B) { benchOrderPersistence(b, d) })
	}
}

func benchOrderPersistence(b *testing.B, d persistDB) {
	ctx := context.Background()
	baseline := newTextbookWriter(b, d)
	configs := []struct {
		name                  string
		writers, batch, relay int // 0: the default
	}{
		{"defaults", 0, 0, 0},
		{"batch=500", 2, 500, 0}, // the default until 2026-12-07
		{"relay=500", 0, 0, 500}, // the default until 2026-12-06
		{"writers=4/batch=1000", 4, 1000, 0},
	}
	type side struct {
		run                          func(n int) (rate, perTx, rollbacks float64) // one round of n orders
		rates, ratios, perTx, rolled []float64
		selfCPU, dbCPU, mqCPU, kvCPU time.Duration
	}
	base := &side{run: func(n int) (float64, float64, float64) { return baseline.round(b, n), 1, 0 }}
	pipes := make([]*side, len(configs))
	for i, c := range configs {
		stack := externalStack(b, servicetest.RabbitMQ.URL(b), d.url(b))
		e := startEngine(b, func(cfg *Config) {
			stack(cfg)
			if c.writers > 0 {
				cfg.OrderWriters, cfg.OrderBatch = c.writers, c.batch
			}
			if c.relay > 0 {
				cfg.RelayBatch = c.relay
			}
		})
		// The round's end is watched with a prepared statement, so that
		// watching costs the database little.
		unsold, err := rawDB(b, e.m.Config.DatabaseURL).PrepareContext(ctx, bindDollars(d, `SELECT stock, version FROM sales WHERE id = ?`))
		if err != nil {
			b.Fatal(err)
		}
		pipes[i] = &side{run: func(n int) (float64, float64, float64) { return pipelineRound(ctx, b, e, unsold, n) }}
	}
	all := append([]*side{base}, pipes...)
	// The database's processes are listed at each sample: PostgreSQL
	// starts one per connection.
	dbCPU := func() time.Duration { return cpuOf(procsNamed(d.process)) }
	rabbit, redis := procsNamed("beam.smp"), procsNamed("redis-server")
	for _, s := range all {
		s.run(min(b.N, 500))
	}
	b.ResetTimer()
	for round := range persistRounds {
		order := all
		if round%2 == 1 {
			order = append([]*side{}, pipes...)
			order = append(order, base)
		}
		for _, s := range order {
			// This process's CPU is read last before the round and first
			// after it: listing /proc for the database's processes costs
			// it some milliseconds, which are not the round's.
			db, mq, kv := dbCPU(), cpuOf(rabbit), cpuOf(redis)
			self := cpuSelf()
			rate, perTx, rolled := s.run(b.N)
			s.selfCPU += cpuSelf() - self
			s.rates, s.perTx, s.rolled = append(s.rates, rate), append(s.perTx, perTx), append(s.rolled, rolled)
			s.dbCPU += dbCPU() - db
			s.mqCPU += cpuOf(rabbit) - mq
			s.kvCPU += cpuOf(redis) - kv
		}
		for _, p := range pipes {
			p.ratios = append(p.ratios, p.rates[round]/base.rates[round])
		}
	}
	b.StopTimer()
	perOrder := func(d time.Duration) float64 {
		return float64(d.Microseconds()) / float64(persistRounds*b.N)
	}
	b.ReportMetric(median(base.rates), "baseline-orders/s")
	b.ReportMetric(perOrder(base.selfCPU), "baseline-client-µs/order")
	b.ReportMetric(perOrder(base.dbCPU), "baseline-db-µs/order")
	for i, c := range configs {
		p := pipes[i]
		b.ReportMetric(median(p.rates), c.name+"-orders/s")
		b.ReportMetric(median(p.ratios), c.name+"-ratio")
		b.ReportMetric(median(p.perTx), c.name+"-orders/transaction")
		b.ReportMetric(perOrder(p.selfCPU), c.name+"-seckill-µs/order")
		b.ReportMetric(perOrder(p.dbCPU), c.name+"-db-µs/order")
		b.ReportMetric(perOrder(p.mqCPU), c.name+"-rabbitmq-µs/order")
		b.ReportMetric(perOrder(p.kvCPU), c.name+"-redis-µs/order")
		b.ReportMetric(median(p.rolled), c.name+"-rollbacks/round")
		b.Logf("%s %s: ratios by round %s; rollbacks by round %s", d.name, c.name, fmtRatios(p.ratios), fmtRatios(p.rolled))
	}
}

// bindDollars rewrites the ? bind parameters of query as $1, $2, … on
// PostgreSQL.
func bindDollars(d persistDB, query string) string {
	if d.name != "postgres" {
		return query
	}
	var out strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			out.WriteString("$" + strconv.Itoa(n))
			continue
		}
		out.WriteRune(c)
	}
	return out.String()
}

func fmtRatios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, " ")
}

// pipelineRound reserves n units of a fresh sale through the engine's
// stock store, the way the combiner sends them (batches of up to 256 per
// script call), and returns orders/s from the first reserve until the
// database holds every order, the orders per writer's committed
// transaction and the writer's transactions rolled back on a conflict.
func pipelineRound(ctx context.Context, b *testing.B, e *engine, unsold *sql.Stmt, n int) (rate, perTx, rollbacks float64) {
	sales := sqlstore.NewSaleStore(e.m.db)
	sale := benchSale(b, sales, int64(n))
	if _, err := e.m.stock.StockStore().Preheat(ctx, sale); err != nil {
		b.Fatal(err)
	}
	conflicts := e.m.orders.Conflicts()
	start := time.Now()
	for done := 0; done < n; {
		k := min(256, n-done)
		reqs := make([]seckill.ReserveRequest, k)
		for i := range reqs {
			reqs[i] = seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()),
				UserID: fmt.Sprint("u", done+i), Qty: 1}
		}
		res, err := e.m.stock.StockStore().Reserve(ctx, sale.ID, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != seckill.OutcomeReserved {
				b.Fatalf("reserve: %v", r.Outcome)
			}
		}
		done += k
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var left, version int64
		if err := unsold.QueryRowContext(ctx, sale.ID).Scan(&left, &version); err != nil {
			b.Fatal(err)
		}
		if left == sale.Stock-int64(n) {
			rate = float64(n) / time.Since(start).Seconds()
			// A new sale is at version 1.
			return rate, float64(n) / float64(max(version-1, 1)), float64(e.m.orders.Conflicts() - conflicts)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d orders persisted", sale.Stock-left, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// textbookWriter is the baseline: one transaction per order on a database
// of seckill's schema, through a pool of 32 connections.
type textbookWriter struct {
	sales          *sqlstore.SaleStore
	raw            *sql.DB
	update, insert *sql.Stmt
}

func newTextbookWriter(b *testing.B, d persistDB) *textbookWriter {
	ctx := context.Background()
	dbURL := d.url(b)
	db, err := sqlstore.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	w := &textbookWriter{sales: sqlstore.NewSaleStore(db), raw: rawDB(b, dbURL)}
	if w.update, err = w.raw.PrepareContext(ctx, bindDollars(d, `UPDATE sales SET stock = stock - 1 WHERE id = ? AND stock > 0`)); err != nil {
		b.Fatal(err)
	}
	w.insert, err = w.raw.PrepareContext(ctx, bindDollars(d, `INSERT INTO orders (id, reservation_id, sale_id, user_id, qty, amount_cents, status, pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms)
		VALUES (?, ?, ?, ?, 1, 100, 'ordered', ?, ?, ?, ?)`))
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// round writes n orders of a fresh sale, 32 at a time, and returns
// orders/s.
func (w *textbookWriter) round(b *testing.B, n int) float64 {
	ctx := context.Background()
	sale := benchSale(b, w.sales, int64(n))
	var (
		wg   sync.WaitGroup
		next = make(chan int)
	)
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := w.order(ctx, sale.ID, i); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

func (w *textbookWriter) order(ctx context.Context, sale string, i int) error {
	id := seckill.NewReservationID(sale, time.Now())
	ms := time.Now().UnixMilli()
	tx, err := w.raw.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	res, err := tx.StmtContext(ctx, w.update).ExecContext(ctx, sale)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return fmt.Errorf("no stock")
	}
	if _, err = tx.StmtContext(ctx, w.insert).ExecContext(ctx, seckill.OrderIDOf(id), id, sale, fmt.Sprint("u", i), ms+3600000, ms, ms, ms); err != nil {
		return err
	}
	return tx.Commit()
}

// rawDB opens a plain database/sql handle on a mysql:// or postgres://
// URL, with a pool of 32 connections.
func rawDB(b testing.TB, rawURL string) *sql.DB {
	b.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		b.Fatal(err)
	}
	var db *sql.DB
	if u.Scheme == "mysql" {
		cfg := mysql.NewConfig()
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		db, err = sql.Open("mysql", cfg.FormatDSN())
	} else {
		db, err = sql.Open("pgx", rawURL)
	}
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	b.Cleanup(func() { db.Close() })
	return db
}

func benchSale(b *testing.B, sales *sqlstore.SaleStore, stock int64) *seckill.Sale {
	b.Helper()
	now := time.Now()
	s := &seckill.Sale{ID: servicetest.UniqueName("b"), Name: "bench", PriceCents: 100, Stock: max(stock, 1),
		PurchaseLimit: 1, StartAt: now.Add(-time.Second), EndAt: now.Add(time.Hour)}
	if err := sales.CreateSale(context.Background(), s); err != nil {
		b.Fatal(err)
	}
	return s
}

// cpuSelf is the CPU time this process has used.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procsNamed lists the /proc/<pid>/stat files of the processes of this
// machine named comm.
func procsNamed(comm string) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var named []string
	for _, p := range stats {
		if c, err := os.ReadFile(filepath.Join(filepath.Dir(p), "comm")); err == nil && strings.TrimSpace(string(c)) == comm {
			named = append(named, p)
		}
	}
	return named
}

// cpuOf is the CPU time used by the processes whose stat files are given
// (0 for those gone).
func cpuOf(stats []string) time.Duration {
	var ticks int64
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// After the name (which may hold spaces): state, then fields
		// 4…; utime and stime are fields 14 and 15.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
