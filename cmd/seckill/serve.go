package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ackgate"
	"github.com/seckill-dev/seckill/internal/admitpace"
	"github.com/seckill-dev/seckill/internal/archive"
	"github.com/seckill-dev/seckill/internal/breaker"
	"github.com/seckill-dev/seckill/internal/claimid"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/controlroom"
	"github.com/seckill-dev/seckill/internal/guarded"
	"github.com/seckill-dev/seckill/internal/handoff"
	"github.com/seckill-dev/seckill/internal/heal"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/lostclaim"
	"github.com/seckill-dev/seckill/internal/lottery"
	"github.com/seckill-dev/seckill/internal/metrics"
	"github.com/seckill-dev/seckill/internal/nats"
	"github.com/seckill-dev/seckill/internal/orderwriter"
	"github.com/seckill-dev/seckill/internal/paytimeout"
	"github.com/seckill-dev/seckill/internal/preheat"
	"github.com/seckill-dev/seckill/internal/rabbitmq"
	"github.com/seckill-dev/seckill/internal/reconcile"
	"github.com/seckill-dev/seckill/internal/redact"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/relay"
	"github.com/seckill-dev/seckill/internal/restore"
	"github.com/seckill-dev/seckill/internal/saleadmin"
	"github.com/seckill-dev/seckill/internal/secrets"
	"github.com/seckill-dev/seckill/internal/soldout"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/startstop"
	"github.com/seckill-dev/seckill/internal/waitroom"
	"github.com/seckill-dev/seckill/internal/web"
)

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
	// wallClock: now is time.Now (no test set it).
	wallClock bool

	// wrapBroker, if set, wraps the broker as one role ("relay" or
	// "writer") sees it: tests use it to deliver every message twice, or
	// to make the relay die between publish and ack.
	wrapBroker func(role string, b seckill.Broker) seckill.Broker
	// tuneServer, if set, adjusts the HTTP server before it serves:
	// tests shorten its header timeout or watch its connections.
	tuneServer func(*http.Server)
	// pruneEvery, if set, is the pause between passes of the pruner of
	// delivered order events (5 min otherwise): tests shorten it.
	pruneEvery time.Duration
}

// requestClock is the clock of the request path (the API, the sold-out
// flag): nil on the wall clock, which tells them that the time a request
// read once will do for all of its decisions, or the test's clock.
func (m *Main) requestClock() func() time.Time {
	if m.wallClock {
		return nil
	}
	return m.now
}

// brokerFor returns the broker as role sees it.
func (m *Main) brokerFor(role string) seckill.Broker {
	if m.wrapBroker != nil {
		return m.wrapBroker(role, m.broker)
	}
	return m.broker
}

// wired is what Run's first steps build for the later ones.
type wired struct {
	settings
	reg       *prometheus.Registry
	pm        *metrics.Pipeline
	dm        *metrics.Durability
	sales     *sqlstore.SaleStore
	reqSales  guarded.Sales // the stores as the request paths see them
	reqStock  guarded.Stock
	reqLimit  guarded.Limiter
	dbBreaker *breaker.Breaker
	backlog   *metrics.Backlog // nil without a broker
	// relayWake is signalled after every reserve of this process: it
	// wakes this process's relay (if it runs one) at once.
	relayWake chan struct{}
	// appended counts the reservations this process's stock store has
	// appended to outboxes (relay.Config.Appended).
	appended atomic.Uint64
	// stored holds claims until the relay stored them in the broker:
	// set over the in-process store, whose outbox a crash loses.
	stored *ackgate.Gate
	// sweeper resolves the claims this node answered that the stock
	// store lost, armed by a heal (set once the API is built).
	sweeper  atomic.Pointer[lostclaim.Sweeper]
	replays  *combiner.Combiner
	gauges   *reconcile.GaugeWorker
	verifier *jwt.Verifier // buyer tokens (signin.go)
	// events is the order-event outbox, and eventsWake wakes this
	// process's deliverer; nil without order events (no sink).
	events     *sqlstore.EventStore
	eventsWake func()
	lottery    *httpapi.LotteryConfig
	// entries keeps lottery entries, and places the waiting rooms', in
	// the database as well as in the stock store: the enter and join
	// paths, the heal and the draw share them.
	entries *lottery.Book
	places  *waitroom.Book
	// pacer moves adaptive queue sales on, at rates adapted to
	// admitLatency: the latency of ticket holders' claims on this node.
	pacer        *admitpace.Pacer
	admitLatency *admitpace.Latency
}

