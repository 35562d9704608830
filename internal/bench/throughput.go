package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/redact"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/strategies"
)

// ThroughputOptions are the settings of the throughput benchmarks.
type ThroughputOptions struct {
	Duration    time.Duration
	Warmup      time.Duration
	Concurrency int
	Rate        int
	Users       int
	Clients     int
	Rounds      int
	RedisURL    string
	DatabaseURL string
	BrokerURL   string
	// RateLimitIP and RateLimitUser configure the engines' limits: on by
	// default, high enough that every request is allowed, so that each one
	// pays for the limiter (the buyers come from Clients addresses through
	// a trusted proxy's X-Forwarded-For, so the limiter, not the local
	// block list, decides).
	RateLimitIP   string
	RateLimitUser string
	// CPUProfile, if set, is the file a CPU profile of the server side
	// (this process: engines and baselines) is written to.
	CPUProfile string
}

// Validate refuses settings no benchmark can run with.
func (o ThroughputOptions) Validate() error {
	switch {
	case o.Duration <= 0 || o.Warmup < 0:
		return errors.New("--duration must be positive and --warmup not negative")
	case o.Concurrency < 1 || o.Users < 1 || o.Rounds < 1 || o.Rate < 0 || o.Clients < 0:
		return errors.New("--concurrency, --users and --rounds must be at least 1, --rate and --clients not negative")
	}
	return nil
}

// DefaultThroughputOptions are the flags' defaults.
func DefaultThroughputOptions() ThroughputOptions {
	return ThroughputOptions{Duration: 5 * time.Second, Warmup: time.Second, Concurrency: 64, Users: 10_000, Rounds: 1,
		RateLimitIP: "100000/1m", RateLimitUser: "100000/1m"}
}

// Cases are the throughput benchmarks, in the order of a round, with what
// each is.
var Cases = []struct{ Name, What string }{
	{"hello", "bare net/http handler: GET, writes 6 bytes (the machine's HTTP ceiling)"},
	{"hello-post", "bare handler, the shape of a reservation: POST with the JWT, X-Forwarded-For and body, reads the body, answers the sold-out 409 JSON"},
	{"textbook", "bare handler, one EVALSHA of a plain reserve script per request: no auth, no limit, no outbox"},
	{"live", "POST reservations through the full API: JWT, both rate limits, combiner, reserve script with outbox; relay, broker and order writer running"},
	{"live-nolimit", "live with the rate limits off"},
	{"live-nopipe", "live with no relay and no order writer (the outbox fills): what the pipeline costs"},
	{"soldout", "POST reservations on a sold-out sale through the full API, rate limits on (409 sold_out)"},
	{"soldout-nolimit", "soldout with the rate limits off"},
	{"entries", "POST entries of a lottery sale through the full API, every buyer having entered once before the first round: each a repeat, answered from the node's memory before the rate limits (JWT, sale cache, body)"},
	{"entries-new", "POST entries of a lottery sale through the full API, every one a new buyer's: JWT, sale cache, both rate limits, batched entry script"},
	{"entries-new-nolimit", "entries-new with the rate limits off: what the limits cost a new entry"},
	{"queue", "POST joins of a started queue sale's waiting room through the full API, every buyer having joined once before the first round: each a repeat, its final place answered from memory (JWT, sale cache, the live stock read for sold out)"},
	{"queue-new", "POST joins of a queue sale's waiting room while it is open before the start (a stampede's first joins, each given a random place), through the full API, every one a new buyer's: JWT, sale cache, both rate limits, the per-address cap, batched join script"},
}

// sets are the benchmarks each subcommand runs.
var sets = map[string][]string{
	"hello":    {"hello", "hello-post"},
	"textbook": {"hello", "hello-post", "textbook"},
	"live":     {"hello", "hello-post", "textbook", "live", "live-nolimit", "live-nopipe"},
	"soldout":  {"hello", "hello-post", "textbook", "soldout", "soldout-nolimit"},
	"all":      {"hello", "hello-post", "textbook", "live", "live-nolimit", "live-nopipe", "soldout", "soldout-nolimit"},
	"entries":  {"hello", "hello-post", "soldout", "textbook", "entries", "entries-new", "entries-new-nolimit", "queue", "queue-new"},
}

