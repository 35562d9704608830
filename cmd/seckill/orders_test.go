package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/orderexport"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// seedOrders creates sale (n units at 100 cents) in the database at url
// and n orders of it, one unit each, written as the order writer writes
// them.
func seedOrders(t testing.TB, url, sale string, n int) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := &seckill.Sale{ID: sale, Name: sale, PriceCents: 100, Currency: "EUR", Stock: int64(n), PurchaseLimit: 1,
		StartAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour)}
	if err := sqlstore.NewSaleStore(db).CreateSale(ctx, s); err != nil {
		t.Fatal(err)
	}
	st := sqlstore.NewOrderStore(db)
	const batch = 500
	for i := 0; i < n; i += batch {
		evs := make([]seckill.ReservationEvent, 0, batch)
		for j := i; j < min(n, i+batch); j++ {
			evs = append(evs, seckill.ReservationEvent{ReservationID: seckill.NewReservationID(sale, now),
				SaleID: sale, UserID: fmt.Sprintf("buyer-%07d", j), Qty: 1, ReservedAt: now})
		}
		if _, err := st.PersistReservations(ctx, sale, evs, now, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
}

// exportPeakHeap runs `seckill orders export` and returns what it wrote
// and the most heap in use while it ran (sampled, with the collector
// running after every 5 % of growth, so that the heap in use is about
// what is live).
func exportPeakHeap(t *testing.T, args ...string) (out *bytes.Buffer, peak uint64) {
	t.Helper()
	old := debug.SetGCPercent(5)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var (
		max  atomic.Uint64
		stop = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > max.Load() {
				max.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	// The output is counted, not kept: keeping it would be the memory
	// that grows.
	var count countingWriter
	var stderr bytes.Buffer
	code := run(context.Background(), append([]string{"orders", "export"}, args...), &count, &stderr)
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("orders export %v: exit %d: %s", args, code, stderr.String())
	}
	return &count.head, max.Load()
}

// countingWriter counts what is written and keeps its first 4 KB.
type countingWriter struct {
	n    int64
	head bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := 4096 - c.head.Len(); room > 0 {
		c.head.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// TestOrdersExportFlatMemory: `seckill orders export` holds a page at a
// time on every dialect: exporting five times the orders takes about the
// same peak heap, where an export that kept its orders would take five
// times as much.
func TestOrdersExportFlatMemory(t *testing.T) {
	const small, large = 3000, 15000
	for _, d := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", sqltest.SQLite}, {"mysql", sqltest.MySQL}, {"postgres", sqltest.Postgres}} {
		t.Run(d.name, func(t *testing.T) {
			url := d.url(t)
			seedOrders(t, url, "few", small)
			seedOrders(t, url, "many", large)
			var peaks [2]uint64
			for i, c := range []struct {
				sale string
				n    int
			}{{"few", small}, {"many", large}} {
				for _, format := range []string{"csv", "jsonl"} {
					head, peak := exportPeakHeap(t, "--sale", c.sale, "--format", format, "--database-url", url)
					if !strings.Contains(head.String(), `"sale_id":"`+c.sale) && !strings.Contains(head.String(), ","+c.sale+",") {
						t.Fatalf("%s export of %s starts %q", format, c.sale, head.String()[:min(200, head.Len())])
					}
					peaks[i] = max(peaks[i], peak)
				}
			}
			t.Logf("peak heap: %d orders %.1f MB, %d orders %.1f MB (ratio %.2f)",
				small, float64(peaks[0])/1e6, large, float64(peaks[1])/1e6, float64(peaks[1])/float64(peaks[0]))
			// Kept orders would add ~550 B each: 6.6 MB more for the
			// 12,000 more. Flat stays within one page's worth.
			if grew := int64(peaks[1]) - int64(peaks[0]); grew > 2<<20 {
				t.Fatalf("the peak heap grew %.1f MB for %d more orders: the export keeps what it wrote", float64(grew)/1e6, large-small)
			}
		})
	}
}

// TestOrdersExport: every order once, as CSV and as JSON Lines, with the
// sale's currency; a status filter; bad flags are usage errors.
func TestOrdersExport(t *testing.T) {
	url := sqltest.SQLite(t)
	seedOrders(t, url, "tea", 2345)
	exp := func(args ...string) (string, int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"orders", "export", "--database-url", url}, args...), &out, &errb)
		return out.String(), code, errb.String()
	}
	out, code, stderr := exp("--sale", "tea", "--format", "csv")
	if code != 0 {
		t.Fatalf("csv: exit %d: %s", code, stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2346 || strings.Join(recs[0], ",") != strings.Join(orderexport.Header, ",") {
		t.Fatalf("csv: %d records, header %v", len(recs), recs[0])
	}
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		if seen[r[1]] || r[2] != "tea" || r[4] != "1" || r[5] != "100" || r[6] != "EUR" || r[7] != "ordered" {
			t.Fatalf("csv row %v (seen %v)", r, seen[r[1]])
		}
		seen[r[1]] = true
	}
	if !strings.Contains(stderr, "exported 2345 orders") {
		t.Fatalf("stderr %q", stderr)
	}

	out, code, stderr = exp("--sale", "tea", "--format", "jsonl", "--status", "ordered")
	if code != 0 {
		t.Fatalf("jsonl: exit %d: %s", code, stderr)
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row orderexport.Row
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil || !seen[row.ReservationID] || row.OrderID != seckill.OrderIDOf(row.ReservationID) || row.Currency != "EUR" {
			t.Fatalf("jsonl line %q: %+v, %v", sc.Text(), row, err)
		}
		lines++
	}
	if lines != 2345 {
		t.Fatalf("jsonl: %d lines", lines)
	}
	if out, code, _ = exp("--sale", "tea", "--status", "paid"); code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("paid only: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"--sale", "tea", "--format", "xml"}, {"--format", "csv"}, {"--sale", "tea", "--status", "gone"}} {
		if _, code, _ := exp(args...); code != 1 {
			t.Errorf("%v: exit %d, want 1 (usage)", args, code)
		}
	}
	if _, code, stderr := exp("--sale", "nosuch"); code != 1 || !strings.Contains(stderr, "no sale nosuch") {
		t.Errorf("unknown sale: exit %d, %q", code, stderr)
	}
}

// BenchmarkOrdersExport: the cost of an exported order (SQLite, CSV and
// JSON Lines), per order.
func BenchmarkOrdersExport(b *testing.B) {
	url := sqltest.SQLite(b)
	const n = 10000
	seedOrders(b, url, "tea", n)
	for _, format := range []string{"csv", "jsonl"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out countingWriter
				if code := run(context.Background(), []string{"orders", "export", "--database-url", url, "--sale", "tea", "--format", format}, &out, io.Discard); code != 0 {
					b.Fatalf("exit %d", code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/order")
		})
	}
}

// TestSaleOrdersAPI: GET /admin/v1/sales/{id}/orders pages a sale's
// orders by key until next is null, filters by status, and refuses what
// it should.
func TestSaleOrdersAPI(t *testing.T) {
	e := startEngine(t, func(c *Config) { c.ServiceToken = testServiceToken })
	sale := e.liveSale(20, 1)
	claims := map[string]string{}
	for i := range 7 {
		tok := e.token(fmt.Sprint("lister-", i))
		r := e.reserve(sale, tok, 1, "")
		if r.status != 202 {
			t.Fatalf("reserve: %d %v", r.status, r.body)
		}
		claims[r.body["reservation_id"].(string)] = tok
	}
	e.awaitOrders(claims, time.Minute)
	var paid string
	for id := range claims {
		paid = id
		break
	}
	body := paymentBody("evt_list", seckill.PaymentSucceeded, paid, 9900, "EUR")
	if r := e.do("POST", "/admin/v1/orders/"+seckill.OrderIDOf(paid)+"/payments", testServiceToken, body); r.status != 200 {
		t.Fatalf("pay: %d %v", r.status, r.body)
	}

	list := func(query string) (ids []string, statuses []string) {
		for next := ""; ; {
			q := query
			if next != "" {
				q += "&cursor=" + next
			}
			r := e.admin("GET", "/admin/v1/sales/"+sale+"/orders?"+q, nil)
			if r.status != 200 {
				t.Fatalf("list %s: %d %v", q, r.status, r.body)
			}
			for _, o := range r.body["orders"].([]any) {
				m := o.(map[string]any)
				if m["sale_id"] != sale || m["currency"] != "EUR" || m["amount_cents"] != 9900.0 {
					t.Fatalf("order %v", m)
				}
				ids = append(ids, m["reservation_id"].(string))
				statuses = append(statuses, m["status"].(string))
			}
			n, ok := r.body["next"]
			if !ok {
				t.Fatalf("no next in %v", r.body)
			}
			if n == nil {
				return ids, statuses
			}
			next = n.(string)
		}
	}
	ids, _ := list("limit=2")
	if len(ids) != 7 {
		t.Fatalf("%d orders listed, want 7: %v", len(ids), ids)
	}
	for i, id := range ids {
		if claims[id] == "" || (i > 0 && ids[i-1] >= id) {
			t.Fatalf("list not every claim once in key order: %v", ids)
		}
	}
	if ids, st := list("status=paid"); len(ids) != 1 || ids[0] != paid || st[0] != "paid" {
		t.Fatalf("paid: %v %v", ids, st)
	}
	for q, want := range map[string]int{
		"limit=0": 400, "limit=1001": 400, "status=lost": 400, "cursor=bm9wZQ": 400, "cursor=": 400,
	} {
		if r := e.admin("GET", "/admin/v1/sales/"+sale+"/orders?"+q, nil); r.status != want {
			t.Errorf("%s: %d %v, want %d", q, r.status, r.body, want)
		}
	}
	if r := e.admin("GET", "/admin/v1/sales/nosuch/orders", nil); r.status != 404 {
		t.Errorf("unknown sale: %d", r.status)
	}
	if r := e.do("GET", "/admin/v1/sales/"+sale+"/orders", testServiceToken, nil); r.status != 401 {
		t.Errorf("with the service token: %d", r.status)
	}
}
