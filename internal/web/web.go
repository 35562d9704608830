// Package web owns the pages people use: the buyer's page of a sale
// (/sales/{id}), the operators' control room (/admin) and the static
// assets both load, embedded in the binary so the engine serves them with
// no build step and no network beyond itself. It also owns the few
// endpoints only those pages need: the server's clock (/api/v1/time), the
// control room's live feed (server-sent events, authenticated by a short
// signed ticket) and, in demos only, a sign-in that mints buyer tokens.
//
// The pages speak the public JSON API of internal/httpapi from the
// browser; this package does not import it. Both are mounted on one mux by
// cmd/seckill (see Handler.Routes).
package web

import (
	"context"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
)

// SaleLookup reads one sale; seckill.ErrNotFound when there is none.
type SaleLookup interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
}

// StockReader reads a sale's live stock; seckill.ErrNotFound when the sale
// is not preheated.
type StockReader interface {
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
}

// TokenVerifier verifies a buyer token and names its buyer
// (internal/jwt.Verifier, as the API uses).
type TokenVerifier interface {
	Verify(token string) (userID string, err error)
}

// NA marks a Snapshot count that is not available (shown as "n/a").
const NA int64 = -1

// Snapshot is what the control room shows of one sale's pipeline beyond its
// stock, which the handler reads from Config.Stock itself. Counts that the
// wiring cannot know are NA (any negative value), never a made-up 0.
type Snapshot struct {
	// Reservations are the answers of the reservation route so far, by
	// outcome label ("reserved", "replayed", "sold_out", "limit_exceeded",
	// "rate_limited", "overloaded", …): cumulative counters, as Prometheus
	// keeps them. The control room charts their rate per second.
	Reservations map[string]int64
	// ReservationsNodeWide says the counts above are this node's for all
	// sales together (seckill_reservations_total has no sale label), so
	// the control room labels them as such.
	ReservationsNodeWide bool
	// OutboxLen is the number of reservations in the outbox, not yet
	// relayed (the stock store's OutboxLen): the outbox lag.
	OutboxLen int64
	// BrokerBacklog is the number of messages waiting in the broker, NA
	// when the broker cannot tell.
	BrokerBacklog int64
	// OrdersPersisted is the number of this sale's orders in the database.
	OrdersPersisted int64
	// FailedOrders is the number of this sale's failed orders.
	FailedOrders int64
	// ParkedRestores is the number of this sale's restore requests still
	// parked (waiting for their order to land).
	ParkedRestores int64
	// Reconciliation is the last reconciliation of the sale.
	Reconciliation Reconciliation
}

// Reconciliation is the state of a sale's last reconciliation.
type Reconciliation struct {
	// State is "balanced" (nothing oversold, nothing unexplained),
	// "unbalanced" (discrepancies to look at) or "oversold"; empty when the
	// sale has not been reconciled.
	State     string
	Oversold  int64
	Undersold int64
	CheckedAt time.Time
}

// AdmissionSnapshot is what the control room shows of a lottery's or a
// queue's admission. Counts the wiring cannot know are NA.
type AdmissionSnapshot struct {
	// Lottery.
	Entrants   int64
	Commitment string
	// Seed, DrawnAt and the rest below are set once drawn.
	Seed    string
	DrawnAt time.Time
	// Winners counts the draw's winners; WinnerIDs are the first of their
	// entry ids, in draw order.
	Winners   int64
	WinnerIDs []string
	// Promoted counts the waiting-list entrants given a unit since the
	// draw (a winner did not pay).
	Promoted int64
	// Waiting counts the waiting list; NextWaiting are the first of its
	// entry ids, in draw order: the next to be given a unit that comes back.
	Waiting     int64
	NextWaiting []string

	// Queue.
	// AdmitRate is the rate positions are admitted at now, a second
	// (an adaptive queue's follows the engine's latency); 0: unknown.
	AdmitRate   int64
	QueueLength int64
	// Admitted is how many places have been admitted so far (at most the
	// queue's length).
	Admitted int64
	// TicketsIssued counts admission tickets issued, cumulative, on this
	// node for all sales together (TicketsNodeWide).
	TicketsIssued   int64
	TicketsNodeWide bool
}