// goals are the ratios the report states, with the targets of issue 12
// where it sets one.
var goals = []struct {
	of, base string
	target   float64
}{
	{"hello-post", "hello", 0},
	{"textbook", "hello", 0},
	{"live", "textbook", 0.8},
	{"live", "live-nopipe", 0.8},
	{"live", "live-nolimit", 0.9},
	{"soldout", "hello-post", 0.9},
	{"soldout", "soldout-nolimit", 0.9},
	{"entries", "soldout", 0.9}, // issue 29: an entry or a queue join costs no more than a sold-out answer
	{"entries-new", "soldout", 0.9},
	{"queue-new", "soldout", 0.9},
	{"entries-new", "entries-new-nolimit", 0},
	// The floor of anything that writes Redis before it answers: a bare
	// handler making one script call is this much of the sold-out answer,
	// which makes none. A first entry must write its entry.
	{"textbook", "soldout", 0},
	{"entries-new", "textbook", 0},
	{"queue", "soldout", 0.9},
}

// persistedGoals hold a benchmark whose pipeline runs to a baseline by
// claims persisted per second (at least rate times the baseline's req/s)
// and by the CPU of every process per claim (at most cpu times the
// baseline's): the targets of issue 31.
var persistedGoals = []struct {
	of, base  string
	rate, cpu float64
}{
	{"live", "textbook", 0.7, 1.5},
	{"live-nolimit", "textbook", 0, 0},
}

// Names are the benchmarks of subcommand set, or the comma-separated only
// instead when it is not empty.
func Names(set, only string) ([]string, error) {
	if only == "" {
		return sets[set], nil
	}
	names := strings.Split(only, ",")
	for _, n := range names {
		if !slices.ContainsFunc(Cases, func(c struct{ Name, What string }) bool { return c.Name == n }) {
			return nil, fmt.Errorf("--only: unknown benchmark %q", n)
		}
	}
	return names, nil
}

// EngineConfig is what a benchmark asks of a full engine.
type EngineConfig struct {
	DataDir                          string
	RedisURL, DatabaseURL, BrokerURL string
	RateLimitIP, RateLimitUser       string
	TrustedProxies                   string
	QueuePerIP                       int // places an address may hold in a waiting room (0: no cap)
	// RedisKeyPrefix, BrokerQueue and Namespace are the engine's own: no
	// other node's relay or writer sees its sales.
	RedisKeyPrefix, BrokerQueue, Namespace string
	JWTSecret, AdminToken                  string
	// APIOnly runs no relay and no order writer: the outbox fills.
	APIOnly bool
}

// Engine is a running engine, serving its API on Addr until closed.
type Engine interface {
	Addr() string
	Close(ctx context.Context) error
	// Unsettled counts the claims it has taken that its pipeline has not
	// yet put in the database (in the outboxes and the broker).
	Unsettled(ctx context.Context) (int64, error)
}

// Wiring is what the harness needs of the command that runs it.
type Wiring struct {
	// StartEngine runs a full engine (the one `seckill serve` runs).
	StartEngine func(ctx context.Context, c EngineConfig) (Engine, error)
	// Server is the engine's HTTP server around h, so that the baselines
	// are served with the same settings and compared alike.
	Server func(h http.Handler) *http.Server
}

