package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// checkCompare asserts every strategy answered every buyer, and every one
// but the naive one sold exactly the stock.
func checkCompare(t *testing.T, rep *CompareReport, stock, buyers int) {
	t.Helper()
	if len(rep.Rows) != 6 {
		t.Fatalf("%d rows, want the 6 strategies", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Decisions != int64(buyers) || r.Errors != 0 {
			t.Errorf("%s: %d decisions, %d errors; want %d and 0 (%s)", r.Strategy, r.Decisions, r.Errors, buyers, r.Note)
		}
		if r.Strategy == "naive-sql" {
			if r.Sold < int64(stock) || r.Remaining != int64(stock)-r.Sold {
				t.Errorf("naive: sold %d of %d, table holds %d", r.Sold, stock, r.Remaining)
			}
			continue
		}
		if r.Sold != int64(stock) || r.Oversold != 0 || r.Remaining != 0 {
			t.Errorf("%s: sold %d, oversold %d, %d left in the store; want %d, 0, 0", r.Strategy, r.Sold, r.Oversold, r.Remaining, stock)
		}
		if r.PerSec <= 0 || r.Latency.Count != int64(buyers) {
			t.Errorf("%s: %v decisions/s over %d latencies", r.Strategy, r.PerSec, r.Latency.Count)
		}
	}
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
}

// TestCompareEmbedded: the comparison on its defaults (SQLite and an
// in-process Redis), with the table and the chart.
func TestCompareEmbedded(t *testing.T) {
	const stock, buyers = 20, 400
	ctx := context.Background()
	rep, err := Compare(ctx, CompareOptions{Stock: stock, Buyers: buyers, Concurrency: 16, SQLConns: 64}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	checkCompare(t, rep, stock, buyers)
	if !strings.HasPrefix(rep.Database, "sqlite") || !strings.Contains(rep.Redis, "embedded") {
		t.Errorf("defaults: database %q, redis %q", rep.Database, rep.Redis)
	}
	var doc struct {
		XMLName xml.Name `xml:"svg"`
		Rects   []struct {
			Title string `xml:"title"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal([]byte(rep.SVG()), &doc); err != nil {
		t.Fatalf("the chart is not well-formed SVG: %v", err)
	}
	bars := 0
	for _, r := range doc.Rects {
		if r.Title != "" {
			bars++
		}
	}
	if bars != 6 {
		t.Errorf("%d bars in the chart, want 6", bars)
	}

	rep, err = Compare(ctx, CompareOptions{Stock: 5, Buyers: 50, Concurrency: 64, SQLConns: 64, Strategies: []string{"sql-conditional", "seckill"}}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	if s := out.String(); !strings.Contains(s, "sql-conditional") || !strings.Contains(s, "seckill") || strings.Contains(s, "redis-lock") {
		t.Errorf("Strategies: %s", s)
	}
	if _, err := Compare(ctx, CompareOptions{Stock: 5, Buyers: 50, Concurrency: 64, Strategies: []string{"nope"}}, &bytes.Buffer{}); err == nil {
		t.Error("an unknown strategy ran")
	}
}

// TestCompareMariaDB: on MariaDB and the real Redis, the naive row
// oversells when buyers outnumber stock 20 to 1, and no other row does.
// The race is real, so a clean round is possible; three are not. 16
// connections race as well as 64 (30–36 oversold a round), and leave the
// shared server's connections (151 by default) to the other packages'
// tests running beside this one: with 64, three suites at once ran it
// out ("Error 1040: Too many connections").
func TestCompareMariaDB(t *testing.T) {
	const stock, buyers = 50, 1000
	dbURL, redisURL := sqltest.MySQL(t), servicetest.Redis.URL(t)
	for round := range 3 {
		rep, err := Compare(context.Background(), CompareOptions{DatabaseURL: dbURL, RedisURL: redisURL,
			Stock: stock, Buyers: buyers, Concurrency: 64, SQLConns: 16}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		checkCompare(t, rep, stock, buyers)
		if rep.Rows[0].Strategy != "naive-sql" {
			t.Fatalf("first row is %s", rep.Rows[0].Strategy)
		}
		if rep.Rows[0].Oversold > 0 {
			t.Logf("round %d: naive sold %d of %d (oversold %d)", round, rep.Rows[0].Sold, stock, rep.Rows[0].Oversold)
			return
		}
	}
	t.Fatal("the naive strategy never oversold on MariaDB in 3 rounds")
}
