package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/archive"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/guarded"
	"github.com/seckill-dev/seckill/internal/handoff"
	"github.com/seckill-dev/seckill/internal/heal"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/lostclaim"
	"github.com/seckill-dev/seckill/internal/metrics"
	"github.com/seckill-dev/seckill/internal/nats"
	"github.com/seckill-dev/seckill/internal/orderwriter"
	"github.com/seckill-dev/seckill/internal/paytimeout"
	"github.com/seckill-dev/seckill/internal/preheat"
	"github.com/seckill-dev/seckill/internal/rabbitmq"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/relay"
	"github.com/seckill-dev/seckill/internal/restore"
	"github.com/seckill-dev/seckill/internal/saleadmin"
	"github.com/seckill-dev/seckill/internal/soldout"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/ttlcache"
	"github.com/seckill-dev/seckill/internal/web"
)

// Config is everything serve needs to know. Each field has a flag and an
// SECKILL_* environment variable (see Config.register).
type Config struct {
	HTTPAddr              string
	RedisURL              string // empty: embedded in-process server
	RedisKeyPrefix        string // prefix of every key seckill writes
	DatabaseURL           string // empty: SQLite under DataDir
	BrokerURL             string // amqp://, nats://; empty: NATS JetStream in-process
	BrokerQueue           string // queue (RabbitMQ) or stream (NATS) name
	Namespace             string // the deployment's name on the broker
	DataDir               string
	JWTSecret             string // empty: generated and kept in DataDir
	AdminToken            string // empty: generated and kept in DataDir
	PreheatLead           time.Duration
	PreheatInterval       time.Duration
	MaxBatch              int
	PayTimeout            time.Duration
	SweepInterval         time.Duration
	OrderWriters          int
	OrderBatch            int
	RelayClaimIdle        time.Duration
	BrokerAckWait         time.Duration // how soon a dead consumer's deliveries go to another
	BrokerBacklogInterval time.Duration // how often the broker's backlog is sampled for /metrics
	RestoreRetryInterval  time.Duration
	RestoreAlertAfter     time.Duration
	RateLimitIP           string // "20/1m", "5/1s" or "off"
	RateLimitUser         string
	TrustedProxies        string // comma-separated IPs/CIDRs
	MaxInFlight           int
	SoldOutInterval       time.Duration
	DemoLogin             string // on or off; only `seckill demo` defaults to on
	ReconcileInterval     time.Duration
	ArchiveAfter          time.Duration
	ArchiveInterval       time.Duration
	ShutdownTimeout       time.Duration
	RequestBudget         time.Duration // every request's backend calls end by then
	RouteBudgets          string        // "reserve=1s,reconciliation=2m"
	LogLevel              string
	Currency              string // ISO 4217 code of sales created without one
	// Claims that survive Redis losing writes (durability.go).
	LostClaimAfter   time.Duration
	RedisDurability  string // none, fsync, replicas:N
	RedisConfigCheck string // on, off (fsync: trust the operator where CONFIG is refused)
	RedisWaitTimeout time.Duration
	HealInterval     time.Duration
	Roles            string // comma-separated: api, relay, writer; "all" or empty: every one
}

// Takeover defaults: a killed node's outbox entries and broker deliveries
// reach another node's relay and writer within about 1.5 × the claim idle
// and the ack wait (the multi-node test asserts under 10 s on both brokers).
// Both must stay well above a slow publish or batch, or live nodes redo
// each other's work (harmless: the writer deduplicates, and a slow batch
// reports progress every third of the ack wait).
const (
	DefaultRelayClaimIdle = 3 * time.Second
	DefaultBrokerAckWait  = 5 * time.Second
)

// DefaultConfig is the embedded default: no services needed.
func DefaultConfig() Config {
	return Config{
		HTTPAddr:              "127.0.0.1:8080",
		DataDir:               "./seckill-data",
		RedisKeyPrefix:        redis.DefaultKeyPrefix,
		PreheatLead:           10 * time.Minute,
		PreheatInterval:       5 * time.Second,
		MaxBatch:              256,
		BrokerQueue:           "seckill_reservations",
		Namespace:             "default",
		PayTimeout:            15 * time.Minute,
		SweepInterval:         5 * time.Second,
		OrderWriters:          2,
		OrderBatch:            500,
		RelayClaimIdle:        DefaultRelayClaimIdle,
		BrokerAckWait:         DefaultBrokerAckWait,
		BrokerBacklogInterval: 5 * time.Second,
		RestoreRetryInterval:  5 * time.Second,
		RestoreAlertAfter:     time.Hour,
		RateLimitIP:           httpapi.DefaultRateLimitIP.String(),
		RateLimitUser:         httpapi.DefaultRateLimitUser.String(),
		MaxInFlight:           httpapi.DefaultMaxInFlight,
		SoldOutInterval:       soldout.DefaultSafetyInterval,
		DemoLogin:             "off",
		ReconcileInterval:     30 * time.Second,
		ArchiveAfter:          archive.DefaultAfter,
		ArchiveInterval:       archive.DefaultInterval,
		ShutdownTimeout:       30 * time.Second,
		RequestBudget:         httpapi.DefaultBudget,
		LogLevel:              "info",
		Currency:              "EUR",
		LostClaimAfter:        lostclaim.DefaultAfter,
		RedisDurability:       redis.DurabilityNone,
		RedisConfigCheck:      "on",
		RedisWaitTimeout:      redis.DefaultWaitTimeout,
		HealInterval:          time.Second,
		Roles:                 "all",
	}
}