// Run opens every backend, starts the workers and begins serving HTTP. It
// returns once the engine is ready; Close stops it.
func (m *Main) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			m.Close(context.Background())
		}
	}()
	if m.now == nil {
		m.now, m.wallClock = time.Now, true
	}
	set, err := m.Config.parse()
	if err != nil {
		return err
	}
	if err := m.useSecrets(); err != nil {
		return err
	}
	w := &wired{settings: set, relayWake: make(chan struct{}, 1)}
	if m.Config.RedisURL == "" && set.roles.relay {
		w.stored = ackgate.New()
	}
	if err := m.openStores(ctx, w); err != nil {
		return err
	}
	m.observe(w)
	if err := m.connectBroker(ctx, w); err != nil {
		return err
	}
	if err := m.startEventDelivery(ctx, w); err != nil {
		return err
	}
	// Background workers start in the reverse of their stopping order:
	// the relay drains the outbox into the broker before the writer stops.
	m.startPipeline(ctx, w)
	m.startHousekeeping(ctx, w)
	// The request path stops before the workers behind it.
	m.closers = append(m.closers, m.combiner.Stop, w.replays.Stop)
	w.reg.MustRegister(m.gate)
	if w.verifier, err = m.buyerVerifier(ctx); err != nil {
		return err
	}
	w.lottery = m.startLottery(ctx, w)
	api, err := m.newAPI(w)
	if err != nil {
		return err
	}
	if w.roles.api {
		m.followRestocks(ctx, api)
	}
	if err := m.serveHTTP(w, api); err != nil {
		return err
	}
	m.printBanner(w.roles)
	return nil
}

// keptRows counts a lottery's entries or a waiting room's places in the
// database (redis.KeptRows): a sale that has some was loaded before, and
// is loaded held if the stock store lost it.
func (m *Main) keptRows(ctx context.Context, s *seckill.Sale) (int64, error) {
	switch s.Admission.Of() {
	case seckill.AdmitLottery:
		n, _, err := sqlstore.NewEntryStore(m.db).EntryCounts(ctx, s.ID)
		return n, err
	case seckill.AdmitQueue:
		return sqlstore.NewPlaceStore(m.db).PlaceCount(ctx, s.ID)
	}
	return 0, nil
}

// worker is a background worker of the engine (internal/startstop).
type worker interface {
	Start(ctx context.Context)
	Stop(ctx context.Context) error
}

// start starts w for as long as the engine runs; Close stops it.
func (m *Main) start(ctx context.Context, w worker) {
	w.Start(context.WithoutCancel(ctx))
	m.closers = append(m.closers, w.Stop)
}

// useSecrets fills the secrets Config leaves empty from the data dir.
func (m *Main) useSecrets() error {
	cfg := &m.Config
	if cfg.JWTSecret != "" && cfg.AdminToken != "" {
		return nil
	}
	s, generated, err := secrets.LoadOrCreate(cfg.DataDir)
	if err != nil {
		return err
	}
	if cfg.JWTSecret == "" {
		cfg.JWTSecret = s.JWTSecret
	}
	if cfg.AdminToken == "" {
		cfg.AdminToken = s.AdminToken
	}
	// Secrets are never printed: stdout ends up in logs and terminals'
	// scrollback. The file (mode 0600) is named instead.
	path := filepath.Join(cfg.DataDir, secrets.File)
	if generated {
		fmt.Fprintf(m.Stdout, "generated secrets in %s (mode 0600; the admin token is its admin_token)\n", path)
	} else {
		fmt.Fprintf(m.Stdout, "using the secrets in %s\n", path)
	}
	return nil
}