// EmptySnapshot is a Snapshot with every count NA.
func EmptySnapshot() Snapshot {
	return Snapshot{OutboxLen: NA, BrokerBacklog: NA, OrdersPersisted: NA, FailedOrders: NA, ParkedRestores: NA}
}

// Defaults of Config. The event interval keeps what the control room
// shows at most about half a second behind the engine.
const (
	DefaultTicketTTL     = 30 * time.Second
	DefaultEventInterval = 500 * time.Millisecond
	// DefaultBuyerEventInterval: a buyer's standing is read as often as
	// the page would poll it.
	DefaultBuyerEventInterval = 2 * time.Second
	DefaultHistoryWindow      = 5 * time.Minute
	// DefaultSnapshotTimeout bounds one Snapshot or Stock call made for
	// the live feed.
	DefaultSnapshotTimeout = 2 * time.Second
	// DefaultBudget bounds a page request's backend calls.
	DefaultBudget = 2 * time.Second
)

// Config holds the Handler's dependencies. Sales and Stock are required.
type Config struct {
	Sales SaleLookup
	Stock StockReader
	// Snapshot reads the rest of a sale's pipeline for the control room.
	// It is called about once per EventInterval per watched sale, however
	// many operators watch (and not at all while nobody does), so anything
	// slower than that (reconciliation, counting rows) the wiring should
	// cache. Nil: every count shows "n/a".
	Snapshot func(ctx context.Context, saleID string) (Snapshot, error)
	// Admission reads a lottery's or a queue's admission for the control
	// room (called like Snapshot, for those sales only). Nil: not shown.
	Admission func(ctx context.Context, sale *seckill.Sale) (AdmissionSnapshot, error)
	// AdminToken is the operators' token, the same one the API checks.
	// It signs the live feed's tickets. Empty: no tickets are issued.
	AdminToken string
	// DemoLogin, when set, enables POST /demo/v1/login, which turns a
	// name into a buyer token, and the name box on the buyer page. Nil in
	// production: the route does not exist.
	DemoLogin func(name string) (token string, err error)
	// BuyerPay shows the demo's local Pay button on the buyer page (the
	// API serves the buyer's own pay only in a demo: --buyer-pay on).
	// Otherwise the page links to the shop's payment page, when the
	// order carries one (pay_url), and waits for the shop's confirmation.
	BuyerPay bool
	// ShopSignIn is the shop's page that signs a buyer in and sends them
	// back to the buyer page as <return_to>#token=…&state=<state>, both
	// from its query (the handover). When set, the page offers it and
	// takes a #token= only with the state it sent, kept in the tab, so a
	// link somebody else made cannot sign a buyer in as them (a login
	// CSRF). Empty: a #token= is taken as it comes.
	ShopSignIn string
	// Currency is the ISO 4217 code prices are shown in; empty shows a
	// plain number.
	Currency string
	// API is the JSON API (internal/httpapi's handler). With Buyers, it
	// enables buyer sessions on the pages: the page of a lottery or queue
	// sale shows the buyer's standing, its forms enter and join without a
	// script, and the buyer feed keeps it live. The pages call it
	// in-process with the buyer's token. Nil: those pages show the mode
	// only.
	API http.Handler
	// Buyers verifies buyer tokens, as the API does.
	Buyers TokenVerifier
	// VerifyBuyer, if set, checks the tokens a browser sends (its session
	// cookie, a sign-in) instead of Buyers, with the request: the API's own
	// check (httpapi.Server.VerifyBuyer), under its bound on forged tokens
	// per address.
	VerifyBuyer func(r *http.Request, token string) (userID string, err error)
	// QueueOpensBefore is the API's --queue-opens-before. Default
	// seckill.DefaultQueueOpensBefore.
	QueueOpensBefore time.Duration
	// BuyerEventInterval is how often the buyer feed reads a buyer's
	// standing. Default DefaultBuyerEventInterval.
	BuyerEventInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives internal errors only. Default: discard.
	Logger *slog.Logger
	// Budget bounds the backend calls of one page request (the buyer
	// page reads the sale and its stock). Default DefaultBudget.
	Budget time.Duration
	// OnDegraded, if set, is told of every answer degraded by a backend
	// outage, with its route pattern and "unavailable" (the API's
	// seckill_http_degraded_total counts them with its own).
	OnDegraded func(route, reason string)

	// TicketTTL is how long a live-feed ticket is valid. Default
	// DefaultTicketTTL.
	TicketTTL time.Duration
	// EventInterval is how often the live feed samples and sends.
	// Default DefaultEventInterval.
	EventInterval time.Duration
	// HistoryWindow is how far back the charts go. Default
	// DefaultHistoryWindow.
	HistoryWindow time.Duration
}