func (c *Config) register(fs *flag.FlagSet) error {
	stringFlag(fs, &c.HTTPAddr, "http-addr", c.HTTPAddr, "address to listen on")
	stringFlag(fs, &c.RedisURL, "redis-url", c.RedisURL, "Redis URL (redis://, rediss://; Cluster is detected); empty runs an in-process Redis-compatible server")
	stringFlag(fs, &c.RedisKeyPrefix, "redis-key-prefix", c.RedisKeyPrefix, "prefix of every Redis key and channel (several deployments can share one Redis)")
	stringFlag(fs, &c.DatabaseURL, "database-url", c.DatabaseURL, "database URL (mysql://, postgres://, sqlite:PATH); empty uses SQLite in the data dir")
	stringFlag(fs, &c.BrokerURL, "broker-url", c.BrokerURL, "message broker URL (amqp:// for RabbitMQ, nats:// for NATS JetStream); empty runs NATS JetStream in-process")
	stringFlag(fs, &c.BrokerQueue, "broker-queue", c.BrokerQueue, "RabbitMQ queue or NATS JetStream stream carrying reservations")
	stringFlag(fs, &c.Namespace, "namespace", c.Namespace, "this deployment's name, carried by every broker message; a writer leaves other namespaces' messages alone")
	stringFlag(fs, &c.DataDir, "data-dir", c.DataDir, "directory for the embedded database and generated secrets")
	stringFlag(fs, &c.JWTSecret, "jwt-secret", c.JWTSecret, "HS256 secret for buyer tokens; empty generates one in the data dir")
	stringFlag(fs, &c.AdminToken, "admin-token", c.AdminToken, "bearer token for /admin; empty generates one in the data dir")
	stringFlag(fs, &c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	stringFlag(fs, &c.RateLimitIP, "rate-limit-ip", c.RateLimitIP, "reservation requests per client IP (IPv6: per /64): 20/1m, 5/1s or off")
	stringFlag(fs, &c.RateLimitUser, "rate-limit-user", c.RateLimitUser, "reservation requests per buyer: 10/1m, 5/1s or off")
	stringFlag(fs, &c.DemoLogin, "demo-login", c.DemoLogin, "let the buyer page mint a token for any name (anyone can act as any buyer): on or off; on only for demos")
	stringFlag(fs, &c.Currency, "currency", c.Currency, "ISO 4217 currency of sales created without one (and of older sales that have none)")
	stringFlag(fs, &c.RedisDurability, "redis-durability", c.RedisDurability, "what a claim waits for before the buyer hears \"claimed\": none (Redis ran the script), fsync (Redis must run appendonly yes + appendfsync always, checked at start) or replicas:N (one WAIT N per batch)")
	stringFlag(fs, &c.RedisConfigCheck, "redis-config-check", c.RedisConfigCheck, "on: fsync durability checks Redis's settings with CONFIG GET; off: trust the operator where CONFIG is refused")
	stringFlag(fs, &c.Roles, "roles", c.Roles, "what this process runs: all, or a comma-separated list of api (buyer and admin HTTP API), relay (outbox to broker), writer (broker to database)")
	stringFlag(fs, &c.TrustedProxies, "trusted-proxies", c.TrustedProxies, "comma-separated IPs/CIDRs whose X-Forwarded-For is believed")
	stringFlag(fs, &c.RouteBudgets, "route-budgets", c.RouteBudgets, "per-route request budgets overriding --request-budget, e.g. reserve=1s,reconciliation=5m (reconciliation defaults to 2m; routes: "+strings.Join(httpapi.RouteNames(), ", ")+")")
	for _, err := range []error{
		durationFlag(fs, &c.PreheatLead, "preheat-lead", c.PreheatLead, "preheat a sale this long before it starts"),
		durationFlag(fs, &c.PreheatInterval, "preheat-interval", c.PreheatInterval, "how often to look for sales to preheat and re-read the rows of those loaded"),
		intFlag(fs, &c.MaxBatch, "max-batch", c.MaxBatch, "most reservation requests in one Redis script call"),
		durationFlag(fs, &c.PayTimeout, "pay-timeout", c.PayTimeout, "an order unpaid this long is cancelled"),
		durationFlag(fs, &c.SweepInterval, "sweep-interval", c.SweepInterval, "how often to look for unpaid orders past their deadline"),
		intFlag(fs, &c.OrderWriters, "order-writers", c.OrderWriters, "concurrent order-writer consumers in this process"),
		intFlag(fs, &c.OrderBatch, "order-batch", c.OrderBatch, "most reservations an order-writer consumer takes at once (a sale's batches that wait meanwhile join one transaction)"),
		intFlag(fs, &c.MaxInFlight, "max-inflight", c.MaxInFlight, "reservation requests in flight on this node; beyond it 503 overloaded; negative: no cap"),
		durationFlag(fs, &c.ReconcileInterval, "reconcile-interval", c.ReconcileInterval, "how often live sales are reconciled for the seckill_reconcile_* gauges"),
		durationFlag(fs, &c.ArchiveAfter, "archive-after", c.ArchiveAfter, "how long past its end a settled sale keeps its Redis keys (its idempotency keys go at the end)"),
		durationFlag(fs, &c.ArchiveInterval, "archive-interval", c.ArchiveInterval, "how often ended sales are checked for archiving"),
		durationFlag(fs, &c.SoldOutInterval, "soldout-interval", c.SoldOutInterval, "how long this node answers sold_out locally before asking Redis again"),
		durationFlag(fs, &c.RestoreRetryInterval, "restore-retry-interval", c.RestoreRetryInterval, "how often unfinished restores are retried"),
		durationFlag(fs, &c.RestoreAlertAfter, "restore-alert-after", c.RestoreAlertAfter, "a restore still waiting for its order this long raises an alert"),
		durationFlag(fs, &c.RelayClaimIdle, "relay-claim-idle", c.RelayClaimIdle, "outbox entries another relay has held unacknowledged this long are taken over (checked every half of it)"),
		durationFlag(fs, &c.BrokerAckWait, "broker-ack-wait", c.BrokerAckWait, "a delivery its consumer went silent on goes to another after this long (NATS AckWait; RabbitMQ heartbeat of half of it)"),
		durationFlag(fs, &c.BrokerBacklogInterval, "broker-backlog-interval", c.BrokerBacklogInterval, "how often the broker's queue depth is sampled for seckill_broker_backlog_messages and the control room"),
		durationFlag(fs, &c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long a graceful shutdown may take"),
		durationFlag(fs, &c.RedisWaitTimeout, "redis-wait-timeout", c.RedisWaitTimeout, "replicas:N durability: how long one batch's WAIT may take before its buyers get 503 try_later"),
		durationFlag(fs, &c.HealInterval, "heal-interval", c.HealInterval, "how often live sales are checked for writes Redis lost (and healed from the database)"),
		durationFlag(fs, &c.LostClaimAfter, "lost-claim-after", c.LostClaimAfter, "a claim Redis forgot that has not reached the database this long after it was made reads failed (lost_in_stock_store), alerted"),
		durationFlag(fs, &c.RequestBudget, "request-budget", c.RequestBudget, "every request's backend calls end after this; a backend slower than that (or down) is answered 503 unavailable + Retry-After"),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// roles is what one process runs. Housekeeping (preheat, restore retries,
// the payment-timeout sweeper, reconciliation gauges) and /metrics,
// /healthz, /readyz run in every process: each is safe on many nodes.
type roles struct{ api, relay, writer bool }

func (c *Config) roles() (roles, error) {
	if c.Roles == "" || c.Roles == "all" {
		return roles{true, true, true}, nil
	}
	var r roles
	for _, name := range strings.Split(c.Roles, ",") {
		switch strings.TrimSpace(name) {
		case "api":
			r.api = true
		case "relay":
			r.relay = true
		case "writer":
			r.writer = true
		default:
			return r, fmt.Errorf("role %q: want all, or a list of api, relay, writer", name)
		}
	}
	return r, nil
}

// demoLogin reports whether the buyer page may mint tokens from a name.
// It is off unless asked for: whoever reaches POST /demo/v1/login can act
// as any buyer (read, pay and cancel their reservations), even on the
// embedded default, which may serve small real sales. `seckill demo`
// turns it on.
func (c *Config) demoLogin() (bool, error) {
	switch c.DemoLogin {
	case "on":
		return true, nil
	case "off", "":
		return false, nil
	}
	return false, fmt.Errorf("demo login %q: want on or off", c.DemoLogin)
}

// databaseURL is the configured URL, or SQLite in the data dir.
func (c *Config) databaseURL() string {
	if c.DatabaseURL != "" {
		return c.DatabaseURL
	}
	return "sqlite:" + filepath.Join(c.DataDir, "seckill.db")
}

// Main is one running engine. Run starts it; Close stops it in the reverse
// order of starting: stop accepting HTTP, drain the combiner, stop the
// background workers, close the clients.
type Main struct {
	Config Config
	Stdout io.Writer // the startup banner
	Logger *slog.Logger

	db       *sqlstore.DB
	stock    *redis.Store
	orders   *sqlstore.OrderStore
	broker   seckill.Broker
	restorer *restore.Service
	gate     *soldout.Gate
	combiner *combiner.Combiner
	preheat  *preheat.Scheduler
	server   *http.Server
	listener net.Listener
	served   chan error
	closers  []func(context.Context) error // in the order they must run

	// now is the engine's clock (orders' pay-by, timeouts, restore
	// alerts); tests move it. Sale windows use Redis's clock.
	now func() time.Time

	// wrapBroker, if set, wraps the broker as one role ("relay" or
	// "writer") sees it: tests use it to deliver every message twice, or
	// to make the relay die between publish and ack.
	wrapBroker func(role string, b seckill.Broker) seckill.Broker
}

// brokerFor returns the broker as role sees it.
func (m *Main) brokerFor(role string) seckill.Broker {
	if m.wrapBroker != nil {
		return m.wrapBroker(role, m.broker)
	}
	return m.broker
}

// Run opens every backend, starts the workers and begins serving HTTP. It
// returns once the engine is ready; Close stops it.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close(context.Background())
		}
	}()
	cfg := &m.Config
	if m.now == nil {
		m.now = time.Now
	}
	// Bad settings fail before anything is opened.
	ipLimit, _, err := seckill.ParseLimit(cfg.RateLimitIP)
	if err != nil {
		return fmt.Errorf("rate limit per IP: %w", err)
	}
	userLimit, _, err := seckill.ParseLimit(cfg.RateLimitUser)
	if err != nil {
		return fmt.Errorf("rate limit per user: %w", err)
	}
	proxies, err := httpapi.ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("trusted proxies: %w", err)
	}
	if !seckill.ValidCurrency(cfg.Currency) {
		return fmt.Errorf("currency %q: want an ISO 4217 code such as EUR", cfg.Currency)
	}
	role, err := cfg.roles()
	if err != nil {
		return err
	}
	routeBudgets, err := httpapi.ParseRouteBudgets(cfg.RouteBudgets)
	if err != nil {
		return err
	}
	if cfg.RequestBudget <= 0 {
		return fmt.Errorf("request budget %s: want a positive duration", cfg.RequestBudget)
	}
	if cfg.JWTSecret == "" || cfg.AdminToken == "" {
		s, generated, err := loadOrCreateSecrets(cfg.DataDir)
		if err != nil {
			return err
		}
		if cfg.JWTSecret == "" {
			cfg.JWTSecret = s.JWTSecret
		}
		if cfg.AdminToken == "" {
			cfg.AdminToken = s.AdminToken
		}
		// Secrets are shown once, when they are made; later starts name
		// only the file, so they do not end up in every log of the process.
		path := filepath.Join(cfg.DataDir, secretsFile)
		if generated {
			fmt.Fprintf(m.Stdout, "generated secrets in %s (shown once)\n  admin token: %s\n  JWT secret:  %s\n", path, cfg.AdminToken, cfg.JWTSecret)
		} else {
			fmt.Fprintf(m.Stdout, "using the secrets in %s\n", path)
		}
	}

	if m.db, err = sqlstore.Open(ctx, cfg.databaseURL()); err != nil {
		return err
	}
	m.closers = append(m.closers, func(context.Context) error { return m.db.Close() })
	if err := m.db.Migrate(ctx); err != nil {
		return err
	}

	durability, err := redis.ParseDurability(cfg.RedisDurability)
	if err != nil {
		return err
	}
	// A reserve of this process wakes its relay (if it runs one) at once.
	relayWake := make(chan struct{}, 1)
	redisOpts := []redis.Option{redis.WithKeyPrefix(cfg.RedisKeyPrefix), redis.WithOnOutboxAppend(func() {
		select {
		case relayWake <- struct{}{}:
		default: // a wake is pending already
		}
	})}
	if durability.Mode == redis.DurabilityReplicas {
		redisOpts = append(redisOpts, redis.WithWaitReplicas(durability.Replicas, cfg.RedisWaitTimeout))
	}
	if cfg.RedisURL == "" {
		if durability.Mode != redis.DurabilityNone {
			return fmt.Errorf("redis durability %s needs a Redis by URL: the embedded store has no replicas and no AOF (see docs/durability.md)", durability)
		}
		m.stock, err = redis.StartEmbedded(ctx, redisOpts...)
	} else {
		m.stock, err = redis.New(ctx, cfg.RedisURL, redisOpts...)
	}
	if err != nil {
		return err
	}
	m.closers = append(m.closers, func(context.Context) error { m.stock.Close(); return nil })
	if err := checkDurability(ctx, m.stock, durability, cfg.RedisConfigCheck, m.Logger); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pm := metrics.NewPipeline(reg)
	dm := metrics.NewDurability(reg)

	sales := sqlstore.NewSaleStore(m.db)
	redisBreaker, dbBreaker := guarded.NewBreakers(reg)
	reqStock := guarded.Stock{Store: m.stock, B: redisBreaker}
	reqSales := guarded.Sales{SaleStore: sales, B: dbBreaker}
	// An API-only node writes claims to the Redis outbox and never talks
	// to the broker.
	if role.relay || role.writer {
		// The embedded broker is bypassed (handoff) when the relay and the
		// writer share this process and the outbox is in a real Redis,
		// as durable as the claims themselves. Over the in-process
		// store, whose outbox a crash loses, JetStream's files keep
		// what has left the outbox while the writer catches up.
		handOff := role.relay && role.writer && cfg.RedisURL != ""
		if m.broker, err = m.openBroker(ctx, handOff); err != nil {
			return err
		}
	}
	// The broker's queue depth, sampled: every node with a broker reports
	// the same queue, so dashboards take the max.
	var backlog *backlogSampler
	if b, ok := m.broker.(backlogReader); ok && cfg.BrokerBacklogInterval > 0 {
		backlog = newBacklogSampler(b, cfg.BrokerBacklogInterval, m.Logger, m.now)
		reg.MustRegister(backlog)
		backlog.Start(context.WithoutCancel(ctx))
		m.closers = append(m.closers, backlog.Stop)
	}

	// Background workers start in the reverse of their stopping order:
	// the relay drains the outbox into the broker before the writer stops.
	m.preheat = preheat.New(sales, m.stock, preheat.Config{
		Lead: cfg.PreheatLead, Interval: cfg.PreheatInterval, Logger: m.Logger,
	})
	m.preheat.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, m.preheat.Stop)
	reg.MustRegister(metrics.NewStockCollector(m.preheat, m.stock))

	// The combiner and the sold-out flag in front of it exist before the
	// restorer, which clears the flag when stock comes back; they stop
	// with the request path, below.
	// A batch's script call may take as long as a reservation's budget:
	// every request in it is answered by then anyway.
	reserveBudget := cfg.RequestBudget
	if d, ok := routeBudgets["reserve"]; ok {
		reserveBudget = d
	}
	m.combiner = combiner.New(reqStock, combiner.Config{MaxBatch: cfg.MaxBatch, CallTimeout: reserveBudget, OnBatch: func(size int, took time.Duration, err error) {
		pm.ObserveBatch(size, took, err)
		if errors.Is(err, redis.ErrNotDurable) {
			dm.NotDurable.Inc()
		}
	}})
	// Keyed requests on a flagged sale are answered by a lookup of their
	// earlier reservation, batched per sale like reservations are.
	replays := combiner.New(replayLookup{m.stock}, combiner.Config{MaxBatch: cfg.MaxBatch})
	m.gate = soldout.New(m.combiner, soldout.Config{SafetyInterval: cfg.SoldOutInterval, Now: m.now, Replays: replays})

	m.orders = sqlstore.NewOrderStore(m.db)
	m.restorer = restore.New(m.orders, m.stock, restore.Config{
		RetryInterval: cfg.RestoreRetryInterval, AlertAfter: cfg.RestoreAlertAfter,
		Now: m.now, Logger: m.Logger, OnAlert: pm.ObserveRestoreAlert,
		// This node clears its flag at once; the others hear the
		// announcement the restore service publishes.
		OnRestocked: m.gate.Clear,
	})
	m.restorer.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, m.restorer.Stop)

	// Every cancel gives the stock back through the one restore path.
	sweeper := paytimeout.New(m.orders, paytimeout.Config{
		Interval: cfg.SweepInterval, Logger: m.Logger, OnCancelled: pm.ObserveTimeouts, Now: m.now,
		// In batches: one database transaction, one Redis script call
		// and one restock announcement per sale per batch.
		CancelBatch: func(ctx context.Context, orders []*seckill.Order) []error {
			ids := make([]string, len(orders))
			for i, o := range orders {
				ids[i] = o.ReservationID
			}
			errs := make([]error, len(orders))
			for i, out := range m.restorer.RestoreAll(ctx, orders[0].SaleID, ids, paytimeout.Reason) {
				errs[i] = out.Err
				if out.Err == nil && out.Result == seckill.AlreadyRestored {
					errs[i] = paytimeout.ErrAlreadyCancelled
				}
			}
			return errs
		},
	})
	sweeper.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, sweeper.Stop)

	if role.writer {
		writer := orderwriter.New(m.orders, m.brokerFor("writer"), orderwriter.Config{
			PayTimeout: cfg.PayTimeout, Consumers: cfg.OrderWriters, Logger: m.Logger,
			Consume: seckill.ConsumeOptions{BatchSize: cfg.OrderBatch, OnForeign: pm.ObserveForeign},
			Observe: pm.ObservePersisted, OnFailed: pm.ObserveFailed,
			AfterPersist: m.restorer.Kick, Now: m.now,
		})
		writer.Start(context.WithoutCancel(ctx))
		m.closers = append(m.closers, writer.Stop)
	}

	if role.relay {
		rl := relay.New(m.stock, m.brokerFor("relay"), relay.Config{
			Logger: m.Logger, OnPublished: pm.ObserveRelayed, OnReclaimed: pm.ObserveReclaimed, ClaimMinIdle: cfg.RelayClaimIdle,
			// The embedded broker's writer is this binary: events go
			// compact. An external broker may have writers of an older
			// version, which read only JSON.
			CompactEvents: cfg.BrokerURL == "",
			Wake:          relayWake,
		})
		rl.Start(context.WithoutCancel(ctx))
		m.closers = append(m.closers, rl.Stop)
	}

	// Ended sales give their Redis memory back: the idempotency keys at
	// the end, the rest once settled, after ArchiveAfter, if the sale
	// reconciles one last time.
	archiver := archive.New(struct {
		*sqlstore.SaleStore
		*sqlstore.OrderStore
	}{sales, m.orders}, m.stock, archive.Config{
		Interval: cfg.ArchiveInterval, After: cfg.ArchiveAfter, Now: m.now, Logger: m.Logger,
		Final: func(ctx context.Context, saleID string) (string, error) {
			rep, err := reconcile.Reconcile(ctx, saleID, m.orders, m.stock, m.now(), reconcile.Options{})
			if err != nil {
				return "", err
			}
			if !rep.OK() {
				return "", fmt.Errorf("oversold %d, %d unexplained, %d discrepancies", rep.Oversold, rep.Unexplained.Count, len(rep.Discrepancies))
			}
			body, err := json.Marshal(rep)
			return string(body), err
		},
	})
	archiver.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, archiver.Stop)

	// The gauges come from counters: a read costs the same whatever the
	// sale's size. The reservation-by-reservation comparison is on demand.
	gauges := reconcile.NewGaugeWorker(reconcile.GaugeConfig{
		Sales: m.preheat.Loaded, Interval: cfg.ReconcileInterval, Now: m.now, Logger: m.Logger,
		Counts: func(ctx context.Context, saleID string) (reconcile.Counts, error) {
			return saleCounts(ctx, saleID, m.orders, m.stock, m.now())
		},
	})
	reg.MustRegister(gauges)
	gauges.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, gauges.Stop)

	// Claims that Redis lost are noticed and healed from the database.
	healer := heal.New(m.stock, healDB{sales, m.orders}, m.preheat, heal.Config{
		Interval: cfg.HealInterval, Now: m.now, Logger: m.Logger,
		OnHeal: func(string, string, int, int) { dm.Heals.Inc() },
	})
	if cfg.RedisURL == "" {
		// The embedded store starts empty, even after a SIGKILL that
		// left orders in SQLite and claims in the broker's stream: every
		// live sale refuses claims until its first heal (a tick away)
		// rebuilt it from the database (docs/durability.md).
		m.holdEmbeddedSales(ctx, healer, sales, cfg.PreheatLead)
	}
	healer.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, healer.Stop)
	m.closers = append(m.closers, m.combiner.Stop)

	// The sold-out flag answers a sold-out sale without Redis; stock that
	// comes back (a restore on any node) clears it everywhere.
	m.closers = append(m.closers, replays.Stop)
	gate := m.gate
	reg.MustRegister(gate)
	// A sale changed on another node (edit, end, added stock) comes on the
	// same announcement: this node forgets its cached row too, once the
	// API exists.
	var forgetSale atomic.Pointer[func(string)]
	if role.api {
		subCtx, stopSub := context.WithCancel(context.WithoutCancel(ctx))
		subDone := make(chan struct{})
		onRestocked := func(saleID string) {
			gate.Clear(saleID)
			if f := forgetSale.Load(); f != nil {
				(*f)(saleID)
			}
		}
		go func() {
			defer close(subDone)
			if err := m.stock.SubscribeRestocked(subCtx, onRestocked); err != nil {
				m.Logger.Error("restock announcements: subscription ended", "err", err)
			}
		}()
		m.closers = append(m.closers, func(context.Context) error { stopSub(); <-subDone; return nil })
	}

	claimIDs := seckill.NewClaimIDs(claimKey(cfg.JWTSecret))
	lost := lostclaim.New(m.orders, claimIDs, lostclaim.Config{
		After: cfg.LostClaimAfter, Now: m.now, Logger: m.Logger,
		OnLost: func(f *seckill.FailedOrder) { dm.LostClaims.Inc(); pm.ObserveFailed(f) },
	})

	var api *httpapi.Server
	admin, err := saleadmin.New(saleadmin.Config{
		Store: sales, Live: m.stock, Now: m.now, Logger: m.Logger,
		OnChanged: func(s *seckill.Sale) {
			gate.Clear(s.ID)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			m.preheat.SaleChanged(ctx, s)
		},
	})
	if err != nil {
		return err
	}
	api, err = httpapi.New(httpapi.Config{
		Sales:          reqSales,
		Stock:          reqStock,
		Preheater:      m.preheat,
		Reserver:       gate,
		Verifier:       jwt.NewVerifier([]byte(cfg.JWTSecret)),
		AdminToken:     cfg.AdminToken,
		Logger:         m.Logger,
		Registerer:     reg,
		Gatherer:       reg,
		Orders:         guarded.Orders{OrderStore: m.orders, B: dbBreaker},
		Pending:        reqStock,
		ClaimIDs:       claimIDs,
		Lost:           lost,
		Restorer:       m.restorer,
		RateLimiter:    reqStock,
		LimitInReserve: true,
		RateLimitIP:    ipLimit,
		RateLimitUser:  userLimit,
		TrustedProxies: proxies,
		MaxInFlight:    cfg.MaxInFlight,
		Budget:         cfg.RequestBudget,
		RouteBudgets:   routeBudgets,
		Restores:       m.orders,
		Reconcile: func(ctx context.Context, saleID string) (any, error) {
			if err := probeLedgers(ctx, cfg.RequestBudget, saleID, reqSales, reqStock); err != nil {
				return nil, err
			}
			return reconcileSale(ctx, saleID, m.orders, m.stock, m.now(), reconcile.Options{})
		},
		Currency:   cfg.Currency,
		SalesAdmin: admin,
		Resolver:   m.orders,
		PayTimeout: cfg.PayTimeout,
		Now:        m.now,
		Ready:      m.ready,
		OnSaleCreated: func(s *seckill.Sale) {
			// Within the create request's budget: with Redis down the
			// scheduler preheats the sale on a later pass instead.
			ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestBudget/2)
			defer cancel()
			m.preheat.SaleCreated(ctx, s)
		},
	})
	if err != nil {
		return err
	}
	forget := api.ForgetSale
	forgetSale.Store(&forget)
	demoLogin, err := cfg.demoLogin()
	if err != nil {
		return err
	}
	var mint func(string) (string, error)
	if demoLogin {
		m.Logger.Warn("demo login is on: anyone who reaches POST /demo/v1/login can act as any buyer; never use it for a real sale")
		mint = func(name string) (string, error) {
			return jwt.Sign([]byte(cfg.JWTSecret), name, 12*time.Hour, m.now())
		}
	}
	room := &controlRoom{m: m, reg: reg, backlog: backlog, gauges: gauges, recent: ttlcache.New[judged](1, 1000)}
	pages, err := web.New(web.Config{
		Sales: reqSales, Stock: reqStock, Snapshot: room.snapshot, AdminToken: cfg.AdminToken,
		DemoLogin: mint, Now: m.now, Logger: m.Logger, Budget: cfg.RequestBudget, OnDegraded: api.CountDegraded, Currency: cfg.Currency,
	})
	if err != nil {
		return err
	}
	// The pages own their few routes; everything else is the API's. A
	// node without the api role serves only what operators probe.
	root := http.NewServeMux()
	if role.api {
		root.Handle("/", api.Handler())
		pages.Routes(root)
	} else {
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			root.Handle(path, api.Handler())
		}
		body := fmt.Sprintf(`{"error":{"code":"not_found","message":"this node runs the roles %s, not the API"}}`+"\n", strings.ReplaceAll(cfg.Roles, `"`, ""))
		root.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, body)
		})
	}
	front := httpapi.Harden(root)
	if role.api {
		front = api.Front(root) // the reservation route skips both muxes
	}
	m.server = newHTTPServer(front, m.Logger)
	if m.listener, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// The answers net/http writes by itself to unreadable requests get
	// the API's JSON error shape too.
	m.listener = httpapi.JSONErrorListener(m.listener)
	// A live feed never goes idle: Shutdown must end it, not wait for it.
	m.server.RegisterOnShutdown(pages.CloseStreams)
	m.served = make(chan error, 1)
	go func() { m.served <- m.server.Serve(m.listener) }()
	// HTTP stops first: no new claims while the rest drains. Requests
	// still running when the timeout ends have their connections closed,
	// which ends their contexts, so the workers behind them can stop.
	m.closers = append(m.closers, func(ctx context.Context) error {
		err := m.server.Shutdown(ctx)
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = m.server.Close()
		}
		return err
	})

	fmt.Fprintf(m.Stdout, "seckill listening on http://%s (database %s, redis %s, broker %s)\n",
		m.listener.Addr(), redactURL(cfg.databaseURL()), orEmbedded(redactURL(cfg.RedisURL)), orEmbedded(redactURL(cfg.BrokerURL)))
	if role.api {
		fmt.Fprintf(m.Stdout, "  control room: http://%s/admin\n", m.listener.Addr())
	}
	if !role.api || !role.relay || !role.writer {
		fmt.Fprintf(m.Stdout, "  roles: %s\n", cfg.Roles)
	}
	return nil
}