// Throughput runs the benchmarks names in o.Rounds interleaved rounds,
// writing progress to stderr, and reports every ratio of a round.
func Throughput(ctx context.Context, names []string, o ThroughputOptions, wire Wiring, stderr io.Writer) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Clients == 0 {
		o.Clients = o.Users
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	b := &throughputBench{o: o, wire: wire, stderr: stderr, engines: map[string]*benchEngine{}, secret: randomHex(24)}
	if ps := serverProcesses(o.DatabaseURL); len(ps) > 0 {
		b.samplers.Database = ProcessCPU(ps...)
	}
	if ps := serverProcesses(o.BrokerURL); len(ps) > 0 {
		b.samplers.Broker = ProcessCPU(ps...)
	}
	defer b.close()
	if hasDatabaseServer(o.DatabaseURL) {
		// What runs killed before their cleanup left: a bench run lasts
		// minutes, so one six hours old is not running any more.
		if _, err := sqlstore.DropScratches(ctx, o.DatabaseURL, scratchPrefix, time.Now().Add(-6*time.Hour)); err != nil {
			return nil, err
		}
	}
	if err := b.openRedis(ctx); err != nil {
		return nil, err
	}
	mode := "closed loop"
	if o.Rate > 0 {
		mode = fmt.Sprintf("fixed rate %s/s, latency from the intended send time", loadgen.Thousands(int64(o.Rate)))
	}
	rep := &Report{
		Header: []string{
			fmt.Sprintf("seckill bench: %d connections from a separate load-generator process, %s, %s measured after %s warm-up, %d interleaved round(s); redis %s",
				o.Concurrency, mode, loadgen.FormatDuration(o.Duration), loadgen.FormatDuration(o.Warmup), o.Rounds, redact.URLOr(o.RedisURL, "embedded")),
			fmt.Sprintf("  engines: database %s, broker %s; rate limits ip %s, user %s; %s buyers from %s client addresses",
				redact.URLOr(o.DatabaseURL, "SQLite (temporary)"), redact.URLOr(o.BrokerURL, "embedded"), o.RateLimitIP, o.RateLimitUser,
				loadgen.Thousands(int64(o.Users)), loadgen.Thousands(int64(o.Clients))),
			"  CPU µs per request over the measured window (for an engine with a pipeline, until it has persisted the window's claims): server (this process, getrusage), load generator (its process, getrusage), Redis (INFO, the whole server: other clients count too), and for an engine with a pipeline its database and broker servers (/proc, every process of the name when on this machine: other clients count too); all = server + Redis + database + broker",
		},
		Descriptions: map[string]string{},
		Names:        names,
	}
	for _, c := range Cases {
		rep.Descriptions[c.Name] = c.What
	}
	// Rounds interleave the benchmarks, so that a noisy spell of the
	// shared machine hits them all alike rather than one of them; every
	// ratio is taken within a round.
	for round := range o.Rounds {
		var results []Result
		for _, name := range names {
			fmt.Fprintf(stderr, "bench %s (round %d of %d): %s after %s of warm-up…\n", name, round+1, o.Rounds, o.Duration, o.Warmup)
			load, err := b.run(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			results = append(results, Result{Name: name, Round: round + 1, Load: load})
		}
		rep.Add(results)
	}
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	if in["hello"] {
		for _, n := range names {
			if n != "hello" {
				rep.Compare(n, "hello", 0)
			}
		}
	}
	for _, g := range goals {
		if in[g.of] && in[g.base] && g.base != "hello" {
			rep.Compare(g.of, g.base, g.target)
		}
	}
	for _, g := range persistedGoals {
		if in[g.of] && in[g.base] {
			rep.ComparePersisted(g.of, g.base, g.rate, g.cpu)
		}
	}
	return rep, nil
}

// scratchPrefix names the databases the engines of a run get on a shared
// database server (sqlstore.Scratch).
const scratchPrefix = "skbench"

// hasDatabaseServer tells a MySQL/MariaDB or PostgreSQL URL from SQLite's
// (each engine has its own file in its data directory) or none.
func hasDatabaseServer(rawURL string) bool {
	scheme, _, _ := strings.Cut(strings.ToLower(rawURL), ":")
	return scheme == "mysql" || scheme == "postgres" || scheme == "postgresql"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// throughputBench holds what the throughput benchmarks of one run share:
// the Redis connection, the baseline servers and the engines, each
// started once.
type throughputBench struct {
	o      ThroughputOptions
	wire   Wiring
	stderr io.Writer
	// secret signs the buyers' tokens of every engine of a run alike, so
	// that each request is the same bytes whichever server it goes to.
	secret string

	redis    *strategies.Redis
	samplers Samplers                  // Redis's, the database's and the broker's CPU
	servers  map[string]loadgen.Target // hello, hello-post, textbook
	engines  map[string]*benchEngine   // "on", "nolimit", "nopipe"
	tokens   []string
	// freshTokens are entries-new's buyers, who enter nothing else.
	freshTokens []string
	primed      map[string]primedLoad // entries, queue: kept across rounds
	closers     []func()
}

// benchEngine is one full engine of the run.
type benchEngine struct {
	Engine
	cfg     EngineConfig
	dataDir string
	admin   *apiclient.Client
	// dropDB drops the engine's own database on a shared server, if it
	// has one.
	dropDB func(context.Context) error
}

func (b *throughputBench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, e := range b.engines {
		if err := e.Close(ctx); err != nil {
			fmt.Fprintf(b.stderr, "bench: stop engine: %v\n", err)
		}
		if b.redis != nil && !b.redis.Embedded() {
			if _, err := b.redis.DeletePrefix(ctx, e.cfg.RedisKeyPrefix); err != nil {
				fmt.Fprintf(b.stderr, "bench: clean up Redis: %v\n", err)
			}
		}
		e.admin.Close()
		os.RemoveAll(e.dataDir)
		if e.dropDB != nil {
			if err := e.dropDB(ctx); err != nil {
				fmt.Fprintf(b.stderr, "bench: clean up database: %v\n", err)
			}
		}
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

var (
	jsonContentType = loadgen.Header{Name: "Content-Type", Value: "application/json"}
	qtyOneBody      = []byte(`{"qty":1}`)
	helloBody       = []byte("hello\n")
	soldOutBody     = []byte(`{"error":{"code":"sold_out","message":"The sale is sold out."}}` + "\n")
)

// run measures one benchmark once.
func (b *throughputBench) run(ctx context.Context, name string) (Load, error) {
	var (
		t      loadgen.Target
		reqs   [][]byte
		want   int
		err    error
		settle Unsettled // the engine's, when its pipeline runs

		wantAlso int
		once     bool
	)
	switch name {
	case "hello":
		t, err = b.serveOnce(name, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(helloBody)
		}))
		reqs, want = [][]byte{t.AppendRequest(nil, "GET", "/", nil)}, http.StatusOK
	case "hello-post":
		t, err = b.serveOnce(name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write(soldOutBody)
		}))
		if err == nil {
			reqs, err = b.reservationRequests(t, "hello-sale")
		}
		want = http.StatusConflict
	case "textbook":
		t, err = b.textbookServer(ctx)
		reqs, want = [][]byte{t.AppendRequest(nil, "POST", "/reserve", qtyOneBody, jsonContentType)}, http.StatusOK
	case "live", "live-nolimit", "live-nopipe":
		kind := map[string]string{"live": "on", "live-nolimit": "nolimit", "live-nopipe": "nopipe"}[name]
		t, reqs, err = b.liveLoad(ctx, kind)
		want = http.StatusAccepted
		if kind != "nopipe" {
			settle = b.engines[kind].Unsettled
		}
	case "soldout", "soldout-nolimit":
		kind := map[string]string{"soldout": "on", "soldout-nolimit": "nolimit"}[name]
		t, reqs, err = b.soldOutLoad(ctx, kind)
		want = http.StatusConflict
	case "entries":
		t, reqs, err = b.entriesLoad(ctx, "on", false)
		want, wantAlso = http.StatusOK, http.StatusCreated
	case "entries-new", "entries-new-nolimit":
		kind := map[string]string{"entries-new": "on", "entries-new-nolimit": "nolimit"}[name]
		t, reqs, err = b.entriesLoad(ctx, kind, true)
		want = http.StatusCreated // a repeat (200) is unexpected: the run outgrew its buyers
		// A new entry is in the database before its answer (lottery.Book):
		// nothing is left to settle, and the database's CPU is the entry's.
		settle = keptByTheAnswer
	case "queue":
		t, reqs, err = b.queueLoad(ctx)
		want = http.StatusOK
	case "queue-new":
		t, reqs, err = b.queueNewLoad(ctx)
		settle = keptByTheAnswer // a new place is in the database before its answer
		// A repeated join answers 200 as a first one does: Once counts a
		// call past the last buyer unexpected instead.
		want, once = http.StatusOK, true
	default:
		return Load{}, fmt.Errorf("unknown benchmark %q", name)
	}
	if err != nil {
		return Load{}, err
	}
	return Measure(ctx, Spec{
		URL: "http://" + t.Addr, Requests: reqs, Want: want, WantAlso: wantAlso, Once: once, Concurrency: b.o.Concurrency, Rate: b.o.Rate,
		Warmup: b.o.Warmup, Duration: b.o.Duration,
	}, b.samplers, settle)
}

