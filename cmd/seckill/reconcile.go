package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/redis"
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
	if err := writeReport(stdout, asJSON, rep, rep.WriteTable); err != nil {
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
	db.SetMaxConns(cfg.DatabaseMaxConns)
	defer db.Close()
	stock, err := redis.New(ctx, cfg.RedisURL, redis.WithKeyPrefix(cfg.RedisKeyPrefix))
	if err != nil {
		return nil, err
	}
	defer stock.Close()
	return reconcile.Sale(ctx, saleID, sqlstore.NewLedgerStore(db), stock.Ledger(), time.Now(), reconcile.Options{InFlightGrace: grace})
}

func reconcileRemote(ctx context.Context, cfg *Config, serverURL, saleID string) (*reconcile.Report, error) {
	token, err := cfg.adminToken()
	if err != nil {
		return nil, err
	}
	// Past the route's default budget: the server ends the report first,
	// with its own error.
	admin := apiclient.NewAdmin(apiclient.AdminConfig{URL: serverURL, Token: token, Timeout: httpapi.ReconciliationBudget + time.Minute})
	rep, err := admin.Reconciliation(ctx, saleID)
	if err != nil && !apiclient.IsAnswer(err) {
		return nil, fmt.Errorf("ask %s (is seckill serve running? or pass --redis-url): %w", serverURL, err)
	}
	return rep, err
}

// saleCounts reads a sale's reconciliation counters from both stores.
func saleCounts(ctx context.Context, saleID string, db *sqlstore.LedgerStore, stock redis.Ledger, now time.Time) (reconcile.Counts, error) {
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