// openBroker connects to the configured broker, or starts NATS JetStream
// in-process with its store under the data dir, behind a handoff
// (internal/handoff) if handOff is set.
func (m *Main) openBroker(ctx context.Context, handOff bool) (seckill.Broker, error) {
	cfg := &m.Config
	switch u := cfg.BrokerURL; {
	case u == "":
		b, shutdown, err := nats.StartEmbedded(ctx, filepath.Join(cfg.DataDir, "nats"), cfg.BrokerQueue, nats.WithLogger(m.Logger), nats.WithNamespace(cfg.Namespace), nats.WithAckWait(cfg.BrokerAckWait))
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, func(context.Context) error { shutdown(); return nil })
		if !handOff {
			return b, nil
		}
		// The relay and the writer share this process: a batch goes from
		// one to the other by hand, and the relay acks its outbox
		// entries once the writer has committed them. JetStream keeps
		// what cannot be settled at once (retries, dead letters, a
		// writer that cannot keep up or is stopping).
		h, err := handoff.New(b, handoff.Config{Logger: m.Logger})
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, func(context.Context) error { return h.Close() })
		return h, nil
	case strings.HasPrefix(u, "amqp://") || strings.HasPrefix(u, "amqps://"):
		b, err := rabbitmq.New(ctx, u, cfg.BrokerQueue, rabbitmq.WithLogger(m.Logger), rabbitmq.WithNamespace(cfg.Namespace), rabbitmq.WithHeartbeat(max(cfg.BrokerAckWait/2, time.Second)))
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, func(context.Context) error { return b.Close() })
		return b, nil
	case strings.HasPrefix(u, "nats://") || strings.HasPrefix(u, "tls://"):
		b, err := nats.New(ctx, u, cfg.BrokerQueue, nats.WithLogger(m.Logger), nats.WithNamespace(cfg.Namespace), nats.WithAckWait(cfg.BrokerAckWait))
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, func(context.Context) error { return b.Close() })
		return b, nil
	default:
		return nil, fmt.Errorf("broker URL %q: want amqp://, amqps://, nats:// or tls://", redactURL(u))
	}
}

