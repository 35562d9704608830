package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/bench"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/rush"
	"github.com/seckill-dev/seckill/internal/strategies"
)

// benchCommands are the subcommands of `seckill bench`.
var benchCommands = []struct{ name, summary string }{
	{"rush", "the demo's flash sale against running seckill nodes (--url …, --admin-token, --jwt-secret)"},
	{"compare", "the same rush against six ways of deducting stock, on --redis-url and --database-url"},
	{"hello", "a bare net/http handler: the HTTP ceiling of this machine"},
	{"textbook", "a bare handler doing one EVALSHA of a plain reserve script (and hello, for the ratio)"},
	{"live", "reservations through the full API on --redis-url (and hello and textbook, for the ratios)"},
	{"soldout", "the sold-out path through the full API (and hello and textbook, for the ratios)"},
	{"all", "hello, textbook, live and soldout in sequence, with a ratio table"},
}

func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: seckill bench <benchmark> [flags]\n\nbenchmarks:")
	for _, c := range benchCommands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'seckill bench <benchmark> -h' for its flags. Results are ratios to baselines measured in the same run:\nthe machine is shared and noisy, its absolute numbers are not.")
}

// runBench is `seckill bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		benchUsage(stderr)
		return errUsage
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "-h", "--help", "help":
		benchUsage(stderr)
		return flag.ErrHelp
	case "rush":
		return runBenchRush(ctx, rest, stdout, stderr)
	case "compare":
		return runBenchCompare(ctx, rest, stdout, stderr)
	case "hello", "textbook", "live", "soldout", "all":
		return runBenchThroughput(ctx, sub, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "seckill bench: unknown benchmark %q\n\n", sub)
		benchUsage(stderr)
		return errUsage
	}
}

// urlsFlag collects a repeatable --url.
type urlsFlag []string

func (u *urlsFlag) String() string { return strings.Join(*u, ",") }
func (u *urlsFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*u = append(*u, s)
		}
	}
	return nil
}

var (
	jsonContentType = loadgen.Header{Name: "Content-Type", Value: "application/json"}
	qtyOneBody      = []byte(`{"qty":1}`)
)

// runBenchRush is `seckill bench rush`: the demo's scenario against any
// running seckill, its buyers spread over every --url.
func runBenchRush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := rush.DefaultOptions()
	var (
		urls   urlsFlag
		asJSON bool
	)
	fs := flagSet("bench rush", stderr)
	fs.Var(&urls, "url", "base URL of a seckill node, e.g. http://127.0.0.1:8080 (repeat, or separate with commas, to spread buyers over nodes)")
	stringFlag(fs, &opts.AdminToken, "admin-token", "", "the nodes' admin token")
	stringFlag(fs, &opts.JWTSecret, "jwt-secret", "", "the nodes' HS256 secret, to mint buyer tokens")
	if err := registerRushFlags(fs, &opts); err != nil {
		return err
	}
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(urls) == 0 {
		if v := os.Getenv("SECKILL_URL"); v != "" {
			_ = urls.Set(v)
		}
	}
	if len(urls) == 0 || opts.AdminToken == "" || opts.JWTSecret == "" {
		return errors.New("--url, --admin-token and --jwt-secret are required")
	}
	opts.URLs = urls
	return rushAndReport(ctx, opts, "bench rush", asJSON, stdout, stderr)
}

// ---------------------------------------------------------------------
// hello, textbook, live, soldout

// throughputOptions are the flags of the throughput benchmarks.
type throughputOptions struct {
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
	JSON          bool
	CPUProfile    string
	Only          string
}

// benchCases are the benchmarks of `seckill bench all`, in the order of a
// round, with what each is.
var benchCases = []struct{ name, what string }{
	{"hello", "bare net/http handler: GET, writes 6 bytes (the machine's HTTP ceiling)"},
	{"hello-post", "bare handler, the shape of a reservation: POST with the JWT, X-Forwarded-For and body, reads the body, answers the sold-out 409 JSON"},
	{"textbook", "bare handler, one EVALSHA of a plain reserve script per request: no auth, no limit, no outbox"},
	{"live", "POST reservations through the full API: JWT, both rate limits, combiner, reserve script with outbox; relay, broker and order writer running"},
	{"live-nolimit", "live with the rate limits off"},
	{"live-nopipe", "live with no relay and no order writer (the outbox fills): what the pipeline costs"},
	{"soldout", "POST reservations on a sold-out sale through the full API, rate limits on (409 sold_out)"},
	{"soldout-nolimit", "soldout with the rate limits off"},
}

