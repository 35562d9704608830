// Package httpapi owns the HTTP API of docs/design.md: routing, authentication
// of buyers and admins, strict decoding of request bodies, the mapping of
// error codes to statuses, and the API's Prometheus metrics. It speaks only
// domain types; every backend comes in through Config.
//
// The reservation handler is the hot path of a flash sale. It touches no
// database: it verifies the token, decodes one small body and asks the
// Reserver. Only when the Reserver answers "not started" does it look at
// the (cached) sale row, to tell an unknown sale from one that has not
// opened yet.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
	"github.com/seckill-dev/seckill/internal/ticket"
	"github.com/seckill-dev/seckill/internal/ttlcache"
)

// MaxBodyBytes caps every request body; more is answered 413.
const MaxBodyBytes = 8 << 10

// DefaultSaleCacheTTL is how long sale rows (and "no such sale") are kept
// in memory for the public sale page and the not-started check.
const DefaultSaleCacheTTL = time.Second

// SaleStore is the part of seckill.SaleStore the API uses.
type SaleStore interface {
	// CreateSale inserts s; seckill.ErrDuplicate when the id is taken.
	CreateSale(ctx context.Context, s *seckill.Sale) error
	// Sale returns one sale; seckill.ErrNotFound when there is none.
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
}

// StockStore is the part of seckill.StockStore the API uses directly.
// Reservations go through the Reserver instead.
type StockStore interface {
	Preheat(ctx context.Context, s *seckill.Sale) (created bool, err error)
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
}

// Preheater loads a sale into the stock store on an operator's demand.
type Preheater interface {
	Preheat(ctx context.Context, s *seckill.Sale) (created bool, err error)
}

// TokenVerifier checks a buyer's bearer token and returns the user id it
// carries. Its errors should be *seckill.Error with code EUNAUTHORIZED;
// any other error is answered 401 as well.
type TokenVerifier interface {
	Verify(token string) (userID string, err error)
}

