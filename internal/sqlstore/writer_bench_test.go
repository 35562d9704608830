package sqlstore

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// writerBatch is the batch of the writer benchmarks: what the pipeline's
// writer persists per transaction under load (persist_bench_test.go
// reports 260-450 orders a transaction on MariaDB).
const writerBatch = 256

// dbProcess names each dialect's server process, whose CPU the writer
// benchmarks read from /proc when it runs on this machine (SQLite runs in
// this process).
var dbProcess = map[string]string{"mysql": "mariadbd", "postgres": "postgres"}

// BenchmarkWriterTransaction is the order writer's transaction alone, on
// each dialect: b.N batches of writerBatch new orders of one sale, each
// from a buyer of its own (a rush: every batch's limit check looks up
// buyers with no order yet), one PersistReservations call each. It
// reports orders/s, this process's CPU per order (the writer's
// statement building, driver, decode), the database server's (every
// process of that name on this machine, so the other clients of a shared
// server too) and that of the server thread or process serving the
// writer's one connection (conn: the statements alone, without the
// server's background work):
//
//	go test -run '^$' -bench WriterTransaction -benchtime 200x ./internal/sqlstore
func BenchmarkWriterTransaction(b *testing.B) {
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			w := newWriterBench(b, d)
			work := w.batches(b.N, writerBatch)
			server, self, conn := w.serverCPU(), cpuTime(), w.connCPU()
			start := time.Now()
			b.ResetTimer()
			persistAll(b, w.st, work)
			b.StopTimer()
			n := float64(b.N * writerBatch)
			b.ReportMetric(n/time.Since(start).Seconds(), "orders/s")
			b.ReportMetric(float64((cpuTime()-self).Microseconds())/n, "client-µs/order")
			if d.name != "sqlite" {
				b.ReportMetric(float64((w.serverCPU()-server).Microseconds())/n, "db-µs/order")
				b.ReportMetric(float64((w.connCPU()-conn).Microseconds())/n, "conn-µs/order")
			}
		})
	}
}

// BenchmarkWriterMillion writes 1,000,000 orders of one sale through the
// writer's transaction on each dialect (batches of writerBatch, a buyer
// per order) and reports the rate of each 100,000, and the last one's
// ratio to the first, and on a database server the CPU per order of the
// writer's connection per 100,000: a sale's writes must not slow down as
// it grows.
// It ignores b.N (run it with -benchtime 1x):
//
//	go test -run '^$' -bench WriterMillion -benchtime 1x -timeout 60m ./internal/sqlstore
func BenchmarkWriterMillion(b *testing.B) {
	const total, step = 1_000_000, 100_000
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			w := newWriterBench(b, d)
			var rates, costs, waits []float64
			for range total / step {
				work := w.batches(step/writerBatch, writerBatch)
				n := float64(len(work) * writerBatch)
				start, conn, wait := time.Now(), w.connCPU(), w.connWait()
				persistAll(b, w.st, work)
				rates = append(rates, n/time.Since(start).Seconds())
				costs = append(costs, float64((w.connCPU()-conn).Microseconds())/n)
				waits = append(waits, float64((w.connWait()-wait).Microseconds())/n)
			}
			parts := make([]string, len(rates))
			for i, r := range rates {
				parts[i] = strconv.Itoa(int(r))
				b.ReportMetric(r, fmt.Sprintf("orders/s-%02d", i+1))
			}
			b.ReportMetric(rates[len(rates)-1]/rates[0], "last/first")
			b.Logf("%s: orders/s per 100k: %s; last/first %.2f", d.name, strings.Join(parts, " "), rates[len(rates)-1]/rates[0])
			if w.conn != "" {
				// The server's CPU per order on the writer's connection: on a
				// shared machine the rate moves with the neighbours' load, the
				// CPU a statement costs much less.
				b.ReportMetric(costs[len(costs)-1]/costs[0], "conn-cpu-last/first")
				b.Logf("%s: conn-µs/order per 100k: %s; last/first %.2f", d.name, joinFloats(costs, 1), costs[len(costs)-1]/costs[0])
				// The time the connection's server side waited for a core
				// (the neighbours' load): what moves the rate.
				b.Logf("%s: conn run-queue µs/order per 100k: %s", d.name, joinFloats(waits, 1))
			}
		})
	}
}