// openStores opens and migrates the database, then the stock store.
func (m *Main) openStores(ctx context.Context, w *wired) (err error) {
	cfg, durability := &m.Config, w.durability
	if m.db, err = sqlstore.OpenBounded(ctx, cfg.databaseURL(), cfg.databaseBounds()); err != nil {
		return err
	}
	m.db.SetMaxConns(cfg.DatabaseMaxConns)
	m.closers = append(m.closers, func(context.Context) error { return m.db.Close() })
	if err := m.db.Migrate(ctx); err != nil {
		return err
	}
	if cfg.Events.enabled() {
		m.db.EnableOrderEvents()
	}
	redisOpts := []redis.Option{redis.WithKeyPrefix(cfg.RedisKeyPrefix), redis.WithOnOutboxAppend(func(claims int) {
		w.appended.Add(uint64(claims)) // before the wake: a lingering relay reads it on waking
		if w.stored != nil {
			w.stored.Appended() // before the relay wakes: its next mark counts this batch
		}
		select {
		case w.relayWake <- struct{}{}:
		default: // a wake is pending already
		}
	})}
	if durability.Mode == redis.DurabilityReplicas {
		redisOpts = append(redisOpts, redis.WithWaitReplicas(durability.Replicas, cfg.RedisWaitTimeout))
	}
	if cfg.RedisURL == "" {
		m.stock, err = redis.StartEmbedded(ctx, redisOpts...)
	} else {
		m.stock, err = redis.New(ctx, cfg.RedisURL, redisOpts...)
	}
	if err != nil {
		return err
	}
	m.closers = append(m.closers, func(context.Context) error { m.stock.Close(); return nil })
	m.orders = sqlstore.NewOrderStore(m.db)
	holdWriterTx(m.orders, m.Logger)
	return m.stock.CheckDurability(ctx, durability, cfg.RedisConfigCheck == "off", m.Logger)
}

// observe builds the metrics registry and the stores as the request
// paths see them: through their circuit breakers.
func (m *Main) observe(w *wired) {
	w.reg, w.sales = prometheus.NewRegistry(), sqlstore.NewSaleStore(m.db)
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w.pm = metrics.NewPipeline(w.reg)
	w.dm = metrics.NewDurability(w.reg)
	var redisBreaker *breaker.Breaker
	redisBreaker, w.dbBreaker = guarded.NewBreakers(w.reg)
	w.reqStock = guarded.Stock{Store: m.stock.StockStore(), B: redisBreaker}
	w.reqLimit = guarded.Limiter{Limiter: m.stock.RateLimiter(), B: redisBreaker}
	w.reqSales = guarded.Sales{SaleStore: w.sales, B: w.dbBreaker}
}

// connectBroker opens the broker of a node that relays or writes (an
// API-only node writes claims to the Redis outbox and never talks to the
// broker) and samples its queue depth.
func (m *Main) connectBroker(ctx context.Context, w *wired) (err error) {
	cfg := &m.Config
	if w.roles.relay || w.roles.writer {
		// The embedded broker is bypassed (handoff) when the relay and the
		// writer share this process and the outbox is in a real Redis,
		// as durable as the claims themselves. Over the in-process
		// store, whose outbox a crash loses, JetStream's files keep
		// what has left the outbox while the writer catches up.
		handOff := w.roles.relay && w.roles.writer && cfg.RedisURL != ""
		if m.broker, err = m.openBroker(ctx, handOff); err != nil {
			return err
		}
	}
	// Every node with a broker reports the same queue, so dashboards take
	// the max.
	if b, ok := m.broker.(metrics.BacklogReader); ok && cfg.BrokerBacklogInterval > 0 {
		w.backlog = metrics.NewBacklog(b, cfg.BrokerBacklogInterval, m.Logger, m.now)
		w.reg.MustRegister(w.backlog)
		m.start(ctx, w.backlog)
	}
	return nil
}