// benchSets are the benchmarks each subcommand runs.
var benchSets = map[string][]string{
	"hello":    {"hello", "hello-post"},
	"textbook": {"hello", "hello-post", "textbook"},
	"live":     {"hello", "hello-post", "textbook", "live", "live-nolimit", "live-nopipe"},
	"soldout":  {"hello", "hello-post", "textbook", "soldout", "soldout-nolimit"},
	"all":      {"hello", "hello-post", "textbook", "live", "live-nolimit", "live-nopipe", "soldout", "soldout-nolimit"},
}

// benchGoals are the ratios the report states, with the targets of issue
// 12 where it sets one.
var benchGoals = []struct {
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
}

func runBenchThroughput(ctx context.Context, which string, args []string, stdout, stderr io.Writer) error {
	o := throughputOptions{Duration: 5 * time.Second, Warmup: time.Second, Concurrency: 64, Users: 10_000, Rounds: 1,
		RateLimitIP: "100000/1m", RateLimitUser: "100000/1m"}
	fs := flagSet("bench "+which, stderr)
	for _, err := range []error{
		durationFlag(fs, &o.Duration, "duration", o.Duration, "how long each benchmark is measured"),
		durationFlag(fs, &o.Warmup, "warmup", o.Warmup, "unmeasured load before each benchmark"),
		intFlag(fs, &o.Concurrency, "concurrency", o.Concurrency, "keep-alive connections, each with one request in flight"),
		intFlag(fs, &o.Rate, "rate", o.Rate, "fixed arrival rate in requests/s (latency from the intended send time); 0 = closed loop"),
		intFlag(fs, &o.Users, "users", o.Users, "distinct buyers (tokens) of the live and soldout benchmarks"),
		intFlag(fs, &o.Clients, "clients", o.Clients, "distinct client addresses the buyers come from (X-Forwarded-For of a trusted proxy); 0: one per buyer"),
		intFlag(fs, &o.Rounds, "rounds", o.Rounds, "run the sequence this many times, interleaved; ratios are medians of the per-round ratios"),
	} {
		if err != nil {
			return err
		}
	}
	stringFlag(fs, &o.RedisURL, "redis-url", "", "Redis of textbook, live and soldout; empty runs an in-process one "+
		"(live and soldout write under a key prefix of their own, deleted afterwards)")
	stringFlag(fs, &o.DatabaseURL, "database-url", "", "database of the live engines; empty uses SQLite in a temporary directory")
	stringFlag(fs, &o.BrokerURL, "broker-url", "", "broker of the live engines; empty runs NATS JetStream in-process")
	fs.StringVar(&o.RateLimitIP, "rate-limit-ip", o.RateLimitIP, "the engines' limit per client IP (20/1m, 5/1s or off); the -nolimit benchmarks run with none")
	fs.StringVar(&o.RateLimitUser, "rate-limit-user", o.RateLimitUser, "the engines' limit per buyer (10/1m, 5/1s or off)")
	fs.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the server side (this process: engines and baselines) to this file")
	fs.StringVar(&o.Only, "only", "", "comma-separated benchmarks to run instead of the subcommand's set")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case o.Duration <= 0 || o.Warmup < 0:
		return errors.New("--duration must be positive and --warmup not negative")
	case o.Concurrency < 1 || o.Users < 1 || o.Rounds < 1 || o.Rate < 0 || o.Clients < 0:
		return errors.New("--concurrency, --users and --rounds must be at least 1, --rate and --clients not negative")
	}
	if o.Clients == 0 {
		o.Clients = o.Users
	}
	names := benchSets[which]
	if o.Only != "" {
		names = strings.Split(o.Only, ",")
		for _, n := range names {
			if !slices.ContainsFunc(benchCases, func(c struct{ name, what string }) bool { return c.name == n }) {
				return fmt.Errorf("--only: unknown benchmark %q", n)
			}
		}
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	b := &throughputBench{o: o, stderr: stderr, engines: map[string]*benchEngine{}}
	defer b.close()
	if err := b.openRedis(ctx); err != nil {
		return err
	}
	mode := "closed loop"
	if o.Rate > 0 {
		mode = fmt.Sprintf("fixed rate %s/s, latency from the intended send time", loadgen.Thousands(int64(o.Rate)))
	}
	rep := bench.Report{
		Header: []string{
			fmt.Sprintf("seckill bench: %d connections from a separate load-generator process, %s, %s measured after %s warm-up, %d interleaved round(s); redis %s",
				o.Concurrency, mode, loadgen.FormatDuration(o.Duration), loadgen.FormatDuration(o.Warmup), o.Rounds, orEmbedded(redactURL(o.RedisURL))),
			fmt.Sprintf("  engines: database %s, broker %s; rate limits ip %s, user %s; %s buyers from %s client addresses",
				orDefault(redactURL(o.DatabaseURL), "SQLite (temporary)"), orEmbedded(redactURL(o.BrokerURL)), o.RateLimitIP, o.RateLimitUser,
				loadgen.Thousands(int64(o.Users)), loadgen.Thousands(int64(o.Clients))),
			"  CPU µs per request over the measured window: server (this process, getrusage), load generator (its process, getrusage), Redis (INFO, the whole server: other clients count too)",
		},
		Descriptions: map[string]string{},
		Names:        names,
	}
	for _, c := range benchCases {
		rep.Descriptions[c.name] = c.what
	}
	// Rounds interleave the benchmarks, so that a noisy spell of the
	// shared machine hits them all alike rather than one of them; every
	// ratio is taken within a round.
	for round := range o.Rounds {
		var results []bench.Result
		for _, name := range names {
			fmt.Fprintf(stderr, "bench %s (round %d of %d): %s after %s of warm-up…\n", name, round+1, o.Rounds, o.Duration, o.Warmup)
			load, err := b.run(ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			results = append(results, bench.Result{Name: name, Round: round + 1, Load: load})
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
	for _, g := range benchGoals {
		if in[g.of] && in[g.base] && g.base != "hello" {
			rep.Compare(g.of, g.base, g.target)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.Print(stdout)
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// throughputBench holds what the throughput benchmarks of one run share:
// the Redis connection, the baseline servers and the engines, each
// started once.
type throughputBench struct {
	o      throughputOptions
	stderr io.Writer

	redis    *strategies.Redis
	redisCPU bench.Sampler
	servers  map[string]loadgen.Target // hello, hello-post, textbook
	engines  map[string]*benchEngine   // "on", "nolimit", "nopipe"
	tokens   []string
	closers  []func()
}

// benchEngine is one full engine of the run.
type benchEngine struct {
	m       *Main
	dataDir string
	admin   *apiclient.Client
}

func (b *throughputBench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, e := range b.engines {
		if err := e.m.Close(ctx); err != nil {
			fmt.Fprintf(b.stderr, "bench: stop engine: %v\n", err)
		}
		if b.redis != nil && !b.redis.Embedded() {
			if _, err := b.redis.DeletePrefix(ctx, e.m.Config.RedisKeyPrefix); err != nil {
				fmt.Fprintf(b.stderr, "bench: clean up Redis: %v\n", err)
			}
		}
		e.admin.Close()
		os.RemoveAll(e.dataDir)
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// run measures one benchmark once.
func (b *throughputBench) run(ctx context.Context, name string) (bench.Load, error) {
	var (
		t    loadgen.Target
		reqs [][]byte
		want int
		err  error
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
	case "soldout", "soldout-nolimit":
		kind := map[string]string{"soldout": "on", "soldout-nolimit": "nolimit"}[name]
		t, reqs, err = b.soldOutLoad(ctx, kind)
		want = http.StatusConflict
	default:
		return bench.Load{}, fmt.Errorf("unknown benchmark %q", name)
	}
	if err != nil {
		return bench.Load{}, err
	}
	return bench.Measure(ctx, bench.Spec{
		URL: "http://" + t.Addr, Requests: reqs, Want: want, Concurrency: b.o.Concurrency, Rate: b.o.Rate,
		Warmup: b.o.Warmup, Duration: b.o.Duration,
	}, b.redisCPU)
}

var (
	helloBody   = []byte("hello\n")
	soldOutBody = []byte(`{"error":{"code":"sold_out","message":"The sale is sold out."}}` + "\n")
)

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
	logger, _ := newLogger(b.stderr, "error")
	srv := newHTTPServer(h, logger)
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
		b.redisCPU = s.ServerCPU
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
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.RedisURL, cfg.DatabaseURL, cfg.BrokerURL = b.o.RedisURL, b.o.DatabaseURL, b.o.BrokerURL
	cfg.RateLimitIP, cfg.RateLimitUser = b.o.RateLimitIP, b.o.RateLimitUser
	if kind == "nolimit" {
		cfg.RateLimitIP, cfg.RateLimitUser = "off", "off"
	}
	cfg.TrustedProxies = "127.0.0.1/32"
	// Keys, queue and namespace of its own: no other node's relay or
	// writer sees its sales, and its keys are all deleted afterwards.
	cfg.RedisKeyPrefix = "skbench" + randomHex(6)
	cfg.BrokerQueue = "seckill_bench_" + randomHex(6)
	cfg.Namespace = cfg.BrokerQueue
	cfg.JWTSecret, cfg.AdminToken = benchSecret, randomHex(24)
	cfg.ShutdownTimeout = 30 * time.Second
	logger, err := newLogger(b.stderr, "error")
	if err != nil {
		return nil, err
	}
	if kind == "nopipe" {
		cfg.Roles = "api" // no relay, no writer: the outbox fills
	}
	m := &Main{Config: cfg, Stdout: io.Discard, Logger: logger}
	if err := m.Run(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e := &benchEngine{m: m, dataDir: dir, admin: apiclient.New("http://" + m.Addr())}
	b.engines[kind] = e
	return e, nil
}

// benchSecret signs the buyers' tokens of every engine of a run alike, so
// that each request is the same bytes whichever server it goes to.
var benchSecret = randomHex(24)

// liveSale creates a sale that is already on and preheats it.
func (e *benchEngine) liveSale(ctx context.Context, stock, limit int64) (string, error) {
	id := "bench-" + randomHex(6)
	now := time.Now()
	var body map[string]any
	st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales", e.m.Config.AdminToken, map[string]any{
		"id": id, "name": "bench", "price_cents": 100, "stock": stock, "per_user_limit": limit,
		"start_at": now.Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).UTC().Format(time.RFC3339Nano),
	}, &body)
	if err != nil || st != http.StatusCreated {
		return "", fmt.Errorf("create sale: %d %v %v", st, body, err)
	}
	if st, err := e.admin.Do(ctx, "POST", "/admin/v1/sales/"+id+"/preheat", e.m.Config.AdminToken, nil, nil); err != nil || st != http.StatusOK {
		return "", fmt.Errorf("preheat sale: %d %v", st, err)
	}
	return id, nil
}

// reservationRequests renders one reservation request per buyer token,
// each from one of the client addresses (X-Forwarded-For).
func (b *throughputBench) reservationRequests(t loadgen.Target, sale string) ([][]byte, error) {
	if b.tokens == nil {
		run := randomHex(4)
		b.tokens = make([]string, b.o.Users)
		for i := range b.tokens {
			tok, err := jwt.Sign([]byte(benchSecret), "bench-"+run+"-"+strconv.Itoa(i), 2*time.Hour, time.Now())
			if err != nil {
				return nil, err
			}
			b.tokens[i] = tok
		}
	}
	reqs := make([][]byte, len(b.tokens))
	for i, tok := range b.tokens {
		c := i % b.o.Clients
		ip := fmt.Sprintf("10.%d.%d.%d", c>>16&255, c>>8&255, c&255)
		reqs[i] = t.AppendRequest(nil, "POST", "/api/v1/sales/"+sale+"/reservations", qtyOneBody,
			loadgen.Header{Name: "Authorization", Value: "Bearer " + tok}, jsonContentType,
			loadgen.Header{Name: "X-Forwarded-For", Value: ip})
	}
	return reqs, nil
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
	t, _ := loadgen.ParseTarget("http://" + e.m.Addr())
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
	owner, err := jwt.Sign([]byte(benchSecret), "bench-owner-"+randomHex(4), time.Hour, time.Now())
	if err != nil {
		return loadgen.Target{}, nil, err
	}
	var acc map[string]any
	if st, err := e.admin.Do(ctx, "POST", "/api/v1/sales/"+sale+"/reservations", owner, map[string]any{"qty": 1}, &acc); err != nil || st != http.StatusAccepted {
		return loadgen.Target{}, nil, fmt.Errorf("buy the only unit: %d %v %v", st, acc, err)
	}
	t, _ := loadgen.ParseTarget("http://" + e.m.Addr())
	reqs, err := b.reservationRequests(t, sale)
	return t, reqs, err
}

// ---------------------------------------------------------------------
// compare

// compareRow is one strategy's line of the comparison table.
type compareRow struct {
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

type compareReport struct {
	Stock       int          `json:"stock"`
	Buyers      int          `json:"buyers"`
	Concurrency int          `json:"concurrency"`
	Database    string       `json:"database"`
	Redis       string       `json:"redis"`
	Rows        []compareRow `json:"rows"`
	Notes       []string     `json:"notes,omitempty"`
}

func runBenchCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		redisURL, dbURL, only, svgPath string
		stock, buyers, conc, sqlConns  = 200, 10_000, 64, 64
		asJSON                         bool
	)
	fs := flagSet("bench compare", stderr)
	stringFlag(fs, &redisURL, "redis-url", "", "Redis of the Redis strategies; empty runs an in-process one (miniredis)")
	stringFlag(fs, &dbURL, "database-url", "", "database of the SQL strategies (mysql://, postgres://, sqlite:PATH); empty uses SQLite in a temporary directory")
	fs.StringVar(&only, "strategies", "", "comma-separated strategies to run (default all): "+strings.Join(kindNames(), ", "))
	fs.StringVar(&svgPath, "svg", "", "write a bar chart of the results to this SVG file")
	fs.BoolVar(&asJSON, "json", false, "print the results as JSON")
	for _, err := range []error{
		intFlag(fs, &stock, "stock", stock, "units on sale"),
		intFlag(fs, &buyers, "buyers", buyers, "buyers, one request each"),
		intFlag(fs, &conc, "concurrency", conc, "buyers in flight at once"),
		intFlag(fs, &sqlConns, "sql-conns", sqlConns, "database connections of the SQL strategies (SQLite: at most 8)"),
	} {
		if err != nil {
			return err
		}
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if stock < 1 || buyers < 1 || conc < 1 {
		return errors.New("--stock, --buyers and --concurrency must be at least 1")
	}
	kinds := strategies.Kinds
	if only != "" {
		kinds = nil
		for _, n := range strings.Split(only, ",") {
			k, ok := strategies.KindByName(strings.TrimSpace(n))
			if !ok {
				return fmt.Errorf("unknown strategy %q (want %s)", n, strings.Join(kindNames(), ", "))
			}
			kinds = append(kinds, k)
		}
	}
	needs := map[string]bool{}
	for _, k := range kinds {
		needs[k.Store] = true
	}

	rep := compareReport{Stock: stock, Buyers: buyers, Concurrency: conc, Database: "none", Redis: "none"}
	var (
		db *strategies.SQL
		rd *strategies.Redis
	)
	if needs["sql"] {
		if dbURL == "" {
			dir, err := os.MkdirTemp("", "seckill-compare-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			dbURL = "sqlite:" + dir + "/compare.db"
		}
		var err error
		if db, err = strategies.OpenSQL(ctx, dbURL, sqlConns); err != nil {
			return err
		}
		defer db.Close()
		rep.Database = db.Dialect() + " " + redactURL(dbURL)
	}
	if needs["redis"] {
		var err error
		if rd, err = strategies.OpenRedis(ctx, redisURL, strategies.WithEngine(compareEngine{})); err != nil {
			return err
		}
		defer rd.Close()
		rep.Redis = orEmbedded(redactURL(redisURL))
		if rd.Embedded() {
			rep.Redis = "embedded (miniredis, in-process)"
		}
	}

	for _, k := range kinds {
		fmt.Fprintf(stderr, "bench compare: %s…\n", k.Name)
		row, err := compareOne(ctx, k, db, rd, stock, buyers, conc)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
		if k.Racy && buyers > stock && row.Oversold == 0 {
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
	if svgPath != "" {
		if err := os.WriteFile(svgPath, []byte(rep.svg()), 0o644); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.print(stdout)
		if svgPath != "" {
			fmt.Fprintf(stdout, "  chart written to %s\n", svgPath)
		}
	}
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

func kindNames() []string {
	names := make([]string, len(strategies.Kinds))
	for i, k := range strategies.Kinds {
		names[i] = k.Name
	}
	return names
}

// compareOne runs the rush against one strategy, on state of its own that
// is dropped afterwards.
func compareOne(ctx context.Context, k strategies.Kind, db *strategies.SQL, rd *strategies.Redis, stock, buyers, conc int) (compareRow, error) {
	s, err := k.Open(ctx, db, rd, int64(stock))
	if err != nil {
		return compareRow{}, err
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
		return compareRow{}, err
	}
	remaining, err := s.Remaining(ctx)
	if err != nil {
		return compareRow{}, err
	}
	row := compareRow{
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

func (rep *compareReport) print(w io.Writer) {
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

// svg draws the comparison as a bar chart of decisions per second (log
// scale), with each row's p99 and, in red, what it oversold.
func (rep *compareReport) svg() string {
	dialect, _, _ := strings.Cut(rep.Database, " ") // the URL would not fit
	c := bench.Chart{
		Title: fmt.Sprintf("Ways to deduct stock: %s buyers for %s units, %d at once",
			loadgen.Thousands(int64(rep.Buyers)), loadgen.Thousands(int64(rep.Stock)), rep.Concurrency),
		Subtitle: fmt.Sprintf("decisions per second (log scale) · database %s · redis %s", dialect, rep.Redis),
		Legend:   "purple: SQL · blue: Redis · green: seckill · red: oversold",
	}
	for _, r := range rep.Rows {
		bar := bench.Bar{
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

// sortedKeys is for stable output of count maps.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