// Handler serves the pages, the assets and their endpoints. Build it with
// New and mount it with Routes.
type Handler struct {
	sales     SaleLookup
	stock     StockReader
	snapshot  func(ctx context.Context, saleID string) (Snapshot, error)
	admission func(ctx context.Context, sale *seckill.Sale) (AdmissionSnapshot, error)
	tickets   *ticketSigner // nil: admin token not set
	demoLogin func(name string) (string, error)
	buyerPay  bool
	signIn    string // Config.ShopSignIn
	currency  string
	now       func() time.Time
	logger    *slog.Logger
	interval  time.Duration
	budget    time.Duration
	degraded  func(route, reason string)
	series    *seriesSet
	pages     *template.Template
	assets    map[string]*asset // by path under /static/
	mux       *http.ServeMux

	api              http.Handler  // nil: no buyer sessions
	buyers           TokenVerifier // nil: no buyer sessions
	verifyBuyer      func(r *http.Request, token string) (string, error)
	queueOpensBefore time.Duration
	buyerInterval    time.Duration
	origins          *http.CrossOriginProtection
	feeds            feedCounts // open buyer feeds, by buyer

	closeOnce sync.Once
	closed    chan struct{} // closed by CloseStreams: ends every live feed
}

// New checks cfg and builds the Handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Sales == nil:
		return nil, errors.New("web: Config.Sales is required")
	case cfg.Stock == nil:
		return nil, errors.New("web: Config.Stock is required")
	}
	h := &Handler{
		sales:     cfg.Sales,
		stock:     cfg.Stock,
		snapshot:  cfg.Snapshot,
		admission: cfg.Admission,
		demoLogin: cfg.DemoLogin,
		buyerPay:  cfg.BuyerPay,
		signIn:    cfg.ShopSignIn,
		currency:  cfg.Currency,
		now:       cfg.Now,
		logger:    cfg.Logger,
		interval:  cfg.EventInterval,
		budget:    cfg.Budget,
		degraded:  cfg.OnDegraded,
		closed:    make(chan struct{}),

		queueOpensBefore: cfg.QueueOpensBefore,
		buyerInterval:    cfg.BuyerEventInterval,
		origins:          http.NewCrossOriginProtection(),
	}
	if cfg.API != nil && cfg.Buyers != nil {
		h.api, h.buyers, h.verifyBuyer = cfg.API, cfg.Buyers, cfg.VerifyBuyer
	}
	if h.queueOpensBefore <= 0 {
		h.queueOpensBefore = seckill.DefaultQueueOpensBefore
	}
	if h.buyerInterval <= 0 {
		h.buyerInterval = DefaultBuyerEventInterval
	}
	if h.budget <= 0 {
		h.budget = DefaultBudget
	}
	if h.degraded == nil {
		h.degraded = func(string, string) {}
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.interval <= 0 {
		h.interval = DefaultEventInterval
	}
	ttl := cfg.TicketTTL
	if ttl <= 0 {
		ttl = DefaultTicketTTL
	}
	if cfg.AdminToken != "" {
		h.tickets = newTicketSigner(cfg.AdminToken, ttl)
	}
	window := cfg.HistoryWindow
	if window <= 0 {
		window = DefaultHistoryWindow
	}
	h.series = newSeriesSet(window, h.interval)

	var err error
	if h.pages, err = template.ParseFS(templateFS, "templates/*.html"); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	if h.assets, err = loadAssets(static); err != nil {
		return nil, err
	}
	h.mux = http.NewServeMux()
	h.Routes(h.mux)
	return h, nil
}