// startPipeline starts what takes a claim from the request to an order
// and back: preheat, the combiners and the sold-out flag, the restorer
// and the payment-timeout sweeper, the order writer and the relay.
func (m *Main) startPipeline(ctx context.Context, w *wired) {
	cfg, pm := &m.Config, w.pm
	m.preheat = preheat.New(w.sales, m.stock.Loader(m.keptRows), preheat.Config{
		Lead: cfg.PreheatLead, QueueOpensBefore: cfg.QueueOpensBefore, Interval: cfg.PreheatInterval, Logger: m.Logger,
	})
	m.start(ctx, m.preheat)
	w.admitLatency = &admitpace.Latency{}
	// Each pace this node moves is kept in the database, for a heal.
	w.pacer = admitpace.New(admitpace.Config{Sales: m.preheat, Store: m.stock.Queue(), Latency: w.admitLatency,
		Keeper: sqlstore.NewPlaceStore(m.db), Interval: cfg.QueueAdaptInterval, Now: m.now, Logger: m.Logger})
	m.start(ctx, w.pacer)
	w.reg.MustRegister(metrics.NewStockCollector(m.preheat, m.stock.StockStore()), metrics.NewAdmissionCollector(metrics.AdmissionConfig{
		Sales: m.preheat, Entrants: m.stock.Lottery(), Queue: m.stock.Queue(), Draws: sqlstore.NewDrawStore(m.db),
		Pace: w.pacer.Pace, Now: m.now,
	}))

	// The combiner and the sold-out flag in front of it exist before the
	// restorer, which clears the flag when stock comes back; they stop
	// with the request path (Run).
	// A batch's script call may take as long as a reservation's budget:
	// every request in it is answered by then anyway.
	reserveBudget := httpapi.RouteBudget("reserve", w.routeBudgets, cfg.RequestBudget)
	// Over the in-process store a batch's claims are answered once the
	// relay has stored them in the broker's files (internal/ackgate).
	var hold func([]seckill.ReserveResult) func(context.Context) error
	if w.stored != nil {
		hold = w.stored.Hold
	}
	m.combiner = combiner.New(w.reqStock, combiner.Config{MaxBatch: cfg.MaxBatch, CallTimeout: reserveBudget, Hold: hold, OnBatch: func(size int, took time.Duration, err error) {
		pm.ObserveBatch(size, took, err)
		if errors.Is(err, redis.ErrNotDurable) {
			w.dm.NotDurable.Inc()
		}
	}})
	// Keyed requests on a flagged sale are answered by a lookup of their
	// earlier reservation, batched per sale like reservations are; a
	// replay waits as its reservation did.
	w.replays = combiner.New(replayLookup{m.stock.StockStore()}, combiner.Config{MaxBatch: cfg.MaxBatch, Hold: hold})
	m.gate = soldout.New(m.combiner, soldout.Config{SafetyInterval: cfg.SoldOutInterval, Now: m.requestClock(), Replays: w.replays})

	m.restorer = restore.New(m.orders.Restores, m.stock.Restorer(), restore.Config{
		RetryInterval: cfg.RestoreRetryInterval, AlertAfter: cfg.RestoreAlertAfter,
		Now: m.now, Logger: m.Logger, OnAlert: pm.ObserveRestoreAlert,
		// This node clears its flag at once; the others hear the
		// announcement the restore service publishes.
		OnRestocked: m.gate.Clear,
	})
	m.start(ctx, m.restorer)

	// Every cancel gives the stock back through the one restore path.
	m.start(ctx, paytimeout.New(m.orders, paytimeout.Config{
		Interval: cfg.SweepInterval, Logger: m.Logger, OnCancelled: pm.ObserveTimeouts, Now: m.now,
		// In batches: one database transaction, one Redis script call
		// and one restock announcement per sale per batch.
		CancelBatch: func(ctx context.Context, orders []*seckill.Order) []error {
			return m.restorer.CancelOrders(ctx, orders, paytimeout.Reason, paytimeout.ErrAlreadyCancelled)
		},
	}))

	if w.roles.writer {
		m.start(ctx, orderwriter.New(m.orders, m.brokerFor("writer"), orderwriter.Config{
			PayTimeout: cfg.PayTimeout, Consumers: cfg.OrderWriters, Logger: m.Logger,
			Consume: seckill.ConsumeOptions{BatchSize: cfg.OrderBatch, OnForeign: pm.ObserveForeign},
			Observe: pm.ObservePersisted, OnFailed: pm.ObserveFailed,
			AfterPersist: func() {
				m.restorer.Kick()
				if w.eventsWake != nil {
					w.eventsWake()
				}
			}, Now: m.now, CallTimeout: cfg.DatabaseCallTimeout,
			// A node cut off from the database gives its batches back
			// for the others (no attempt spent) instead of holding them.
			ReleaseAfter: writerReleaseAfter,
		}))
	}
	if w.roles.relay {
		m.start(ctx, relay.New(m.stock.Outbox(), m.brokerFor("relay"), relay.Config{
			Logger: m.Logger, OnPublished: pm.ObserveRelayed, OnReclaimed: pm.ObserveReclaimed, ClaimMinIdle: cfg.RelayClaimIdle,
			// The embedded broker's writer is this binary: events go
			// compact. An external broker may have writers of an older
			// version, which read only JSON.
			CompactEvents: cfg.BrokerURL == "",
			Linger:        relayLinger(cfg, w),
			Wake:          w.relayWake,
			Appended:      w.appended.Load,
			Progress:      progress(w.stored),
			BatchSize:     cfg.RelayBatch,
		}))
	}
}