// keptByTheAnswer is the Unsettled of a benchmark whose every answer
// follows its write to the database (lottery.Book, waitroom.Book).
func keptByTheAnswer(context.Context) (int64, error) { return 0, nil }

// serveOnce serves h as the baseline name on a fresh local port, configured
// like the engine's server, until the bench closes.
func (b *throughputBench) serveOnce(name string, h http.Handler) (loadgen.Target, error) {
	if t, ok := b.servers[name]; ok {
		return t, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return loadgen.Target{}, err
	}
	srv := b.wire.Server(h)
	go func() { _ = srv.Serve(ln) }()
	b.closers = append(b.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	t, err := loadgen.ParseTarget("http://" + ln.Addr().String())
	if err != nil {
		return t, err
	}
	if b.servers == nil {
		b.servers = map[string]loadgen.Target{}
	}
	b.servers[name] = t
	return t, nil
}

func (b *throughputBench) openRedis(ctx context.Context) error {
	r, err := strategies.OpenRedis(ctx, b.o.RedisURL)
	if err != nil {
		return err
	}
	b.redis = r
	b.closers = append(b.closers, r.Close)
	if b.o.RedisURL != "" {
		// Redis's own CPU, from INFO: only a real server has one to show
		// (the embedded one runs in this process and counts as server).
		s, err := redis.New(ctx, b.o.RedisURL)
		if err != nil {
			return err
		}
		b.closers = append(b.closers, s.Close)
		b.samplers.Redis = s.ServerCPU
	}
	return nil
}

func (b *throughputBench) textbookServer(ctx context.Context) (loadgen.Target, error) {
	if t, ok := b.servers["textbook"]; ok {
		return t, nil
	}
	// Stock no run can exhaust: every request runs the whole script.
	s, err := b.redis.LuaPerRequest(ctx, 1_000_000_000_000)
	if err != nil {
		return loadgen.Target{}, err
	}
	b.closers = append(b.closers, func() { _ = s.Close(context.Background()) })
	return b.serveOnce("textbook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := s.Reserve(r.Context(), "")
		w.Header().Set("Content-Type", "application/json")
		switch {
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
		case ok:
			_, _ = w.Write([]byte(`{"reserved":true}` + "\n"))
		default:
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"reserved":false}` + "\n"))
		}
	}))
}

// engine starts (once) the full engine of kind: "on" (rate limits and
// pipeline), "nolimit" (no rate limits) or "nopipe" (no relay, no writer).
func (b *throughputBench) engine(ctx context.Context, kind string) (*benchEngine, error) {
	if e, ok := b.engines[kind]; ok {
		return e, nil
	}
	dir, err := os.MkdirTemp("", "seckill-bench-")
	if err != nil {
		return nil, err
	}
	cfg := EngineConfig{
		DataDir:  dir,
		RedisURL: b.o.RedisURL, DatabaseURL: b.o.DatabaseURL, BrokerURL: b.o.BrokerURL,
		RateLimitIP: b.o.RateLimitIP, RateLimitUser: b.o.RateLimitUser,
		TrustedProxies: "127.0.0.1/32", QueuePerIP: benchQueuePerIP,
		// Keys, queue and namespace of its own: no other node's relay or
		// writer sees its sales, and its keys are all deleted afterwards.
		RedisKeyPrefix: "skbench" + randomHex(6),
		BrokerQueue:    "seckill_bench_" + randomHex(6),
		JWTSecret:      b.secret, AdminToken: randomHex(24),
		APIOnly: kind == "nopipe",
	}
	cfg.Namespace = cfg.BrokerQueue
	if kind == "nolimit" {
		cfg.RateLimitIP, cfg.RateLimitUser = "off", "off"
	}
	// A database of its own on a shared server: an engine's heal watcher
	// takes every sale of its database for its own, and would heal the
	// other engines' sales into its key prefix (alerts and Redis writes
	// inside the measured window); and the run leaves no rows behind.
	var dropDB func(context.Context) error
	if hasDatabaseServer(cfg.DatabaseURL) {
		cfg.DatabaseURL, dropDB, err = sqlstore.Scratch(ctx, cfg.DatabaseURL, scratchPrefix, randomHex(4), time.Now())
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	eng, err := b.wire.StartEngine(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		if dropDB != nil {
			_ = dropDB(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	e := &benchEngine{Engine: eng, cfg: cfg, dataDir: dir, admin: apiclient.New("http://" + eng.Addr()), dropDB: dropDB}
	b.engines[kind] = e
	return e, nil
}

// liveSale creates a sale that is already on and preheats it.
func (e *benchEngine) liveSale(ctx context.Context, stock, limit int64) (string, error) {
	id := "bench-" + randomHex(6)
	now := time.Now()
	var body map[string]any
	st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales", e.cfg.AdminToken, map[string]any{
		"id": id, "name": "bench", "price_cents": 100, "stock": stock, "per_user_limit": limit,
		"start_at": now.Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).UTC().Format(time.RFC3339Nano),
	}, &body)
	if err != nil || st != http.StatusCreated {
		return "", fmt.Errorf("create sale: %d %v %v", st, body, err)
	}
	if st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales/"+id+"/preheat", e.cfg.AdminToken, nil, nil); err != nil || st != http.StatusOK {
		return "", fmt.Errorf("preheat sale: %d %v", st, err)
	}
	return id, nil
}

// reservationRequests renders one reservation request per buyer token,
// each from one of the client addresses (X-Forwarded-For).
func (b *throughputBench) reservationRequests(t loadgen.Target, sale string) ([][]byte, error) {
	return b.buyerRequests(t, "/api/v1/sales/"+sale+"/reservations")
}

// buyerRequests renders one POST {"qty":1} to path per buyer token, each
// from one of the client addresses (X-Forwarded-For).
func (b *throughputBench) buyerRequests(t loadgen.Target, path string) ([][]byte, error) {
	if b.tokens == nil {
		tokens, err := b.signTokens(b.o.Users)
		if err != nil {
			return nil, err
		}
		b.tokens = tokens
	}
	return b.requestsOf(t, path, b.tokens, b.o.Clients), nil
}

// signTokens signs n tokens of buyers no other call of it has.
func (b *throughputBench) signTokens(n int) ([]string, error) {
	run := randomHex(4)
	tokens := make([]string, n)
	for i := range tokens {
		tok, err := jwt.Sign([]byte(b.secret), "bench-"+run+"-"+strconv.Itoa(i), 2*time.Hour, time.Now())
		if err != nil {
			return nil, err
		}
		tokens[i] = tok
	}
	return tokens, nil
}

// requestsOf renders one POST {"qty":1} to path per token, each from one
// of clients addresses (X-Forwarded-For).
func (b *throughputBench) requestsOf(t loadgen.Target, path string, tokens []string, clients int) [][]byte {
	reqs := make([][]byte, len(tokens))
	for i, tok := range tokens {
		c := i % clients
		ip := fmt.Sprintf("10.%d.%d.%d", c>>16&255, c>>8&255, c&255)
		reqs[i] = t.AppendRequest(nil, "POST", path, qtyOneBody,
			loadgen.Header{Name: "Authorization", Value: "Bearer " + tok}, jsonContentType,
			loadgen.Header{Name: "X-Forwarded-For", Value: ip})
	}
	return reqs
}

func (b *throughputBench) liveLoad(ctx context.Context, kind string) (loadgen.Target, [][]byte, error) {
	e, err := b.engine(ctx, kind)
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	// Stock and limits no run can exhaust: every request is a reservation.
	sale, err := e.liveSale(ctx, seckill.MaxSaleStock, seckill.MaxPurchaseLimit)
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	t, _ := loadgen.ParseTarget("http://" + e.Addr())
	reqs, err := b.reservationRequests(t, sale)
	return t, reqs, err
}

func (b *throughputBench) soldOutLoad(ctx context.Context, kind string) (loadgen.Target, [][]byte, error) {
	e, err := b.engine(ctx, kind)
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	sale, err := e.liveSale(ctx, 1, 1)
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	// The one unit goes to a buyer outside the crowd, so the crowd hears
	// sold_out, never limit_exceeded.
	owner, err := jwt.Sign([]byte(b.secret), "bench-owner-"+randomHex(4), time.Hour, time.Now())
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	var acc map[string]any
	if st, err := e.admin.Do(ctx, "POST", "/api/v1/sales/"+sale+"/reservations", owner, map[string]any{"qty": 1}, &acc); err != nil || st != http.StatusAccepted {
		return loadgen.Target{}, nil, fmt.Errorf("buy the only unit: %d %v %v", st, acc, err)
	}
	t, _ := loadgen.ParseTarget("http://" + e.Addr())
	reqs, err := b.reservationRequests(t, sale)
	return t, reqs, err
}

// newBuyers is how many buyers entries-new and queue-new send at least: more than a
// run's warm-up and window take at this machine's rates, so that none
// enters twice (a repeat would be counted unexpected).
const newBuyers = 200_000

// benchQueuePerIP is the places an address may hold in a waiting room on
// the bench's engines: serve's default (--queue-per-ip), so that a join
// pays for the cap as it does in production.
const benchQueuePerIP = 10

// entriesLoad is a lottery sale taking entries for the rest of the hour,
// on the engine of kind (the soldout benchmarks'); fresh: from buyers of
// its own that enter no other sale, each once.
func (b *throughputBench) entriesLoad(ctx context.Context, kind string, fresh bool) (loadgen.Target, [][]byte, error) {
	if l, ok := b.primed["entries-"+kind]; ok && !fresh {
		return l.t, l.reqs, nil
	}
	e, err := b.engine(ctx, kind)
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	id := "bench-" + randomHex(6)
	now := time.Now()
	var body map[string]any
	st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales", e.cfg.AdminToken, map[string]any{
		"id": id, "name": "bench", "price_cents": 100, "stock": 100, "per_user_limit": 1,
		"start_at": now.Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": now.Add(2 * time.Hour).UTC().Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "lottery", "entries_close_at": now.Add(time.Hour).UTC().Format(time.RFC3339Nano)},
	}, &body)
	if err != nil || st != http.StatusCreated {
		return loadgen.Target{}, nil, fmt.Errorf("create lottery: %d %v %v", st, body, err)
	}
	t, _ := loadgen.ParseTarget("http://" + e.Addr())
	if fresh {
		// Each round's sale is new, so the same buyers are new to it.
		if b.freshTokens == nil {
			if b.freshTokens, err = b.signTokens(max(b.o.Users, newBuyers)); err != nil {
				return t, nil, err
			}
		}
		return t, b.requestsOf(t, "/api/v1/sales/"+id+"/entries", b.freshTokens, b.o.Clients), nil
	}
	reqs, err := b.buyerRequests(t, "/api/v1/sales/"+id+"/entries")
	if err != nil {
		return t, nil, err
	}
	return t, reqs, b.prime("entries-"+kind, t, reqs, http.StatusCreated)
}

// primedLoad is a sale every buyer of the run has entered or joined once,
// kept for the rounds after.
type primedLoad struct {
	t    loadgen.Target
	reqs [][]byte
}

// prime sends every request of reqs once, unmeasured, wanting status,
// and keeps the load as name's: its rounds then measure repeats only.
func (b *throughputBench) prime(name string, t loadgen.Target, reqs [][]byte, want int) error {
	fmt.Fprintf(b.stderr, "bench %s: every buyer once (%d), unmeasured…\n", name, len(reqs))
	var (
		next atomic.Int64
		bad  atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, 1)
	)
	for range min(b.o.Concurrency, 32) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := loadgen.NewConn(t)
			defer c.Close()
			for i := next.Add(1) - 1; i < int64(len(reqs)); i = next.Add(1) - 1 {
				resp, err := c.Do(reqs[i])
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				if resp.Status != want {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("prime %s: %w", name, err)
	default:
	}
	if n := bad.Load(); n > 0 {
		return fmt.Errorf("prime %s: %d of %d answers not %d", name, n, len(reqs), want)
	}
	if b.primed == nil {
		b.primed = map[string]primedLoad{}
	}
	b.primed[name] = primedLoad{t: t, reqs: reqs}
	return nil
}

// queueLoad is a queue sale that started 10 s ago (its places final),
// admitting one a second, with stock no run exhausts, on the engine of the
// soldout benchmark.
func (b *throughputBench) queueLoad(ctx context.Context) (loadgen.Target, [][]byte, error) {
	if l, ok := b.primed["queue"]; ok {
		return l.t, l.reqs, nil
	}
	t, id, err := b.queueSale(ctx, time.Now().Add(-seckill.QueueSettleMargin-5*time.Second))
	if err != nil {
		return t, nil, err
	}
	reqs, err := b.buyerRequests(t, "/api/v1/sales/"+id+"/queue")
	if err != nil {
		return t, nil, err
	}
	return t, reqs, b.prime("queue", t, reqs, http.StatusOK)
}

// queueNewLoad is a queue sale of its own per round whose waiting room is
// open and that starts in 10 minutes, joined by entries-new's buyers, each
// once: the joins of a stampede waiting for the start.
func (b *throughputBench) queueNewLoad(ctx context.Context) (loadgen.Target, [][]byte, error) {
	t, id, err := b.queueSale(ctx, time.Now().Add(10*time.Minute))
	if err != nil {
		return t, nil, err
	}
	if b.freshTokens == nil {
		if b.freshTokens, err = b.signTokens(max(b.o.Users, newBuyers)); err != nil {
			return t, nil, err
		}
	}
	// Enough addresses that none reaches the engine's cap of places
	// (--queue-per-ip): a refused join would be counted unexpected.
	clients := max(b.o.Clients, (len(b.freshTokens)+benchQueuePerIP-1)/benchQueuePerIP)
	return t, b.requestsOf(t, "/api/v1/sales/"+id+"/queue", b.freshTokens, clients), nil
}

// queueSale creates and preheats a queue sale starting at start, admitting
// one a second, with stock no run exhausts, on the engine of the soldout
// benchmark.
func (b *throughputBench) queueSale(ctx context.Context, start time.Time) (loadgen.Target, string, error) {
	e, err := b.engine(ctx, "on")
	if err != nil {
		return loadgen.Target{}, "", err
	}
	id := "bench-" + randomHex(6)
	var body map[string]any
	st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales", e.cfg.AdminToken, map[string]any{
		"id": id, "name": "bench", "price_cents": 100, "stock": seckill.MaxSaleStock, "per_user_limit": 1,
		"start_at": start.UTC().Format(time.RFC3339Nano), "end_at": start.Add(time.Hour).UTC().Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "queue", "admit_per_second": 1},
	}, &body)
	if err != nil || st != http.StatusCreated {
		return loadgen.Target{}, "", fmt.Errorf("create queue sale: %d %v %v", st, body, err)
	}
	if st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales/"+id+"/preheat", e.cfg.AdminToken, nil, nil); err != nil || st != http.StatusOK {
		return loadgen.Target{}, "", fmt.Errorf("preheat queue sale: %d %v", st, err)
	}
	t, _ := loadgen.ParseTarget("http://" + e.Addr())
	return t, id, nil
}
