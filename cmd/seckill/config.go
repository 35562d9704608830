package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/admitpace"
	"github.com/seckill-dev/seckill/internal/archive"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/lostclaim"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/secrets"
	"github.com/seckill-dev/seckill/internal/soldout"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// Config is everything serve needs to know. Each field has a flag and an
// SECKILL_* environment variable (see Config.register).
type Config struct {
	HTTPAddr              string
	RedisURL              string // empty: embedded in-process server
	RedisKeyPrefix        string // prefix of every key seckill writes
	DatabaseURL           string // empty: SQLite under DataDir
	DatabaseMaxConns      int    // this process's cap on connections to a database server
	BrokerURL             string // amqp://, nats://; empty: NATS JetStream in-process
	BrokerQueue           string // queue (RabbitMQ) or stream (NATS) name
	Namespace             string // the deployment's name on the broker
	DataDir               string
	JWTSecret             string // empty: generated and kept in DataDir
	JWTJWKSURL            string // the identity provider's JWKS; empty: HS256 tokens only
	JWTIssuer             string // pinned iss when set
	JWTAudience           string // pinned aud when set
	JWTMaxLifetime        time.Duration
	AdminToken            string // empty: generated and kept in DataDir
	MetricsToken          string // the scraper's bearer token on /metrics; empty: /metrics is open
	PreheatLead           time.Duration
	PreheatInterval       time.Duration
	MaxBatch              int
	PayTimeout            time.Duration
	SweepInterval         time.Duration
	DrawInterval          time.Duration // how often lottery sales are looked at for their draw and waiting list
	DrawLease             time.Duration // how long a node may work on a draw before another takes over
	DrawBatch             int           // winners reserved in one stock-store call
	DrawPace              time.Duration // pause between two batches of winners
	QueueOpensBefore      time.Duration // how long before a queue sale's start its waiting room opens
	QueuePerIP            int           // places one address may hold in a waiting room (0: no cap)
	QueueAdaptInterval    time.Duration // how often an adaptive queue's rate is adapted
	OrderWriters          int
	OrderBatch            int
	RelayBatch            int           // most reservations the relay publishes at once: one pack (brokerpack.MaxPackEvents)
	RelayLinger           time.Duration // least time between two of the relay's publishes while claims keep coming
	RelayClaimIdle        time.Duration
	BrokerAckWait         time.Duration // how soon a dead consumer's deliveries go to another
	BrokerBacklogInterval time.Duration // how often the broker's backlog is sampled for /metrics
	RestoreRetryInterval  time.Duration
	RestoreAlertAfter     time.Duration
	RateLimitIP           string // "20/1m", "5/1s" or "off"
	RateLimitUser         string
	BadTokenLimitIP       string // tokens with a wrong signature per client IP: "10/1m" or "off"
	BuyerReadLimit        string // a buyer's requests for their own records, per node: "600/1m" or "off"
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
	// Payment confirmed by the shop's side (internal/httpapi payment.go).
	PaymentWebhookSecret string // verifies POST /webhooks/v1/payments; empty: every webhook is 401
	ServiceToken         string // the shop's server on POST /admin/v1/orders/{id}/payments; empty: 401
	PaymentURLTemplate   string // the shop's payment page of an order, e.g. https://shop.example/pay?reservation={id}
	// ShopSignInURL is the shop's page that hands a signed-in buyer back
	// to the buyer page with a token bound to the page's state
	// (internal/web: the handover); empty: a #token= link is taken as is.
	ShopSignInURL string
	// BuyerPay ("on"/"off") lets a buyer pay by saying so
	// (POST /api/v1/reservations/{id}/pay). Only `seckill demo` has the
	// flag: serve never offers it.
	BuyerPay string
	// EmbeddedFsync (on, off): the embedded broker and a SQLite database
	// fsync what they confirm, so that it survives a power cut.
	EmbeddedFsync string
	// Events delivers order events to the shop (orderevents.go).
	Events eventsConfig

	// Bounds on every session to a database server (sqlstore.Bounds), and
	// the deadline of each order-writer call.
	DatabaseStatementTimeout time.Duration
	DatabaseLockTimeout      time.Duration
	DatabaseIdleTxTimeout    time.Duration
	DatabaseKeepAlive        time.Duration
	DatabaseCallTimeout      time.Duration
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

// DefaultRelayLinger is the relay's pause, while claims keep coming,
// between the start of a publish that was not full and the next. Every
// publish costs the same whatever it carries: a broker message, its
// confirm, delivery and ack, the relay's outbox reads, a writer's
// transaction. Lingering lets each carry what some milliseconds bring
// (performance.md, The relay lingers). An order lands up to this much
// later; its buyer polls every 2 s. After an idle spell the first claim
// is published at once, and over the in-process stock store, whose claims
// are answered only once the relay has stored them, it does not linger.
const DefaultRelayLinger = 50 * time.Millisecond

// DefaultDatabaseCallTimeout is the default deadline of one order-writer
// or housekeeping call to the database: a writer's transaction takes
// milliseconds, and one waits at most the lock timeout (3 s) for a row.
const DefaultDatabaseCallTimeout = 5 * time.Second

// writerReleaseAfter is how long an order writer holds a batch while its
// database is out of reach before giving it back for another node
// (orderwriter.Config.ReleaseAfter). With the call timeout, a node cut off
// mid-transaction gives its batch back about 6 s after the cut.
const writerReleaseAfter = 2 * time.Second

// databaseBounds are the bounds set on every database session.
func (c *Config) databaseBounds() sqlstore.Bounds {
	b := sqlstore.DefaultBounds
	b.StatementTimeout = c.DatabaseStatementTimeout
	b.LockTimeout = c.DatabaseLockTimeout
	b.IdleTxTimeout = c.DatabaseIdleTxTimeout
	b.KeepAlive = c.DatabaseKeepAlive
	return b
}

// DefaultConfig is the embedded default: no services needed.
func DefaultConfig() Config {
	return Config{
		HTTPAddr:              "127.0.0.1:8080",
		DataDir:               "./seckill-data",
		JWTMaxLifetime:        24 * time.Hour,
		RedisKeyPrefix:        redis.DefaultKeyPrefix,
		DatabaseMaxConns:      sqlstore.DefaultMaxConns,
		PreheatLead:           10 * time.Minute,
		PreheatInterval:       5 * time.Second,
		MaxBatch:              256,
		BrokerQueue:           "seckill_reservations",
		Namespace:             "default",
		PayTimeout:            15 * time.Minute,
		SweepInterval:         5 * time.Second,
		DrawInterval:          time.Second,
		DrawLease:             30 * time.Second,
		DrawBatch:             256,
		QueueOpensBefore:      15 * time.Minute,
		QueuePerIP:            10,
		QueueAdaptInterval:    admitpace.DefaultInterval,
		OrderWriters:          2,
		OrderBatch:            1000,
		RelayBatch:            1000,
		RelayLinger:           DefaultRelayLinger,
		RelayClaimIdle:        DefaultRelayClaimIdle,
		BrokerAckWait:         DefaultBrokerAckWait,
		BrokerBacklogInterval: 5 * time.Second,
		RestoreRetryInterval:  5 * time.Second,
		RestoreAlertAfter:     time.Hour,
		RateLimitIP:           httpapi.DefaultRateLimitIP.String(),
		RateLimitUser:         httpapi.DefaultRateLimitUser.String(),
		BadTokenLimitIP:       httpapi.DefaultBadSignatureLimit.String(),
		BuyerReadLimit:        httpapi.DefaultBuyerReadLimit.String(),
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
		EmbeddedFsync:         "on",
		Events:                defaultEventsConfig(),

		DatabaseStatementTimeout: sqlstore.DefaultBounds.StatementTimeout,
		DatabaseLockTimeout:      sqlstore.DefaultBounds.LockTimeout,
		DatabaseIdleTxTimeout:    sqlstore.DefaultBounds.IdleTxTimeout,
		DatabaseKeepAlive:        sqlstore.DefaultBounds.KeepAlive,
		DatabaseCallTimeout:      DefaultDatabaseCallTimeout,
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
	stringFlag(fs, &c.JWTJWKSURL, "jwt-jwks-url", c.JWTJWKSURL, "the identity provider's JWKS URL (https): buyer tokens signed RS256, ES256 or EdDSA by its keys are accepted, besides HS256 ones")
	stringFlag(fs, &c.JWTIssuer, "jwt-issuer", c.JWTIssuer, "when set, a buyer token's iss must be exactly this")
	stringFlag(fs, &c.JWTAudience, "jwt-audience", c.JWTAudience, "when set, a buyer token's aud must include this")
	stringFlag(fs, &c.AdminToken, "admin-token", c.AdminToken, "bearer token for /admin; empty generates one in the data dir")
	stringFlag(fs, &c.MetricsToken, "metrics-token", c.MetricsToken, "bearer token (at least 32 bytes, not the admin token) that GET /metrics requires; empty: /metrics answers anyone who reaches the node")
	stringFlag(fs, &c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	stringFlag(fs, &c.RateLimitIP, "rate-limit-ip", c.RateLimitIP, "reservation requests per client IP (IPv6: per /64): 20/1m, 5/1s or off")
	stringFlag(fs, &c.RateLimitUser, "rate-limit-user", c.RateLimitUser, "reservation requests per buyer: 10/1m, 5/1s or off")
	stringFlag(fs, &c.BuyerReadLimit, "buyer-read-limit", c.BuyerReadLimit, "a buyer's requests for their own records (a reservation's status, pay, cancel; reservations/mine, entries/mine, queue/mine), each a database or Redis read, per node, after which they wait (429): 600/1m or off")
	stringFlag(fs, &c.BadTokenLimitIP, "bad-token-limit-ip", c.BadTokenLimitIP, "buyer tokens with a wrong signature per client IP (IPv6: per /64), each a signature check, after which its tokens not seen before wait (429): 10/1m or off")
	stringFlag(fs, &c.DemoLogin, "demo-login", c.DemoLogin, "let the buyer page mint a token for any name (anyone can act as any buyer): on or off; on only for demos")
	stringFlag(fs, &c.Currency, "currency", c.Currency, "ISO 4217 currency of sales created without one (and of older sales that have none)")
	stringFlag(fs, &c.RedisDurability, "redis-durability", c.RedisDurability, "what a claim waits for before the buyer hears \"claimed\": none (Redis ran the script), fsync (Redis must run appendonly yes + appendfsync always, checked at start) or replicas:N (one WAIT N per batch)")
	stringFlag(fs, &c.RedisConfigCheck, "redis-config-check", c.RedisConfigCheck, "on: fsync durability checks Redis's settings with CONFIG GET; off: trust the operator where CONFIG is refused")
	stringFlag(fs, &c.EmbeddedFsync, "embedded-fsync", c.EmbeddedFsync, "on: the embedded broker and a SQLite database fsync every write they confirm, so an answered claim survives a power cut; off: they survive a crash of the process only (faster on slow disks)")
	stringFlag(fs, &c.Roles, "roles", c.Roles, "what this process runs: all, or a comma-separated list of api (buyer and admin HTTP API), relay (outbox to broker), writer (broker to database)")
	stringFlag(fs, &c.TrustedProxies, "trusted-proxies", c.TrustedProxies, "comma-separated IPs/CIDRs whose X-Forwarded-For is believed")
	stringFlag(fs, &c.PaymentWebhookSecret, "payment-webhook-secret", c.PaymentWebhookSecret, "secret (at least 32 bytes) of the payment provider's signed webhook POST /webhooks/v1/payments (Seckill-Signature: t=…,v1=…, Stripe's scheme); empty: the webhook is refused")
	stringFlag(fs, &c.ShopSignInURL, "shop-signin-url", c.ShopSignInURL, "the shop's page that signs a buyer in and sends them back to <return_to>#token=…&state=<state> (both from its query); when set, the buyer page takes a #token= only with the state it sent, so nobody can sign a buyer in as someone else with a link (https://, or http:// to loopback)")
	stringFlag(fs, &c.PaymentURLTemplate, "payment-url-template", c.PaymentURLTemplate, "the shop's payment page of an order, linked from the buyer page: an http(s) URL with {id} (reservation id), {order_id} or {amount_cents}, e.g. https://shop.example/pay?reservation={id}")
	stringFlag(fs, &c.ServiceToken, "service-token", c.ServiceToken, "bearer token (at least 32 bytes, not the admin token) of the shop's server reporting payments on POST /admin/v1/orders/{order_id}/payments; empty: refused")
	stringFlag(fs, &c.RouteBudgets, "route-budgets", c.RouteBudgets, "per-route request budgets overriding --request-budget, e.g. reserve=1s,reconciliation=5m (reconciliation defaults to 2m; routes: "+strings.Join(httpapi.RouteNames(), ", ")+")")
	return errors.Join(
		durationFlag(fs, &c.JWTMaxLifetime, "jwt-max-lifetime", c.JWTMaxLifetime, "buyer tokens whose exp is further than this from their iat, or without iat, are refused; 0: no limit"),
		durationFlag(fs, &c.PreheatLead, "preheat-lead", c.PreheatLead, "preheat a sale this long before it starts"),
		durationFlag(fs, &c.PreheatInterval, "preheat-interval", c.PreheatInterval, "how often to look for sales to preheat and re-read the rows of those loaded"),
		intFlag(fs, &c.DatabaseMaxConns, "database-max-conns", c.DatabaseMaxConns, "most connections this process keeps to a MySQL/MariaDB or PostgreSQL database; every node's together must fit the server's max_connections (ignored on SQLite)"),
		durationFlag(fs, &c.DatabaseStatementTimeout, "database-statement-timeout", c.DatabaseStatementTimeout, "longest one database statement may run (PostgreSQL statement_timeout, MariaDB max_statement_time, MySQL max_execution_time); keep it above the reconciliation budget"),
		durationFlag(fs, &c.DatabaseLockTimeout, "database-lock-timeout", c.DatabaseLockTimeout, "longest one statement waits for a row lock (PostgreSQL lock_timeout, innodb_lock_wait_timeout in whole seconds); a writer that times out tries its batch again"),
		durationFlag(fs, &c.DatabaseIdleTxTimeout, "database-idle-tx-timeout", c.DatabaseIdleTxTimeout, "the server ends a session silent this long inside a transaction, releasing its locks (PostgreSQL idle_in_transaction_session_timeout, MariaDB idle_transaction_timeout, MySQL wait_timeout)"),
		durationFlag(fs, &c.DatabaseKeepAlive, "database-keepalive", c.DatabaseKeepAlive, "TCP keepalive idle time and interval of database connections, both ends (3 probes)"),
		durationFlag(fs, &c.DatabaseCallTimeout, "database-call-timeout", c.DatabaseCallTimeout, "deadline of each order-writer and housekeeping call to the database; a batch whose call times out is tried again from the start"),
		intFlag(fs, &c.MaxBatch, "max-batch", c.MaxBatch, "most reservation requests in one Redis script call"),
		durationFlag(fs, &c.PayTimeout, "pay-timeout", c.PayTimeout, "an order unpaid this long is cancelled"),
		durationFlag(fs, &c.SweepInterval, "sweep-interval", c.SweepInterval, "how often to look for unpaid orders past their deadline"),
		durationFlag(fs, &c.DrawInterval, "draw-interval", c.DrawInterval, "how often lottery sales are looked at: the draw at entries_close_at, then units that come back for the waiting list"),
		durationFlag(fs, &c.DrawLease, "draw-lease", c.DrawLease, "how long one node may work on a lottery's draw before another node takes it over"),
		intFlag(fs, &c.DrawBatch, "draw-batch", c.DrawBatch, "lottery winners reserved in one Redis script call"),
		durationFlag(fs, &c.QueueOpensBefore, "queue-opens-before", c.QueueOpensBefore, "how long before a queue sale's start its waiting room opens (who joins before the start gets a random place)"),
		intFlag(fs, &c.QueuePerIP, "queue-per-ip", c.QueuePerIP, "places one client address may hold in a queue sale's waiting room (0: no cap)"),
		durationFlag(fs, &c.QueueAdaptInterval, "queue-adapt-interval", c.QueueAdaptInterval, "how often an adaptive queue sale's admission rate steps with the ticket holders' claim latency"),
		durationFlag(fs, &c.DrawPace, "draw-pace", c.DrawPace, "pause between two batches of lottery winners, to spread the draw's orders over time (0: none)"),
		intFlag(fs, &c.OrderWriters, "order-writers", c.OrderWriters, "concurrent order-writer consumers in this process"),
		intFlag(fs, &c.OrderBatch, "order-batch", c.OrderBatch, "most reservations an order-writer consumer takes at once (a sale's batches that wait meanwhile join one transaction)"),
		intFlag(fs, &c.RelayBatch, "relay-batch", c.RelayBatch, "most reservations the relay publishes at once (whole outbox entries; one larger entry alone)"),
		durationFlag(fs, &c.RelayLinger, "relay-linger", c.RelayLinger, "while claims keep coming, the least time between the starts of two of the relay's publishes, so that each carries what arrived meanwhile (a claim's order lands up to this much later); 0: publish at once"),
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
		c.Events.register(fs),
	)
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

// databaseURL is the configured URL, or SQLite in the data dir. With
// --embedded-fsync on, SQLite runs synchronous=FULL unless the URL says
// otherwise: a commit (and so the writer's ack of its events) is then on
// disk, not only in the OS's page cache.
func (c *Config) databaseURL() string {
	u := c.DatabaseURL
	if u == "" {
		u = "sqlite:" + filepath.Join(c.DataDir, "seckill.db")
	}
	if c.EmbeddedFsync != "on" || !strings.HasPrefix(u, "sqlite:") || strings.Contains(u, "_synchronous=") {
		return u
	}
	if strings.Contains(u, "?") {
		return u + "&_synchronous=FULL"
	}
	return u + "?_synchronous=FULL"
}

// settings are the values of Config that need parsing. Run parses them
// all before it opens anything: a bad one fails at once.
type settings struct {
	roles              roles
	ipLimit, userLimit seckill.RateLimit
	badTokenLimit      seckill.RateLimit
	buyerReadLimit     seckill.RateLimit
	proxies            []netip.Prefix
	routeBudgets       map[string]time.Duration
	durability         redis.Durability
	demoLogin          bool
	buyerPay           bool
}

func (c *Config) parse() (s settings, err error) {
	if s.ipLimit, _, err = parseLimit(c.RateLimitIP); err != nil {
		return s, fmt.Errorf("rate limit per IP: %w", err)
	}
	if s.userLimit, _, err = parseLimit(c.RateLimitUser); err != nil {
		return s, fmt.Errorf("rate limit per user: %w", err)
	}
	if s.badTokenLimit, _, err = parseLimit(c.BadTokenLimitIP); err != nil {
		return s, fmt.Errorf("bad token limit per IP: %w", err)
	}
	if s.buyerReadLimit, _, err = parseLimit(c.BuyerReadLimit); err != nil {
		return s, fmt.Errorf("buyer read limit: %w", err)
	}
	if s.proxies, err = httpapi.ParseTrustedProxies(c.TrustedProxies); err != nil {
		return s, fmt.Errorf("trusted proxies: %w", err)
	}
	if !seckill.ValidCurrency(c.Currency) {
		return s, fmt.Errorf("currency %q: want an ISO 4217 code such as EUR", c.Currency)
	}
	if s.roles, err = c.roles(); err != nil {
		return s, err
	}
	if s.routeBudgets, err = httpapi.ParseRouteBudgets(c.RouteBudgets); err != nil {
		return s, err
	}
	if c.DatabaseMaxConns < 1 {
		return s, fmt.Errorf("database max conns %d: want at least 1", c.DatabaseMaxConns)
	}
	if err := c.databaseBounds().Validate(); err != nil {
		return s, err
	}
	if c.DatabaseCallTimeout <= 0 {
		return s, fmt.Errorf("database call timeout %s: want a positive duration", c.DatabaseCallTimeout)
	}
	if c.RequestBudget <= 0 {
		return s, fmt.Errorf("request budget %s: want a positive duration", c.RequestBudget)
	}
	if s.durability, err = redis.ParseDurability(c.RedisDurability); err != nil {
		return s, err
	}
	if c.EmbeddedFsync != "on" && c.EmbeddedFsync != "off" {
		return s, fmt.Errorf("embedded fsync %q: want on or off", c.EmbeddedFsync)
	}
	if c.RedisConfigCheck != "on" && c.RedisConfigCheck != "off" {
		return s, fmt.Errorf("redis config check %q: want on or off", c.RedisConfigCheck)
	}
	if c.RedisURL == "" && s.durability.Mode != redis.DurabilityNone {
		return s, fmt.Errorf("redis durability %s needs a Redis by URL: the embedded store has no replicas and no AOF (see docs/durability.md)", s.durability)
	}
	if err := c.Events.check(); err != nil {
		return s, err
	}
	if err := c.checkSignIn(); err != nil {
		return s, err
	}
	if err := c.checkSecrets(); err != nil {
		return s, err
	}
	if err = c.checkPaymentSecrets(); err != nil {
		return s, err
	}
	if s.buyerPay, err = onOff("buyer pay", c.BuyerPay); err != nil {
		return s, err
	}
	s.demoLogin, err = c.demoLogin()
	return s, err
}

// checkSecrets refuses configured secrets shorter than secrets.MinBytes
// (empty ones are generated, long enough).
func (c *Config) checkSecrets() error {
	var errs []error
	for _, s := range []struct{ name, value string }{
		{"--jwt-secret ($SECKILL_JWT_SECRET)", c.JWTSecret},
		{"--admin-token ($SECKILL_ADMIN_TOKEN)", c.AdminToken},
		{"--metrics-token ($SECKILL_METRICS_TOKEN)", c.MetricsToken},
	} {
		if s.value != "" {
			errs = append(errs, secrets.Check(s.name, s.value))
		}
	}
	if c.MetricsToken != "" && c.MetricsToken == c.AdminToken {
		// A scraper's credentials sit in a config file: they must not
		// hold the power over sales.
		errs = append(errs, errors.New("metrics token: must differ from the admin token"))
	}
	return errors.Join(errs...)
}

// checkPaymentSecrets refuses a webhook secret or service token that is
// set but shorter than secrets.MinBytes, and a service token that is the admin token (a shop's
// server reporting payments must not hold the power over sales).
func (c *Config) checkPaymentSecrets() error {
	for _, s := range []struct{ name, value string }{
		{"--payment-webhook-secret ($SECKILL_PAYMENT_WEBHOOK_SECRET)", c.PaymentWebhookSecret},
		{"--service-token ($SECKILL_SERVICE_TOKEN)", c.ServiceToken},
	} {
		if s.value != "" {
			if err := secrets.Check(s.name, s.value); err != nil {
				return err
			}
		}
	}
	if err := httpapi.CheckPaymentURLTemplate(c.PaymentURLTemplate); err != nil {
		return fmt.Errorf("payment URL template: %w", err)
	}
	if c.ServiceToken != "" && c.ServiceToken == c.AdminToken {
		return errors.New("service token: must differ from the admin token")
	}
	return nil
}

// onOff parses an on/off setting ("" is off).
func onOff(what, v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off", "":
		return false, nil
	}
	return false, fmt.Errorf("%s %q: want on or off", what, v)
}

// adminToken is the configured admin token, or the one the data dir keeps.
func (c *Config) adminToken() (string, error) {
	if c.AdminToken != "" {
		return c.AdminToken, nil
	}
	s, _, err := secrets.LoadOrCreate(c.DataDir)
	return s.AdminToken, err
}