// Config holds the Server's dependencies. Sales, Stock, Reserver and
// Verifier are required; the rest have defaults.
type Config struct {
	Sales SaleStore
	Stock StockStore
	// Reserver decides reservations; an error of it that is not a
	// *seckill.Error is answered 500.
	Reserver seckill.Reserver
	Verifier TokenVerifier
	// Preheater, if set, serves POST /admin/v1/sales/{id}/preheat instead
	// of Stock.Preheat (the preheat scheduler, which remembers what it
	// loaded).
	Preheater Preheater

	// Orders and Pending, set together, serve a buyer's reservation
	// (GET, pay, cancel under /api/v1/reservations/{id}) and the failed
	// orders list for operators. When both are nil those routes are not
	// registered.
	Orders OrderStore
	// Pending reads reservations not yet in the database.
	Pending PendingStore
	// ClaimIDs, if set, mints the reservation ids of claims, signed for
	// their buyer, and Lost answers for a signed id that neither Orders
	// nor Pending has (a claim the stock store forgot): never 404.
	ClaimIDs *claimid.Minter
	Lost     LostClaims
	// Restorer, set with Orders, serves a buyer's cancel and
	// POST /admin/v1/restores.
	Restorer Restorer
	// Restores, if set, lists restore requests (GET /admin/v1/restores).
	Restores RestoreLister
	// Reconcile, if set, serves GET /admin/v1/sales/{id}/reconciliation:
	// it returns the report (encoded as JSON) or seckill.ErrNotFound.
	Reconcile func(ctx context.Context, saleID string) (report any, err error)

	// Payments, if set with Orders, serves the shop's side of payment:
	// the signed webhook POST /webhooks/v1/payments (PaymentWebhookSecrets),
	// POST /admin/v1/orders/{order_id}/payments (ServiceToken) and the
	// operators' GET /admin/v1/payments (payment.go).
	Payments PaymentStore
	// OrderList, if set, serves the shop's back office
	// GET /admin/v1/sales/{id}/orders (order_list.go).
	OrderList seckill.OrderLister
	// PaymentWebhookSecrets verify the webhook's Seckill-Signature: any
	// one matching is enough. None: every webhook is 401.
	PaymentWebhookSecrets []string
	// ServiceToken authorises the shop's server on
	// /admin/v1/orders/{order_id}/payments; empty disables the route (401).
	ServiceToken string
	// PaymentURLTemplate is the shop's payment page of an order, e.g.
	// https://shop.example/pay?reservation={id}: {id} is the reservation
	// id, {order_id} the order id, {amount_cents} the amount. A buyer's
	// order awaiting payment carries it as pay_url. Empty: none.
	PaymentURLTemplate string
	// BuyerPay serves POST /api/v1/reservations/{id}/pay: a buyer pays by
	// saying so. For the demo only; without it the route is 404.
	BuyerPay bool

	// AdminToken authorises /admin/v1 calls as "Authorization: Bearer
	// <AdminToken>". Empty disables the admin routes (every call is 401).
	AdminToken string

	// Now is the clock for sale states and reservation ids. Default time.Now.
	Now func() time.Time
	// Logger receives internal errors only. Default: discard.
	Logger *slog.Logger
	// Registerer gets the API's collectors; Gatherer is served on /metrics.
	// When both are nil a private registry is used for both; when only
	// Registerer is set and it is a Gatherer too (a *prometheus.Registry),
	// it is served.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// MetricsToken, if set, is the bearer token GET /metrics requires
	// (Prometheus's scrape_config authorization); without it the answer
	// is 401. Empty: /metrics answers anyone who reaches the node.
	MetricsToken string
	// Ready answers /readyz: nil means ready. Default: always ready. It is
	// called at most once a second, the probes of that second sharing its
	// answer (readiness.go).
	Ready func(ctx context.Context) error
	// OnSaleCreated, if set, is called after a sale is created, with a
	// copy of it, before the 201 is sent (the preheat scheduler uses it
	// to load a sale that starts soon). It should not block for long.
	OnSaleCreated func(*seckill.Sale)
	// SaleCacheTTL overrides DefaultSaleCacheTTL.
	SaleCacheTTL time.Duration
	// Currency is the ISO 4217 code of sales created without one, and
	// shown for rows made before sales had one. Empty: a sale without a
	// currency shows none.
	Currency string

	// SalesAdmin, if set, serves the operator's side of sales: the list
	// (GET /admin/v1/sales), edits, ending early, adding stock and the
	// audit log (admin.go).
	SalesAdmin SalesAdmin
	// Resolver, if set with Orders, serves POST
	// /admin/v1/failed-orders/{id}/resolve; PayTimeout is the deadline a
	// re-driven order gets (default 15 minutes).
	Resolver   seckill.FailedOrderResolver
	PayTimeout time.Duration
	// Budget bounds every request of a route without one of its own in
	// RouteBudgets or DefaultRouteBudgets (budget.go): its context, and so
	// every backend call it makes, ends then. 0 means DefaultBudget.
	Budget time.Duration
	// RouteBudgets, by route name (RouteNames), override Budget.
	RouteBudgets map[string]time.Duration

	// Protection of the reservation route (protect.go). RateLimiter
	// enforces RateLimitIP (per client address; see TrustedProxies) and
	// RateLimitUser (per verified buyer); a zero Limit is off, and a limit
	// set without a RateLimiter is an error. TrustedProxies are the
	// peers whose X-Forwarded-For is believed. MaxInFlight caps the
	// reservation requests handled at once on this node, beyond which
	// requests are answered 503 overloaded: 0 means DefaultMaxInFlight,
	// a negative value no cap.
	RateLimiter seckill.RateLimiter
	// LimitInReserve has the Reserver decide RateLimitIP and RateLimitUser in its
	// own stock-store call (seckill.ReserveRequest.RateChecks: per sale, no
	// round trip of their own) instead of asking RateLimiter first, and
	// the lottery's Enterer and the queue's Queuer theirs in the same way
	// (seckill.EntryRequest.RateChecks, seckill.QueueJoin.RateChecks);
	// RateLimiter is then not needed.
	LimitInReserve bool
	RateLimitIP    seckill.RateLimit
	RateLimitUser  seckill.RateLimit
	TrustedProxies []netip.Prefix
	MaxInFlight    int
	// BadSignatureLimit bounds, per client address, the buyer tokens with
	// a wrong signature it may send (each costs a signature check) before
	// its tokens not verified before are refused 429 unchecked, on every
	// route that takes a buyer token (badsig.go). Zero: no bound.
	BadSignatureLimit seckill.RateLimit
	// BuyerReadLimit bounds, per buyer, the requests for their own
	// records: a reservation's status, pay and cancel, reservations/mine,
	// entries/mine and queue/mine (buyerreads.go). Zero: no bound.
	BuyerReadLimit seckill.RateLimit

	// OrderEvents, if set, serves the operator's view of order-event
	// delivery (orderevents.go): GET /admin/v1/order-events and POST
	// /admin/v1/order-events/{id}/redeliver.
	OrderEvents OrderEvents

	// Lottery, if set, serves the lottery routes (lottery.go): entries,
	// a buyer's result, the draw and its entry list.
	Lottery *LotteryConfig
	// Queue, if set, serves the waiting rooms of queue sales and takes
	// the claims of ticket holders (queue.go).
	Queue *QueueConfig

	// BuyerClaims, if set, serves GET /api/v1/sales/{id}/reservations/mine
	// (mine.go): a buyer's claims on a sale, for one who lost an answer.
	BuyerClaims BuyerClaims
	// KeyedOrders, if set, answers a keyed claim the stock store refuses
	// as over the limit with the buyer's order made under the same key,
	// when the database has one (the key's record was lost in Redis).
	KeyedOrders KeyedOrders
}

