package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/redact"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/strategies"
)

// CompareOptions are the settings of `seckill bench compare`.
type CompareOptions struct {
	RedisURL    string   // Redis of the Redis strategies; empty runs an in-process one
	DatabaseURL string   // database of the SQL strategies; empty uses SQLite in a temporary directory
	Strategies  []string // names to run; empty runs them all
	Stock       int
	Buyers      int
	Concurrency int
	SQLConns    int
}

// CompareRow is one strategy's line of the comparison table.
type CompareRow struct {
	Strategy    string          `json:"strategy"`
	Description string          `json:"description"`
	Store       string          `json:"store"`
	Decisions   int64           `json:"decisions"`
	Errors      int64           `json:"errors"`
	PerSec      float64         `json:"decisions_per_sec"`
	Latency     loadgen.Summary `json:"latency"`
	Sold        int64           `json:"sold"`
	Oversold    int64           `json:"oversold"`
	Remaining   int64           `json:"remaining_in_store"`
	Note        string          `json:"note,omitempty"`
}

// CompareReport is a comparison run.
type CompareReport struct {
	Stock       int          `json:"stock"`
	Buyers      int          `json:"buyers"`
	Concurrency int          `json:"concurrency"`
	Database    string       `json:"database"`
	Redis       string       `json:"redis"`
	Rows        []CompareRow `json:"rows"`
	Notes       []string     `json:"notes,omitempty"`
}

// StrategyNames are the strategies of the comparison, in its order.
func StrategyNames() []string {
	names := make([]string, len(strategies.Kinds))
	for i, k := range strategies.Kinds {
		names[i] = k.Name
	}
	return names
}

