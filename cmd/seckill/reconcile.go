package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/guarded"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/secrets"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// exitError carries an exit status other than 1; its message, if any, is
// already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// errNotBalanced is reconcile's verdict "oversold or unexplained": exit 3,
// distinct from 1 ("could not check").
var errNotBalanced = exitError{code: 3}

// runReconcile compares a sale's Redis and database ledgers. With a Redis
// URL it reads both stores itself; without one (the embedded default keeps
// Redis inside the serve process) it asks the running server.
func runReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	var (
		saleID, serverURL string
		asJSON            bool
		grace             = reconcile.DefaultInFlightGrace
	)
	fs := flagSet("reconcile", stderr)
	fs.StringVar(&saleID, "sale", "", "sale id (required)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&serverURL, "url", "", "ask this running seckill (default: the one at --http-addr) instead of reading the stores; used when no --redis-url is set")
	stringFlag(fs, &cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "address of the running seckill")
	stringFlag(fs, &cfg.RedisURL, "redis-url", cfg.RedisURL, "Redis URL; empty asks the running seckill")
	stringFlag(fs, &cfg.RedisKeyPrefix, "redis-key-prefix", cfg.RedisKeyPrefix, "prefix of seckill's Redis keys")
	stringFlag(fs, &cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "database URL; empty uses SQLite in the data dir")
	stringFlag(fs, &cfg.DataDir, "data-dir", cfg.DataDir, "data directory (embedded database, generated admin token)")
	stringFlag(fs, &cfg.AdminToken, "admin-token", cfg.AdminToken, "admin token of the running seckill; empty reads the generated one")
	if err := durationFlag(fs, &grace, "in-flight-grace", grace, "a claim younger than this without an order counts as in flight"); err != nil {
		return err
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if !seckill.ValidSaleID(saleID) {
		fmt.Fprintln(stderr, "--sale is required: a sale id")
		return errUsage
	}

	var rep *reconcile.Report
	var err error
	if cfg.RedisURL != "" {
		rep, err = reconcileStores(ctx, &cfg, saleID, grace)
	} else {
		if serverURL == "" {
			serverURL = "http://" + cfg.HTTPAddr
		}
		rep, err = reconcileRemote(ctx, &cfg, serverURL, saleID)
	}
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return errNotBalanced
	}
	return nil
}

func reconcileStores(ctx context.Context, cfg *Config, saleID string, grace time.Duration) (*reconcile.Report, error) {
	db, err := sqlstore.Open(ctx, cfg.databaseURL())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	stock, err := redis.New(ctx, cfg.RedisURL, redis.WithKeyPrefix(cfg.RedisKeyPrefix))
	if err != nil {
		return nil, err
	}
	defer stock.Close()
	return reconcileSale(ctx, saleID, sqlstore.NewOrderStore(db), stock, time.Now(), reconcile.Options{InFlightGrace: grace})
}

// probeLedgers reads the sale's row and its stock, each through its
// backend's breaker and within budget (the request budget), before a full
// comparison starts: the reconciliation route's own budget is long enough
// for a sale of millions, and a backend that is down must get its 503 now,
// not at the end of that budget. A sale the stock store does not hold is
// no failure (not preheated yet, or archived).
func probeLedgers(ctx context.Context, budget time.Duration, saleID string, sales seckill.SaleStore, stock guarded.Stock) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if _, err := sales.Sale(ctx, saleID); err != nil {
		return err
	}
	if _, err := stock.Stock(ctx, saleID); err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return err
	}
	return nil
}

// reconcileSale reconciles a sale; an archived one (whose Redis keys are
// gone) from the database alone. A sale archived before the database
// recorded archives answers the reconciliation it passed when archived.
func reconcileSale(ctx context.Context, saleID string, db seckill.LedgerPages, stock *redis.Store, now time.Time, opts reconcile.Options) (*reconcile.Report, error) {
	rep, err := reconcile.Reconcile(ctx, saleID, db, stock, now, opts)
	if err != nil || rep.StockStore.Loaded || rep.Archived != nil {
		return rep, err
	}
	if summary, ok, err := stock.ArchivedSummary(ctx, saleID); err != nil {
		return nil, err
	} else if ok {
		var old reconcile.Report
		if err := json.Unmarshal([]byte(summary), &old); err != nil {
			return nil, fmt.Errorf("reconcile %s: archived summary: %w", saleID, err)
		}
		return &old, nil
	}
	return rep, nil
}

func reconcileRemote(ctx context.Context, cfg *Config, serverURL, saleID string) (*reconcile.Report, error) {
	if cfg.AdminToken == "" {
		s, _, err := secrets.LoadOrCreate(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		cfg.AdminToken = s.AdminToken
	}
	u := strings.TrimRight(serverURL, "/") + "/admin/v1/sales/" + url.PathEscape(saleID) + "/reconciliation"
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	// Past the route's default budget: the server ends the report first,
	// with its own error.
	client := &http.Client{Timeout: httpapi.ReconciliationBudget + time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask %s (is seckill serve running? or pass --redis-url): %w", serverURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	var rep reconcile.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("decode report: %w", err)
	}
	return &rep, nil
}

// saleCounts reads a sale's reconciliation counters from both stores.
func saleCounts(ctx context.Context, saleID string, db *sqlstore.OrderStore, stock *redis.Store, now time.Time) (reconcile.Counts, error) {
	d, err := db.SaleCounters(ctx, saleID)
	if err != nil {
		return reconcile.Counts{}, err
	}
	r, err := stock.Counters(ctx, saleID)
	if err != nil {
		return reconcile.Counts{}, err
	}
	return reconcile.Counts{
		SaleID: saleID, CheckedAt: now,
		Stock: d.Stock, Unsold: d.Unsold, FailedOrders: d.FailedOrders, FailedUnits: d.FailedUnits,
		RestoresParked: d.Parked, RestoresPending: d.RedisPending, RestoresAlerted: d.Alerted,
		Loaded: r.Loaded, RedisTotal: r.Total, Reserved: r.Reserved, Restored: r.Restored,
		Reservations: r.Records, OutboxLen: r.Outbox,
	}, nil
}