// BenchmarkWriterGrowth asks BenchmarkWriterMillion's question so that a
// shared machine's load cancels out: on each dialect, two databases, one
// with a sale of 100,000 orders and one with a sale of 1,000,000 (written
// as BenchmarkWriterMillion writes them), then batches into each in
// alternation, 9 rounds of 100 batches per sale
// (which goes first alternates). It reports the medians over the rounds of
// the 1M sale's rate and CPU per order over the 100k sale's: 1.00 is no
// slowdown as a sale grows. The CPU is the server's on the writer's
// connection (this process's on SQLite, which runs in it). It runs with
// the buyers named as BenchmarkWriterMillion names them (u0, u1, …: each
// new buyer's place in the (sale, buyer) index is next to the last one's)
// and scattered (a hash of that number: a place anywhere in the index, as
// real buyers arrive). Both stores
// keep their sale's holdings through the rounds (the bound, maxHeldEntries,
// is past the 1M sale's buyers: what a sale costs once it passes the bound
// is another question, see docs/performance.md). It ignores b.N:
//
//	go test -run '^$' -bench WriterGrowth -benchtime 1x -timeout 60m ./internal/sqlstore
func BenchmarkWriterGrowth(b *testing.B) {
	const rounds, batches = 9, 100
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			b.Run("buyers-in-order", func(b *testing.B) { growth(b, d, false, rounds, batches) })
			b.Run("buyers-scattered", func(b *testing.B) { growth(b, d, true, rounds, batches) })
		})
	}
}

// growth is BenchmarkWriterGrowth on one dialect and naming of buyers.
func growth(b *testing.B, d testDialect, scatter bool, rounds, batches int) {
	grown := func(orders int) *writerBench {
		w := newWriterBench(b, d)
		w.scatter = scatter
		for done := 0; done < orders; done += 100_000 {
			persistAll(b, w.st, w.batches(100_000/writerBatch, writerBatch))
		}
		return w
	}
	small, big := grown(100_000), grown(1_000_000)
	cpu := func(w *writerBench) time.Duration {
		if w.conn != "" {
			return w.connCPU()
		}
		return cpuTime()
	}
	var rates, costs []float64
	for r := range rounds {
		var took, spent [2]time.Duration
		for k := range 2 {
			i := (k + r) % 2
			w := []*writerBench{small, big}[i]
			work := w.batches(batches, writerBatch)
			start, c := time.Now(), cpu(w)
			persistAll(b, w.st, work)
			took[i], spent[i] = time.Since(start), cpu(w)-c
		}
		rates = append(rates, took[0].Seconds()/took[1].Seconds())
		costs = append(costs, spent[1].Seconds()/spent[0].Seconds())
	}
	b.ReportMetric(median(rates), "rate-1M/100k")
	b.ReportMetric(median(costs), "cpu-1M/100k")
	b.Logf("%s: per round, rate 1M/100k %s; cpu per order 1M/100k %s", d.name, joinFloats(rates, 2), joinFloats(costs, 2))
}

// joinFloats formats x with prec decimals for a log line.
func joinFloats(x []float64, prec int) string {
	parts := make([]string, len(x))
	for i, v := range x {
		parts[i] = strconv.FormatFloat(v, 'f', prec, 64)
	}
	return strings.Join(parts, " ")
}

// writerBench is a migrated database of one dialect with one sale of
// unlimited stock and the order store that persists it.
type writerBench struct {
	st      *OrderStore
	sale    string
	process string
	conn    string // the /proc stat file of the server's side of the connection
	next    int
	// scatter names the buyers by a hash of their number (batches).
	scatter bool
}