// Server is the HTTP API. Build it with New; serve Handler.
type Server struct {
	sales         SaleStore
	stock         StockStore
	preheater     Preheater
	reserver      seckill.Reserver
	verifier      TokenVerifier
	verifierAt    verifierAt  // verifier, if it is one
	known         knownTokens // verifier, if it is one
	sigGate       *sigGate    // nil: no bound on forged tokens
	readGate      *readGate   // nil: no bound on a buyer's record requests
	orders        OrderStore
	pending       PendingStore
	lost          LostClaims
	claimIDs      *claimid.Minter
	restorer      Restorer
	restores      RestoreLister
	reconcile     func(ctx context.Context, saleID string) (any, error)
	resMetrics    *reservationMetrics
	admin         staticToken
	metricsToken  staticToken // unset: /metrics is open
	now           func() time.Time
	wallClock     bool // now is time.Now (Config.Now unset)
	logger        *slog.Logger
	ready         *readiness // nil: always ready
	onSaleCreated func(*seckill.Sale)
	cache         *saleCache
	currency      string
	salesAdmin    SalesAdmin
	resolver      seckill.FailedOrderResolver
	payTimeout    time.Duration
	orderEvents   OrderEvents
	adminMetrics  *adminMetrics
	levels        lastLevels
	metrics       *metrics
	guard         *guard
	pay           paySide // payment.go
	orderList     seckill.OrderLister
	// The reservation route's children and budget (serveReserve).
	reserveMetrics *routeMetrics
	reserveBudget  time.Duration
	// The lottery routes (lottery.go); lottery.Enterer nil: none.
	lottery        LotteryConfig
	buyerClaims    BuyerClaims // nil: no reservations/mine route
	keyedOrders    KeyedOrders // nil: no replay from the database
	draws          drawCache
	entryLists     entryLists // GET …/draw/entries, once drawn
	lotteryMetrics *lotteryMetrics
	// The waiting rooms (queue.go); queue.Queuer nil: none.
	queue        QueueConfig
	queueMetrics *queueMetrics
	liveStock    *ttlcache.Cache[bool]                   // queue sales' live "sold out" (liveSoldOut)
	soldOut      func(saleID string, now time.Time) bool // the Reserver's local sold-out flag, if it has one (soldOutFlag)
	early        earlyFlags                              // sales the stock store said have not started
	budget       time.Duration
	routeBudgets map[string]time.Duration
	gatherer     prometheus.Gatherer
	mux          *http.ServeMux
	fronted      frontedRoutes // the admission routes reserveFront serves
	handler      http.Handler  // mux behind Harden
}