// Addr is the address the HTTP server listens on.
func (m *Main) Addr() string { return m.listener.Addr().String() }

// Served returns the HTTP server's exit error once it stops.
func (m *Main) Served() <-chan error { return m.served }

func (m *Main) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := m.db.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if err := m.stock.Ping(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if p, ok := m.broker.(interface{ Ping(context.Context) error }); ok {
		if err := p.Ping(ctx); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	return nil
}

// Close stops everything Run started, last started first. Safe to call
// twice.
func (m *Main) Close(ctx context.Context) error {
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		if err := m.closers[i](ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	m.closers = nil
	return errors.Join(errs...)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := flagSet("serve", stderr)
	if err := cfg.register(fs); err != nil {
		return err
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, cfg.LogLevel)
	if err != nil {
		return err
	}
	m := &Main{Config: cfg, Stdout: stdout, Logger: logger}
	if err := m.Run(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	case err := <-m.Served():
		logger.Error("http server stopped", "err", err)
	}
	return m.shutdown(cfg.ShutdownTimeout)
}

// shutdownGrace is how long after its timeout a shutdown that is still
// stuck is abandoned: the process exits anyway, within the timeout plus a
// second.
const shutdownGrace = 500 * time.Millisecond

// errShutdownStuck is returned when the shutdown did not finish in time.
var errShutdownStuck = errors.New("shutdown did not finish within its timeout; exiting anyway")

// shutdown closes m within timeout. Whatever is still stuck then (a
// handler waiting on a backend that ignores its deadline, a client that
// will not close) is left behind: nothing acknowledged is lost by it, since
// every claim answered 202 is in the Redis outbox already, and unacked
// broker deliveries come back.
func (m *Main) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(ctx) }()
	select {
	case err := <-closed:
		return err
	case <-time.After(timeout + shutdownGrace):
		m.Logger.Error("shutdown stuck", "timeout", timeout)
		return errShutdownStuck
	}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// redactURL hides a password in a URL so it can be printed; a URL that
// does not parse is not printed at all.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed URL)"
	}
	return u.Redacted()
}