func newWriterBench(b *testing.B, d testDialect) *writerBench {
	db, err := Open(b.Context(), d.url(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	s := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 100, Stock: seckill.MaxSaleStock, PurchaseLimit: 1,
		StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
	if err := NewSaleStore(db).CreateSale(b.Context(), s); err != nil {
		b.Fatal(err)
	}
	w := &writerBench{st: NewOrderStore(db), sale: s.ID, process: dbProcess[d.name]}
	if w.process != "" {
		db.SetMaxConns(1)
		w.conn = connStat(b, db)
	}
	return w
}

// batches makes n batches of size new reservations, each of a new buyer:
// u0, u1, … or, when w.scatter, u and a hash of that number.
func (w *writerBench) batches(n, size int) [][]seckill.ReservationEvent {
	work := make([][]seckill.ReservationEvent, n)
	for k := range work {
		work[k] = make([]seckill.ReservationEvent, size)
		for j := range work[k] {
			now := time.Now()
			work[k][j] = seckill.ReservationEvent{ReservationID: seckill.NewReservationID(w.sale, now),
				SaleID: w.sale, UserID: w.buyer(w.next), Qty: 1, ReservedAt: now}
			w.next++
		}
	}
	return work
}

// buyer is the id of the writer bench's n-th buyer (batches).
func (w *writerBench) buyer(n int) string {
	if !w.scatter {
		return "u" + strconv.Itoa(n)
	}
	h := fnv.New64a()
	h.Write([]byte(strconv.Itoa(n)))
	return "u" + strconv.FormatUint(h.Sum64(), 36)
}

// connStat is the /proc stat file of the server thread (MariaDB) or
// process (PostgreSQL) serving db's one connection; "" when the server
// does not run on this machine.
func connStat(b *testing.B, db *DB) string {
	var id int64
	if db.dialect == postgresDialect {
		if err := db.write.QueryRowContext(b.Context(), `SELECT pg_backend_pid()`).Scan(&id); err != nil {
			b.Fatal(err)
		}
		return fmt.Sprintf("/proc/%d/stat", id)
	}
	if err := db.write.QueryRowContext(b.Context(), `SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()`).Scan(&id); err != nil {
		b.Fatal(err)
	}
	pids, _ := filepath.Glob(fmt.Sprintf("/proc/[0-9]*/task/%d/stat", id))
	if len(pids) != 1 {
		return ""
	}
	return pids[0]
}

// connCPU is the CPU time of the server's side of the connection.
func (w *writerBench) connCPU() time.Duration {
	if w.conn == "" {
		return 0
	}
	return statCPU(w.conn)
}

// connWait is the time the server's side of the connection has spent
// runnable but waiting for a core (the second field of its
// /proc/…/schedstat; 0 when unknown).
func (w *writerBench) connWait() time.Duration {
	if w.conn == "" {
		return 0
	}
	raw, err := os.ReadFile(strings.TrimSuffix(w.conn, "stat") + "schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) < 2 {
		return 0
	}
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	return time.Duration(ns)
}

// serverCPU is the CPU time of the database server's processes (0 for
// SQLite, or a server not on this machine).
func (w *writerBench) serverCPU() time.Duration {
	if w.process == "" {
		return 0
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		if open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')'); open >= 0 && end > open && s[open+1:end] == w.process {
			ticks += statTicks(s)
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// statCPU is the CPU time in a /proc stat file (0 once it is gone).
func statCPU(path string) time.Duration {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return time.Duration(statTicks(string(raw))) * time.Second / 100 // USER_HZ
}

// statTicks is utime + stime of a /proc stat line: after the name (which
// may hold spaces), state, then fields 4…; utime and stime are fields 14
// and 15.
func statTicks(s string) int64 {
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}