// New checks cfg, registers the API's metrics and builds the routes.
func New(cfg Config) (*Server, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	s := &Server{
		sales:         cfg.Sales,
		stock:         cfg.Stock,
		preheater:     cfg.Preheater,
		reserver:      cfg.Reserver,
		soldOut:       soldOutFlag(cfg.Reserver),
		verifier:      cfg.Verifier,
		verifierAt:    asVerifierAt(cfg.Verifier),
		known:         asKnownTokens(cfg.Verifier),
		orders:        cfg.Orders,
		keyedOrders:   cfg.KeyedOrders,
		pending:       cfg.Pending,
		lost:          cfg.Lost,
		claimIDs:      cfg.ClaimIDs,
		restorer:      cfg.Restorer,
		restores:      cfg.Restores,
		reconcile:     cfg.Reconcile,
		now:           cfg.Now,
		logger:        cfg.Logger,
		onSaleCreated: cfg.OnSaleCreated,
		budget:        cfg.Budget,
		routeBudgets:  cfg.RouteBudgets,
		gatherer:      cfg.Gatherer,
		mux:           http.NewServeMux(),
		currency:      cfg.Currency,
		salesAdmin:    cfg.SalesAdmin,
		resolver:      cfg.Resolver,
		payTimeout:    cfg.PayTimeout,
		orderEvents:   cfg.OrderEvents,
	}
	pay, err := newPaySide(cfg)
	if err != nil {
		return nil, err
	}
	s.pay = pay
	s.orderList = cfg.OrderList
	s.buyerClaims = cfg.BuyerClaims
	if err := s.fillDefaults(cfg); err != nil {
		return nil, err
	}
	if cfg.Ready != nil {
		s.ready = &readiness{check: cfg.Ready, now: s.now, logger: s.logger}
	}
	reg := s.registry(cfg)
	if err := s.registerMetrics(cfg, reg); err != nil {
		return nil, err
	}
	if err := s.admissionModes(cfg, reg); err != nil {
		return nil, err
	}
	ttl := cfg.SaleCacheTTL
	if ttl <= 0 {
		ttl = DefaultSaleCacheTTL
	}
	s.cache = newSaleCache(s.sales.Sale, ttl, s.now)
	s.reserveMetrics = s.metrics.route(reservePattern)
	s.reserveMetrics.duration = nil // handleReserve observes its own latency
	s.reserveBudget = s.budgetOf(reservePattern)
	s.routes()
	s.handler = s.reserveFront(Harden(s.mux))
	return s, nil
}

// checkConfig refuses a Config missing a required port, or holding one of
// two ports that go together without the other.
func checkConfig(cfg Config) error {
	switch {
	case cfg.Sales == nil:
		return errors.New("httpapi: Config.Sales is required")
	case cfg.Stock == nil:
		return errors.New("httpapi: Config.Stock is required")
	case cfg.Reserver == nil:
		return errors.New("httpapi: Config.Reserver is required")
	case cfg.Verifier == nil:
		return errors.New("httpapi: Config.Verifier is required")
	case (cfg.Orders == nil) != (cfg.Pending == nil):
		// Either alone would answer a claimed reservation 404 (or pending
		// forever): both, or neither.
		return errors.New("httpapi: Config.Orders and Config.Pending go together")
	case (cfg.Orders == nil) != (cfg.Restorer == nil):
		// A cancel must give the stock back: no order actions without it.
		return errors.New("httpapi: Config.Orders and Config.Restorer go together")
	}
	return nil
}