func orEmbedded(s string) string {
	if s == "" {
		return "embedded"
	}
	return s
}

// replayLookup gives the Redis idempotency lookup the shape the request
// combiner batches.
type replayLookup struct{ stock *redis.Store }

func (l replayLookup) Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return l.stock.Replays(ctx, saleID, reqs)
}

// newHTTPServer is the engine's HTTP server around h; bench serves its
// baselines with the same settings, so that they are compared alike.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// holdEmbeddedSales holds (see heal.Watcher.Hold) every sale that is live
// or due to be preheated. It never stops the engine from starting: a sale
// it could not hold is healed when its state shows the loss, as with any
// stock store.
func (m *Main) holdEmbeddedSales(ctx context.Context, healer *heal.Watcher, sales *sqlstore.SaleStore, lead time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if lead <= 0 {
		lead = 10 * time.Minute
	}
	now := m.now()
	live, err := sales.SalesStartingBefore(ctx, now.Add(lead), now)
	if err != nil {
		m.Logger.Warn("embedded store: could not list the live sales to hold until healed", "err", err)
		return
	}
	held, err := healer.Hold(ctx, live)
	if err != nil {
		m.Logger.Warn("embedded store: some live sales could not be held until healed", "err", err)
	}
	if held > 0 {
		m.Logger.Info("embedded store: live sales refuse claims until rebuilt from the database", "sales", held)
	}
}