// progress is the relay's Progress: the gate, if any (a nil *Gate must
// not become a non-nil interface).
func progress(g *ackgate.Gate) relay.Progress {
	if g == nil {
		return nil
	}
	return g
}

// relayLinger is the relay's Linger: the configured one, except over
// the in-process stock store, whose claims are answered only once the
// relay has stored them (wired.stored): there a linger would be every
// buyer's wait.
func relayLinger(cfg *Config, w *wired) time.Duration {
	if w.stored != nil {
		return 0
	}
	return cfg.RelayLinger
}

// startHousekeeping starts what keeps the books and the memory in order:
// the archiver, the reconciliation gauges and the healer of lost writes.
func (m *Main) startHousekeeping(ctx context.Context, w *wired) {
	cfg := &m.Config
	w.entries = lottery.NewBook(m.stock.Lottery(), sqlstore.NewEntryStore(m.db), m.Logger)
	w.places = waitroom.NewBook(m.stock.Queue(), sqlstore.NewPlaceStore(m.db), m.Logger)
	// Ended sales give their Redis memory back: the idempotency keys at
	// the end, the rest once settled, after ArchiveAfter, if the sale
	// reconciles one last time; a lottery's once drawn and its entries
	// copied to the database.
	m.start(ctx, archive.New(dbStores{w.sales, m.orders.Ledger}, m.stock.Archive(), archive.Config{
		Interval: cfg.ArchiveInterval, After: cfg.ArchiveAfter, Now: m.now, Logger: m.Logger,
		Lottery: &archive.Lottery{Draws: sqlstore.NewDrawStore(m.db), Entries: m.stock.Lottery(), Copies: sqlstore.NewEntryStore(m.db)},
		Places:  sqlstore.NewPlaceStore(m.db),
		Final: func(ctx context.Context, saleID string) (string, error) {
			return reconcile.Final(ctx, saleID, m.orders.Ledger, m.stock.Ledger(), m.now())
		},
	}))

	// The gauges come from counters: a read costs the same whatever the
	// sale's size. The reservation-by-reservation comparison is on demand.
	w.gauges = reconcile.NewGaugeWorker(reconcile.GaugeConfig{
		Sales: m.preheat.Loaded, Interval: cfg.ReconcileInterval, Now: m.now, Logger: m.Logger,
		Counts: func(ctx context.Context, saleID string) (reconcile.Counts, error) {
			return saleCounts(ctx, saleID, m.orders.Ledger, m.stock.Ledger(), m.now())
		},
	})
	w.reg.MustRegister(w.gauges)
	m.start(ctx, w.gauges)

	// Claims that Redis lost are noticed and healed from the database.
	hc := heal.Config{
		Interval: cfg.HealInterval, Now: m.now, Logger: m.Logger,
		// A lottery's entries and a waiting room's places come back from
		// the database too.
		Rebuild: func(ctx context.Context, sale *seckill.Sale) error {
			switch sale.Admission.Of() {
			case seckill.AdmitLottery:
				_, err := w.entries.Level(ctx, sale.ID)
				return err
			case seckill.AdmitQueue:
				return w.places.Level(ctx, sale)
			}
			return nil
		},
		OnHeal: func(string, string, int, int) {
			w.dm.Heals.Inc()
			if s := w.sweeper.Load(); s != nil {
				s.Arm() // claims answered before the loss may be gone
			}
		},
		OnRestart: func() {
			if s := w.sweeper.Load(); s != nil {
				s.Arm() // a restart may have lost claims no sale's state shows
			}
		},
	}
	if b, ok := m.broker.(metrics.BacklogReader); ok && cfg.RedisURL == "" {
		hc.Backlog = b.Backlog
	}
	healer := heal.New(m.stock.Healer(), dbStores{w.sales, m.orders.Ledger}, m.preheat, hc)
	if cfg.RedisURL == "" {
		// The embedded store starts empty, even after a SIGKILL that
		// left orders in SQLite and claims in the broker's stream: every
		// live sale refuses claims until its first heal (a tick away)
		// rebuilt it from the database, once the stream has drained
		// into it (docs/durability.md).
		healer.HoldLive(ctx, w.sales, m.preheat.MaxLead())
	}
	m.start(ctx, healer)
}