// fillDefaults fills the zero knobs and refuses invalid ones.
func (s *Server) fillDefaults(cfg Config) error {
	if s.payTimeout <= 0 {
		s.payTimeout = 15 * time.Minute
	}
	if s.currency != "" && !seckill.ValidCurrency(s.currency) {
		return fmt.Errorf("httpapi: Config.Currency %q is not an ISO 4217 code", s.currency)
	}
	if s.preheater == nil {
		s.preheater = cfg.Stock
	}
	s.admin = newStaticToken(cfg.AdminToken)
	s.metricsToken = newStaticToken(cfg.MetricsToken)
	if s.now == nil {
		s.now, s.wallClock = time.Now, true
	}
	if s.budget <= 0 {
		s.budget = DefaultBudget
	}
	for name, d := range s.routeBudgets {
		if d <= 0 || !slices.Contains(RouteNames(), name) {
			return fmt.Errorf("httpapi: route budget %s=%s: want a known route and a positive duration", name, d)
		}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// registry returns where the API's collectors go, and sets s.gatherer to
// what /metrics serves: a registry of its own when cfg names neither.
func (s *Server) registry(cfg Config) prometheus.Registerer {
	reg := cfg.Registerer
	if reg == nil && s.gatherer == nil {
		r := prometheus.NewRegistry()
		reg, s.gatherer = r, r
	} else if reg == nil {
		reg = prometheus.NewRegistry() // collectors go nowhere visible, but work
	} else if s.gatherer == nil {
		if g, ok := reg.(prometheus.Gatherer); ok {
			s.gatherer = g
		} else {
			s.gatherer = prometheus.NewRegistry()
		}
	}
	return reg
}

// registerMetrics registers the collectors of the routes s serves.
func (s *Server) registerMetrics(cfg Config, reg prometheus.Registerer) error {
	var err error
	if s.metrics, err = newMetrics(reg); err != nil {
		return err
	}
	if s.guard, err = newGuard(cfg, reg, s.logger, s.now); err != nil {
		return err
	}
	if s.sigGate, err = newSigGate(cfg.BadSignatureLimit, s.guard.trusted, reg); err != nil {
		return fmt.Errorf("httpapi: Config.BadSignatureLimit: %w", err)
	}
	if s.readGate, err = newReadGate(cfg.BuyerReadLimit, reg); err != nil {
		return fmt.Errorf("httpapi: Config.BuyerReadLimit: %w", err)
	}
	if s.orders != nil {
		if s.resMetrics, err = newReservationMetrics(reg); err != nil {
			return err
		}
	}
	if s.pay.store != nil && s.orders != nil {
		if s.pay.metrics, err = newPaymentMetrics(reg); err != nil {
			return err
		}
	}
	s.adminMetrics, err = newAdminMetrics(reg)
	return err
}

// admissionModes takes the lottery's and the queue's ports, when cfg has
// them, and registers their collectors.
func (s *Server) admissionModes(cfg Config, reg prometheus.Registerer) error {
	var err error
	if cfg.Lottery != nil {
		if cfg.Lottery.Enterer == nil || cfg.Lottery.Store == nil || cfg.Lottery.Draws == nil {
			return errors.New("httpapi: Lottery needs Enterer, Store and Draws")
		}
		s.lottery = *cfg.Lottery
		if s.lotteryMetrics, err = newLotteryMetrics(reg); err != nil {
			return err
		}
	}
	if cfg.Queue != nil {
		q := *cfg.Queue
		if q.Queuer == nil || q.Positions == nil || q.Tickets == nil || q.Admitted == nil {
			return errors.New("httpapi: Queue needs Queuer, Positions, Tickets and Admitted")
		}
		if q.OpensBefore <= 0 {
			q.OpensBefore = seckill.DefaultQueueOpensBefore
		}
		if q.TicketTTL <= 0 {
			q.TicketTTL = ticket.DefaultTTL
		}
		s.queue = q
		s.liveStock = ttlcache.New[bool](8, 128)
		if s.queueMetrics, err = newQueueMetrics(reg); err != nil {
			return err
		}
	}
	return nil
}

// Handler returns the API's handler. In front of a mux of its own, wrap
// that one with Harden instead.
func (s *Server) Handler() http.Handler { return s.handler }

// handler is a route's handler. It returns the status it answered with,
// so the metrics need no wrapper around the ResponseWriter.
type handler func(w http.ResponseWriter, r *http.Request) int

// routes is the table of the API's routes: each port the Config gave adds
// its own. TestOpenAPIMatchesRoutes reads it against docs/openapi.yaml.
func (s *Server) routes() {
	routes := []route{
		{"POST", "/admin/v1/sales", s.handleCreateSale},
		{"GET", "/admin/v1/sales/{id}", s.handleAdminSale},
		{"POST", "/admin/v1/sales/{id}/preheat", s.handlePreheat},
		{"GET", "/api/v1/sales/{id}", s.handlePublicSale},
		{"POST", "/api/v1/sales/{id}/reservations", s.muxReserve},
		{"GET", "/metrics", s.handleMetrics()},
		{"GET", "/healthz", s.handleHealthz},
		{"GET", "/readyz", s.handleReadyz},
		{"GET", pprofPrefix, s.handlePprof},
		{"POST", pprofPrefix, s.handlePprof}, // symbol lookups
	}
	if s.orders != nil {
		routes = append(routes,
			route{"GET", "/api/v1/reservations/{id}", s.handleReservation},
			route{"POST", "/api/v1/reservations/{id}/cancel", s.handleCancel},
			route{"GET", "/admin/v1/failed-orders", s.handleFailedOrders},
			route{"GET", "/admin/v1/failed-orders/counts", s.handleFailedOrderCounts},
			route{"POST", "/admin/v1/restores", s.handleRestore},
		)
	}
	if s.orders != nil && s.pay.buyerPay {
		routes = append(routes, route{"POST", "/api/v1/reservations/{id}/pay", s.handlePay})
	}
	if s.orderList != nil {
		routes = append(routes, route{"GET", "/admin/v1/sales/{id}/orders", s.handleSaleOrders})
	}
	if s.orders != nil && s.pay.store != nil {
		routes = append(routes,
			route{"POST", "/webhooks/v1/payments", s.handlePaymentWebhook},
			route{"POST", "/admin/v1/orders/{order_id}/payments", s.handleServicePayment},
			route{"GET", "/admin/v1/payments", s.handlePayments},
		)
	}
	if s.restores != nil {
		routes = append(routes, route{"GET", "/admin/v1/restores", s.handleRestores})
	}
	if s.salesAdmin != nil {
		routes = append(routes,
			route{"GET", "/admin/v1/sales", s.handleListSales},
			route{"PATCH", "/admin/v1/sales/{id}", s.handleEditSale},
			route{"POST", "/admin/v1/sales/{id}/end", s.handleEndSale},
			route{"POST", "/admin/v1/sales/{id}/stock", s.handleAddStock},
			route{"GET", "/admin/v1/sales/{id}/audit", s.handleSaleAudit},
		)
	}
	if s.resolver != nil && s.orders != nil {
		routes = append(routes, route{"POST", "/admin/v1/failed-orders/{id}/resolve", s.handleResolveFailed})
	}
	if s.reconcile != nil {
		routes = append(routes, route{"GET", "/admin/v1/sales/{id}/reconciliation", s.handleReconciliation})
	}
	if s.orderEvents != nil {
		routes = append(routes,
			route{"GET", "/admin/v1/order-events", s.handleOrderEvents},
			route{"POST", "/admin/v1/order-events/{id}/redeliver", s.handleRedeliverOrderEvent},
		)
	}
	if s.buyerClaims != nil {
		routes = append(routes, route{"GET", "/api/v1/sales/{id}/reservations/mine", s.handleMyClaims})
	}
	if s.lottery.Enterer != nil {
		routes = append(routes,
			route{"POST", "/api/v1/sales/{id}/entries", s.handleEnter},
			route{"GET", "/api/v1/sales/{id}/entries/mine", s.handleMyEntry},
			route{"GET", "/api/v1/sales/{id}/draw", s.handleDraw},
			route{"GET", "/api/v1/sales/{id}/draw/entries", s.handleDrawEntries},
		)
	}
	if s.queue.Queuer != nil {
		routes = append(routes,
			route{"POST", "/api/v1/sales/{id}/queue", s.handleJoinQueue},
			route{"GET", "/api/v1/sales/{id}/queue/mine", s.handleMyQueue},
		)
	}
	s.register(routes)
}

// route is one (method, path) the API serves.
type route struct {
	method, path string
	h            handler
}

// register puts routes on the mux, each instrumented, and answers the
// rest in the API's error shape: 405 for a known path, 404 otherwise.
func (s *Server) register(routes []route) {
	allowed := map[string][]string{}
	var paths []string
	for _, rt := range routes {
		pattern := rt.method + " " + rt.path
		var h http.Handler
		if pattern == reservePattern {
			// Instrumented by serveReserve, as the hot route in front
			// of the mux is.
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.muxReserve(w, r) })
		} else {
			h = s.instrument(pattern, rt.h)
		}
		switch pattern {
		case enterPattern:
			s.fronted.enter = h
		case joinPattern:
			s.fronted.join = h
		}
		s.mux.Handle(pattern, h)
		if allowed[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		allowed[rt.path] = append(allowed[rt.path], rt.method)
		if rt.method == "GET" {
			allowed[rt.path] = append(allowed[rt.path], "HEAD")
		}
	}
	// The same paths without a method answer 405 in the API's error shape
	// (the mux's own 405 and 404 are plain text).
	for _, p := range paths {
		allow := strings.Join(allowed[p], ", ")
		s.mux.Handle(p, s.instrument(p, func(w http.ResponseWriter, _ *http.Request) int {
			w.Header().Set("Allow", allow)
			return errMethodNotAllow.write(w)
		}))
	}
	s.mux.Handle("/", s.instrument("unmatched", func(w http.ResponseWriter, _ *http.Request) int {
		return errRouteNotFound.write(w)
	}))
}

// instrument bounds the route's requests by its budget, counts its
// answers by status and recovers a panic into a 500 in the API's shape.
func (s *Server) instrument(route string, h handler) http.Handler {
	return s.instrumentWith(s.metrics.route(route), route, h)
}

func (s *Server) instrumentWith(rm *routeMetrics, route string, h handler) http.Handler {
	budget := s.budgetOf(route)
	long := budget > longBudget
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		status := 0
		if long {
			// Best effort: a writer without deadlines keeps its own.
			_ = http.NewResponseController(w).SetWriteDeadline(start.Add(budget + writeMargin))
		}
		if budget > 0 {
			ctx, cancel := withBudget(r.Context(), start, budget)
			defer cancel()
			r = r.WithContext(ctx)
		}
		defer s.settle(rm, route, w, r, start, &status)
		status = h(w, r)
	})
}