// Routes registers the Handler's routes on mux. None collides with the
// API's (internal/httpapi): those are /api/v1/sales/…,
// /api/v1/reservations/…, the other /admin/v1/… paths, /metrics, /healthz
// and /readyz. The API's catch-all "/" may stay on the same mux: these
// patterns are more specific, so they win.
//
//	GET  /{$}                          landing page
//	GET  /sales?id=…                   redirects to /sales/{id}
//	GET  /sales/{id}                   the buyer's page
//	GET  /admin                        the control room
//	GET  /static/…                     embedded assets
//	GET  /api/v1/time                  the server's clock
//	POST /admin/v1/sse-ticket          a live-feed ticket (admin token)
//	GET  /admin/v1/sales/{id}/events   the live feed (?ticket=)
//	POST /demo/v1/login                only when Config.DemoLogin is set
//
// With buyer sessions (Config.API and Config.Buyers):
//
//	POST /sales/{id}/session           sign in (form: token, or name in a demo)
//	POST /sales/{id}/session/end       sign out
//	POST /sales/{id}/enter             enter a lottery (form)
//	POST /sales/{id}/join              join a queue (form)
//	GET  /sales/{id}/events            the buyer's standing, live
//	GET  /sales/{id}/standing          the buyer's standing, once (JSON)
func (h *Handler) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", h.handleIndex)
	mux.HandleFunc("GET /sales", h.handleOpenSale)
	mux.HandleFunc("GET /sales/{id}", h.handleBuyerPage)
	mux.HandleFunc("GET /admin", h.handleAdminPage)
	mux.HandleFunc("GET /admin/{$}", redirectTo("/admin"))
	mux.HandleFunc("GET /static/", h.handleStatic)
	mux.HandleFunc("GET /api/v1/time", h.handleTime)
	mux.HandleFunc("POST /admin/v1/sse-ticket", h.handleTicket)
	mux.HandleFunc("GET /admin/v1/sales/{id}/events", h.handleEvents)
	if h.demoLogin != nil {
		mux.HandleFunc("POST /demo/v1/login", h.handleDemoLogin)
	}
	if h.api != nil {
		mux.HandleFunc("POST /sales/{id}/session", h.handleSignIn)
		mux.HandleFunc("POST /sales/{id}/session/end", h.handleSignOut)
		mux.HandleFunc("POST /sales/{id}/enter", h.handleEnter)
		mux.HandleFunc("POST /sales/{id}/join", h.handleJoin)
		mux.HandleFunc("POST /sales/{id}/buy", h.handleBuy)
		mux.HandleFunc("POST /sales/{id}/pay", h.handlePay)
		mux.HandleFunc("GET /sales/{id}/events", h.handleBuyerEvents)
		mux.HandleFunc("GET /sales/{id}/standing", h.handleStanding)
	}
}

// ServeHTTP serves the Handler's routes alone (404 for anything else).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// CloseStreams ends every open live feed, now and later. An event stream
// never goes idle, so http.Server.Shutdown would wait for it until its
// timeout: register this with Server.RegisterOnShutdown. Safe to call
// twice.
func (h *Handler) CloseStreams() {
	h.closeOnce.Do(func() { close(h.closed) })
}