// newAPI builds the buyer and admin HTTP API.
func (m *Main) newAPI(w *wired) (*httpapi.Server, error) {
	cfg := &m.Config
	claimIDs := claimid.NewMinter(jwt.DeriveKey([]byte(cfg.JWTSecret), "seckill reservation ids v1"))
	lc := lostclaim.Config{
		After: cfg.LostClaimAfter, Now: m.now, Logger: m.Logger,
		OnLost:  func(f *seckill.FailedOrder) { w.dm.LostClaims.Inc(); w.pm.ObserveFailed(f) },
		Limiter: w.reqLimit,
	}
	// A node that reads the broker judges a forgotten claim from what is
	// in flight; one that does not (api only) waits out LostClaimAfter.
	if b, ok := m.broker.(metrics.BacklogReader); ok {
		lc.Outbox, lc.Backlog = m.stock.Outbox(), b.Backlog
	}
	lost := lostclaim.New(m.orders, claimIDs, lc)
	sweeper := lostclaim.NewSweeper(m.gate, lost, m.stock.Ledger(), lostclaim.SweepConfig{Now: m.now, Logger: m.Logger})
	w.sweeper.Store(sweeper)
	m.start(context.Background(), sweeper)
	admin, err := saleadmin.New(saleadmin.Config{
		Store: w.sales, Live: m.stock.Admin(), Now: m.now, Logger: m.Logger,
		OnChanged: func(s *seckill.Sale) {
			m.gate.Clear(s.ID)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			m.preheat.SaleChanged(ctx, s)
		},
	})
	if err != nil {
		return nil, err
	}
	return httpapi.New(httpapi.Config{
		Sales:             w.reqSales,
		Stock:             w.reqStock,
		Preheater:         m.preheat,
		Reserver:          sweeper,
		Verifier:          w.verifier,
		AdminToken:        cfg.AdminToken,
		Logger:            m.Logger,
		Registerer:        w.reg,
		Gatherer:          w.reg,
		Orders:            guarded.Orders{OrderStore: m.orders, B: w.dbBreaker},
		Pending:           w.reqStock,
		ClaimIDs:          claimIDs,
		Lost:              lost,
		Restorer:          m.restorer,
		RateLimiter:       w.reqLimit,
		LimitInReserve:    true,
		RateLimitIP:       w.ipLimit,
		RateLimitUser:     w.userLimit,
		TrustedProxies:    w.proxies,
		BadSignatureLimit: w.badTokenLimit,
		BuyerReadLimit:    w.buyerReadLimit,
		MaxInFlight:       cfg.MaxInFlight,
		Budget:            cfg.RequestBudget,
		RouteBudgets:      w.routeBudgets,
		Restores:          m.orders.Restores,
		Reconcile: func(ctx context.Context, saleID string) (any, error) {
			if err := reconcile.Probe(ctx, cfg.RequestBudget, saleID, w.reqSales, w.reqStock); err != nil {
				return nil, err
			}
			return reconcile.Sale(ctx, saleID, m.orders.Ledger, m.stock.Ledger(), m.now(), reconcile.Options{})
		},
		Currency:              cfg.Currency,
		SalesAdmin:            admin,
		Lottery:               w.lottery,
		Queue:                 m.newQueue(w),
		Resolver:              redriveResolver{orders: m.orders, stock: m.stock.Redriver(), logger: m.Logger},
		PayTimeout:            cfg.PayTimeout,
		Payments:              sqlstore.NewPayments(m.orders, cfg.Currency),
		OrderList:             m.orders,
		PaymentWebhookSecrets: []string{cfg.PaymentWebhookSecret},
		ServiceToken:          cfg.ServiceToken,
		MetricsToken:          cfg.MetricsToken,
		BuyerPay:              w.buyerPay,
		PaymentURLTemplate:    cfg.PaymentURLTemplate,
		OrderEvents:           orderEventsAPI(w.events),
		BuyerClaims:           buyerClaims{m.orders, m.stock.StockStore()},
		KeyedOrders:           guarded.KeyedOrders{Store: m.orders, B: w.dbBreaker},
		Now:                   m.requestClock(),
		Ready:                 m.ready,
		OnSaleCreated: func(s *seckill.Sale) {
			// Within the create request's budget: with Redis down the
			// scheduler preheats the sale on a later pass instead.
			ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestBudget/2)
			defer cancel()
			m.preheat.SaleCreated(ctx, s)
		},
	})
}