// Compare runs the same rush against each strategy, on state of its own,
// writing progress to stderr.
func Compare(ctx context.Context, o CompareOptions, stderr io.Writer) (*CompareReport, error) {
	if o.Stock < 1 || o.Buyers < 1 || o.Concurrency < 1 {
		return nil, errors.New("--stock, --buyers and --concurrency must be at least 1")
	}
	kinds := strategies.Kinds
	if len(o.Strategies) > 0 {
		kinds = nil
		for _, n := range o.Strategies {
			k, ok := strategies.KindByName(strings.TrimSpace(n))
			if !ok {
				return nil, fmt.Errorf("unknown strategy %q (want %s)", n, strings.Join(StrategyNames(), ", "))
			}
			kinds = append(kinds, k)
		}
	}
	needs := map[string]bool{}
	for _, k := range kinds {
		needs[k.Store] = true
	}

	rep := &CompareReport{Stock: o.Stock, Buyers: o.Buyers, Concurrency: o.Concurrency, Database: "none", Redis: "none"}
	var (
		db *strategies.SQL
		rd *strategies.Redis
	)
	if needs["sql"] {
		dbURL := o.DatabaseURL
		if dbURL == "" {
			dir, err := os.MkdirTemp("", "seckill-compare-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			dbURL = "sqlite:" + dir + "/compare.db"
		}
		var err error
		if db, err = strategies.OpenSQL(ctx, dbURL, o.SQLConns); err != nil {
			return nil, err
		}
		defer db.Close()
		rep.Database = db.Dialect() + " " + redact.URL(dbURL)
	}
	if needs["redis"] {
		var err error
		if rd, err = strategies.OpenRedis(ctx, o.RedisURL, strategies.WithEngine(seckillEngine{})); err != nil {
			return nil, err
		}
		defer rd.Close()
		rep.Redis = redact.URLOr(o.RedisURL, "embedded")
		if rd.Embedded() {
			rep.Redis = "embedded (miniredis, in-process)"
		}
	}

	for _, k := range kinds {
		fmt.Fprintf(stderr, "bench compare: %s…\n", k.Name)
		row, err := compareOne(ctx, k, db, rd, o.Stock, o.Buyers, o.Concurrency)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.Name, err)
		}
		if k.Racy && o.Buyers > o.Stock && row.Oversold == 0 {
			row.Note = "no oversell this run"
			if db.Dialect() == "sqlite" {
				row.Note += ": SQLite lets one writer at a time, so the race is only the gap between a buyer's read and write; MariaDB shows it"
				rep.Notes = append(rep.Notes, "The naive strategy did not oversell on SQLite in this run. SQLite serialises writers on the file; the race "+
					"(two buyers reading the same stock before either writes) needs a read to land between another buyer's read and write. Run with "+
					"--database-url mysql://… to see it reliably.")
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// Err is the first row that failed its promise: an error instead of an
// answer, or an oversell by a strategy that must never oversell.
func (rep *CompareReport) Err() error {
	for _, r := range rep.Rows {
		switch k, _ := strategies.KindByName(r.Strategy); {
		case r.Errors > 0:
			return fmt.Errorf("%s: %d buyers got an error instead of an answer", r.Strategy, r.Errors)
		case r.Oversold > 0 && !k.Racy:
			return fmt.Errorf("%s oversold %d units: it must never oversell", r.Strategy, r.Oversold)
		}
	}
	return nil
}

// compareOne runs the rush against one strategy, on state of its own that
// is dropped afterwards.
func compareOne(ctx context.Context, k strategies.Kind, db *strategies.SQL, rd *strategies.Redis, stock, buyers, conc int) (CompareRow, error) {
	s, err := k.Open(ctx, db, rd, int64(stock))
	if err != nil {
		return CompareRow{}, err
	}
	defer s.Close(context.Background())
	var (
		sold     atomic.Int64
		firstErr atomic.Value
	)
	run := randomHex(4)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res, err := loadgen.Run(rctx, loadgen.Options{Workers: conc, Requests: int64(buyers)}, func(ctx context.Context, c loadgen.Call) error {
		ok, err := s.Reserve(ctx, "buyer-"+run+"-"+strconv.FormatInt(c.Seq, 10))
		if err != nil {
			firstErr.CompareAndSwap(nil, err)
			return err
		}
		if ok {
			sold.Add(1)
		}
		return nil
	})
	if err != nil {
		return CompareRow{}, err
	}
	remaining, err := s.Remaining(ctx)
	if err != nil {
		return CompareRow{}, err
	}
	row := CompareRow{
		Strategy: k.Name, Description: k.Description, Store: k.Store,
		Decisions: res.Calls - res.Errors, Errors: res.Errors, PerSec: float64(res.Calls-res.Errors) / res.Elapsed.Seconds(),
		Latency: res.Latency.Summary(), Sold: sold.Load(), Remaining: remaining,
	}
	row.Oversold = max(row.Sold-int64(stock), -remaining, 0)
	if e, ok := firstErr.Load().(error); ok {
		row.Note = "first error: " + e.Error()
	}
	return row, nil
}

// Print writes the comparison table.
func (rep *CompareReport) Print(w io.Writer) {
	fmt.Fprintf(w, "seckill bench compare: %s buyers for %s units, %d at once\n", loadgen.Thousands(int64(rep.Buyers)), loadgen.Thousands(int64(rep.Stock)), rep.Concurrency)
	fmt.Fprintf(w, "  database %s; redis %s\n", rep.Database, rep.Redis)
	fmt.Fprintf(w, "  %-16s %12s %9s %9s %7s %9s  %s\n", "strategy", "decisions/s", "p50", "p99", "sold", "oversold", "how")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %-16s %12s %9s %9s %7s %9s  %s\n", r.Strategy, loadgen.Thousands(int64(r.PerSec)),
			loadgen.FormatDuration(r.Latency.P50), loadgen.FormatDuration(r.Latency.P99), loadgen.Thousands(r.Sold), loadgen.Thousands(r.Oversold), r.Description)
		if r.Note != "" {
			fmt.Fprintf(w, "  %-16s note: %s\n", "", r.Note)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// SVG draws the comparison as a bar chart of decisions per second (log
// scale), with each row's p99 and, in red, what it oversold.
func (rep *CompareReport) SVG() string {
	dialect, _, _ := strings.Cut(rep.Database, " ") // the URL would not fit
	c := Chart{
		Title: fmt.Sprintf("Ways to deduct stock: %s buyers for %s units, %d at once",
			loadgen.Thousands(int64(rep.Buyers)), loadgen.Thousands(int64(rep.Stock)), rep.Concurrency),
		Subtitle: fmt.Sprintf("decisions per second (log scale) · database %s · redis %s", dialect, rep.Redis),
		Legend:   "purple: SQL · blue: Redis · green: seckill · red: oversold",
	}
	for _, r := range rep.Rows {
		bar := Bar{
			Label: r.Strategy, Value: r.PerSec, Color: "#3b82f6", Tooltip: r.Description,
			Text: fmt.Sprintf("%s/s · p99 %s · sold %s", loadgen.Thousands(int64(r.PerSec)), loadgen.FormatDuration(r.Latency.P99), loadgen.Thousands(r.Sold)),
		}
		if r.Store == "sql" {
			bar.Color = "#8b5cf6"
		}
		if r.Strategy == "seckill" {
			bar.Color = "#16a34a"
		}
		if r.Oversold > 0 {
			bar.Color, bar.Alert = "#dc2626", "oversold "+loadgen.Thousands(r.Oversold)
		}
		c.Bars = append(c.Bars, bar)
	}
	return c.SVG()
}

// seckillEngine is seckill's own reserve path for the "seckill" strategy:
// internal/redis's stock store behind internal/combiner, as serve wires
// them.
type seckillEngine struct{}

func (seckillEngine) OpenStock(ctx context.Context, url, keyPrefix string) (strategies.EngineStock, error) {
	store, err := redis.New(ctx, url, redis.WithKeyPrefix(keyPrefix))
	if err != nil {
		return nil, err
	}
	stock := store.StockStore()
	return &combinedStock{StockStore: stock, store: store, comb: combiner.New(stock, combiner.Config{})}, nil
}

type combinedStock struct {
	redis.StockStore
	store *redis.Store
	comb  *combiner.Combiner
}

func (c *combinedStock) ReserveOne(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return c.comb.Reserve(ctx, saleID, req)
}

func (c *combinedStock) Close(ctx context.Context) error {
	err := c.comb.Stop(ctx)
	c.store.Close()
	return err
}