// settle, deferred by a route's instrumentation, recovers a panic of its
// handler into a 500 in the API's shape and counts the answer.
func (s *Server) settle(rm *routeMetrics, route string, w http.ResponseWriter, r *http.Request, start time.Time, status *int) {
	if p := recover(); p != nil {
		if p == http.ErrAbortHandler {
			panic(p)
		}
		s.logger.ErrorContext(r.Context(), "http handler panic",
			"method", r.Method, "route", route, "panic", p, "stack", string(debug.Stack()))
		// Best effort: if the handler already wrote, this is a no-op.
		*status = errInternalGeneric.write(w)
	}
	rm.observe(*status, start)
}

func asVerifierAt(v TokenVerifier) verifierAt {
	va, _ := v.(verifierAt)
	return va
}

func asKnownTokens(v TokenVerifier) knownTokens {
	k, _ := v.(knownTokens)
	return k
}

// soldOutFlag is r's way to answer a flagged sale before the request is
// decoded, if it has one (soldout.Gate does), asked with the time the
// request read from the wall clock: a Reserver that can take it
// (AnswerSoldOutAt) reads the clock no second time.
func soldOutFlag(r seckill.Reserver) func(saleID string, now time.Time) bool {
	switch f := r.(type) {
	case interface {
		AnswerSoldOutAt(saleID string, now time.Time) bool
	}:
		return f.AnswerSoldOutAt
	case interface{ AnswerSoldOut(saleID string) bool }:
		return func(saleID string, _ time.Time) bool { return f.AnswerSoldOut(saleID) }
	}
	return nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(r *http.Request) (string, bool) {
	// The key is canonical already: Get would check that on every call.
	vals := r.Header["Authorization"]
	if len(vals) == 0 {
		return "", false
	}
	h := vals[0]
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimLeft(h[len(prefix):], " ")
	return tok, tok != ""
}

// buyer returns the user id of the request's buyer token.
func (s *Server) buyer(r *http.Request) (string, error) { return s.buyerAt(r, time.Time{}) }

// verifierAt is a TokenVerifier that can take the time from its caller
// (jwt.Verifier's VerifyAt), so that a request reads the clock once.
type verifierAt interface {
	VerifyAt(token string, now time.Time) (userID string, err error)
}

// buyerAt is buyer for a request that read the clock at now; the zero now
// leaves the time to the verifier.
func (s *Server) buyerAt(r *http.Request, now time.Time) (string, error) {
	tok, ok := bearerToken(r)
	if !ok {
		return "", errNoBuyerToken
	}
	return s.verifyBuyer(r, tok, now)
}

// VerifyBuyer checks a buyer token that came with r otherwise than as its
// bearer token (the buyer page's session cookie, its sign-in form), as the
// API checks its own: under the bound on forged tokens of r's address
// (Config.BadSignatureLimit).
func (s *Server) VerifyBuyer(r *http.Request, token string) (string, error) {
	return s.verifyBuyer(r, token, time.Time{})
}

// verifyBuyer is buyerAt for token.
func (s *Server) verifyBuyer(r *http.Request, tok string, now time.Time) (string, error) {
	g, gateNow := s.sigGate, now
	if g != nil {
		if gateNow.IsZero() {
			gateNow = s.now()
			if s.wallClock {
				now = gateNow // the verifier's clock too: one read
			}
		}
		if retry, refusing := g.refusing(r, gateNow); refusing {
			// Only a token this node verified before passes: it costs
			// no signature check.
			if s.known != nil {
				if uid, ok := s.known.Known(tok, gateNow); ok && seckill.ValidUserID(uid) {
					return uid, nil
				}
			}
			return "", g.refuse(retry)
		}
	}
	var (
		uid string
		err error
	)
	if s.verifierAt != nil && !now.IsZero() {
		uid, err = s.verifierAt.VerifyAt(tok, now)
	} else {
		uid, err = s.verifier.Verify(tok)
	}
	if err != nil {
		if g != nil && errors.Is(err, seckill.ErrBadSignature) {
			g.failed(r, gateNow)
		}
		if seckill.ErrorCode(err) != seckill.EUNAUTHORIZED {
			return "", errInvalidToken
		}
		return "", err
	}
	if !seckill.ValidUserID(uid) { // a verifier other than ours may be laxer
		return "", errInvalidToken
	}
	return uid, nil
}

var (
	errNoBuyerToken = seckill.Errorf(seckill.EUNAUTHORIZED, "A buyer token is required (Authorization: Bearer TOKEN).")
	errInvalidToken = seckill.Errorf(seckill.EUNAUTHORIZED, "Invalid token.")
)

// isAdmin reports whether the request carries the admin token. A buyer
// JWT never matches: it is compared as an opaque string, like any other.
func (s *Server) isAdmin(r *http.Request) bool { return s.admin.carriedBy(r) }

var jsonContentType = []string{"application/json"}

// writeBody writes a JSON body with status.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	writeBodyTo(w, w.Header(), status, body)
}

// writeBodyTo is writeBody for a caller that holds w.Header() already.
func writeBodyTo(w http.ResponseWriter, h http.Header, status int, body []byte) {
	// One shared value, not a slice per answer; nothing appends to it in
	// place (a full slice is copied by append).
	h["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body) // a failed write means the client is gone
}

// writeJSON marshals v and writes it with status.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) int {
	body, err := json.Marshal(v)
	if err != nil {
		return s.writeError(w, r, err)
	}
	body = append(body, '\n')
	writeBody(w, status, body)
	return status
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) int {
	writeBody(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	return http.StatusOK
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) int {
	if s.ready != nil && s.ready.state(r.Context()) != nil {
		return errNotReady.write(w)
	}
	writeBody(w, http.StatusOK, []byte(`{"status":"ready"}`+"\n"))
	return http.StatusOK
}

func (s *Server) handleMetrics() handler {
	h := promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(s.logger.Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	})
	return func(w http.ResponseWriter, r *http.Request) int {
		if s.metricsToken.set && !s.metricsToken.carriedBy(r) {
			return errMetricsAuth.write(w)
		}
		// promhttp writes 200 unless the whole gather fails; record what
		// it actually sent.
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		return sw.status
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