// followRestocks hears the restock announcement: the sold-out flag
// answers a sold-out sale without Redis, and stock that comes back (a
// restore on any node) clears it everywhere; a sale changed on another
// node (edit, end, added stock) comes on the same announcement, and this
// node forgets its cached row too.
func (m *Main) followRestocks(ctx context.Context, api *httpapi.Server) {
	var w startstop.Worker
	w.Start(context.WithoutCancel(ctx), func(ctx context.Context) {
		err := m.stock.Restorer().SubscribeRestocked(ctx, func(saleID string) {
			m.gate.Clear(saleID)
			api.ForgetSale(saleID)
		})
		if err != nil {
			m.Logger.Error("restock announcements: subscription ended", "err", err)
		}
	})
	m.closers = append(m.closers, w.Stop)
}

// serveHTTP starts serving the API and the pages on Config.HTTPAddr.
func (m *Main) serveHTTP(w *wired, api *httpapi.Server) (err error) {
	cfg := &m.Config
	var mint func(string) (string, error)
	if w.buyerPay {
		m.Logger.Warn("buyer pay is on: a buyer pays by saying so (POST /api/v1/reservations/{id}/pay), with no payment provider; never use it for a real sale")
	}
	if w.demoLogin {
		m.Logger.Warn("demo login is on: anyone who reaches POST /demo/v1/login can act as any buyer; never use it for a real sale")
		mint = func(name string) (string, error) {
			return jwt.Sign([]byte(cfg.JWTSecret), name, 12*time.Hour, m.now())
		}
	}
	roomCfg := controlroom.Config{Gauges: w.gauges, Gatherer: w.reg, Backlog: w.backlog, Now: m.now,
		Lottery: m.stock.Lottery(), Queue: m.stock.Queue(), Pace: w.pacer.Pace}
	if w.lottery != nil {
		roomCfg.Draws, roomCfg.Archive = w.lottery.Draws, sqlstore.NewEntryStore(m.db)
	}
	room := controlroom.New(roomCfg)
	pages, err := web.New(web.Config{
		Sales: api.CachedSales(), Stock: w.reqStock, Snapshot: room.Snapshot, Admission: room.Admission, AdminToken: cfg.AdminToken,
		DemoLogin: mint, BuyerPay: w.buyerPay, ShopSignIn: cfg.ShopSignInURL, Now: m.now, Logger: m.Logger, Budget: cfg.RequestBudget, OnDegraded: api.CountDegraded, Currency: cfg.Currency,
		API: api.Handler(), Buyers: w.verifier, VerifyBuyer: api.VerifyBuyer, QueueOpensBefore: cfg.QueueOpensBefore,
	})
	if err != nil {
		return err
	}
	m.server = httpapi.NewHTTPServer(m.routes(w.roles, api, pages), m.Logger)
	if m.tuneServer != nil {
		m.tuneServer(m.server)
	}
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
	return nil
}

// routes are the pages' few routes and the API's all others, hardened;
// the reservation route skips both muxes. A node without the api role
// serves only what operators probe.
func (m *Main) routes(role roles, api *httpapi.Server, pages *web.Handler) http.Handler {
	root := http.NewServeMux()
	if role.api {
		root.Handle("/", api.Handler())
		pages.Routes(root)
		return api.Front(root)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		root.Handle(path, api.Handler())
	}
	root.Handle("/", httpapi.NotTheAPI(m.Config.Roles))
	return httpapi.Harden(root)
}

// printBanner says where the engine listens and on what.
func (m *Main) printBanner(role roles) {
	cfg := &m.Config
	fmt.Fprintf(m.Stdout, "seckill listening on http://%s (database %s, redis %s, broker %s)\n",
		m.listener.Addr(), redact.URL(cfg.databaseURL()), redact.URLOr(cfg.RedisURL, "embedded"), redact.URLOr(cfg.BrokerURL, "embedded"))
	if role.api {
		fmt.Fprintf(m.Stdout, "  control room: http://%s/admin\n", m.listener.Addr())
	}
	if !role.api || !role.relay || !role.writer {
		fmt.Fprintf(m.Stdout, "  roles: %s\n", cfg.Roles)
	}
}

// openBroker connects to the configured broker, or starts NATS JetStream
// in-process with its store under the data dir, behind a handoff
// (internal/handoff) if handOff is set.
func (m *Main) openBroker(ctx context.Context, handOff bool) (seckill.Broker, error) {
	cfg := &m.Config
	switch u := cfg.BrokerURL; {
	case u == "":
		b, shutdown, err := nats.StartEmbedded(ctx, filepath.Join(cfg.DataDir, "nats"), cfg.BrokerQueue, nats.WithLogger(m.Logger), nats.WithNamespace(cfg.Namespace), nats.WithAckWait(cfg.BrokerAckWait), nats.WithSyncAlways(cfg.EmbeddedFsync == "on"))
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
		return nil, fmt.Errorf("broker URL %q: want amqp://, amqps://, nats:// or tls://", redact.URL(u))
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

// dbStores is the database as the archiver and the heal watcher read it.
type dbStores struct {
	*sqlstore.SaleStore
	*sqlstore.LedgerStore
}

// replayLookup gives the Redis idempotency lookup the shape the request
// combiner batches.
type replayLookup struct{ stock redis.StockStore }

func (l replayLookup) Reserve(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	return l.stock.Replays(ctx, saleID, reqs)
}
