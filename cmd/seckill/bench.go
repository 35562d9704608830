package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"net"
	"net/http"
	"os"
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
	Rounds      int
	RedisURL    string
	DatabaseURL string
	BrokerURL   string
	// RateLimitIP and RateLimitUser configure the live engine's limits;
	// off by default, since the load comes from one address and a few
	// thousand buyers each sending many requests.
	RateLimitIP   string
	RateLimitUser string
	JSON          bool
}

// benchResult is one throughput benchmark's measurement.
type benchResult struct {
	Name        string           `json:"name"`
	What        string           `json:"what"`
	Requests    int64            `json:"requests"`
	Expected    int64            `json:"expected"` // answers with the status the benchmark expects
	Unexpected  map[string]int64 `json:"unexpected,omitempty"`
	Errors      int64            `json:"errors"`
	RPS         float64          `json:"requests_per_sec"`
	Latency     loadgen.Summary  `json:"latency"`
	MaxLagMS    float64          `json:"max_lag_ms,omitempty"`
	RoundsRPS   []float64        `json:"rounds_requests_per_sec,omitempty"` // every round's, slowest first
	VsHello     float64          `json:"vs_hello,omitempty"`
	VsTextbook  float64          `json:"vs_textbook,omitempty"`
	Description string           `json:"description"`
}

// benchReport is the output of a throughput benchmark run.
type benchReport struct {
	Concurrency int           `json:"concurrency"`
	Rate        int           `json:"rate,omitempty"`
	DurationMS  float64       `json:"duration_ms"`
	WarmupMS    float64       `json:"warmup_ms"`
	Rounds      int           `json:"rounds"`
	Redis       string        `json:"redis"`
	Database    string        `json:"database"`
	Broker      string        `json:"broker"`
	RateLimits  string        `json:"rate_limits"`
	Results     []benchResult `json:"results"`
}

func runBenchThroughput(ctx context.Context, which string, args []string, stdout, stderr io.Writer) error {
	o := throughputOptions{Duration: 5 * time.Second, Warmup: time.Second, Concurrency: 64, Users: 10_000, Rounds: 1}
	fs := flagSet("bench "+which, stderr)
	for _, err := range []error{
		durationFlag(fs, &o.Duration, "duration", o.Duration, "how long each benchmark is measured"),
		durationFlag(fs, &o.Warmup, "warmup", o.Warmup, "unmeasured load before each benchmark"),
		intFlag(fs, &o.Concurrency, "concurrency", o.Concurrency, "keep-alive connections, each with one request in flight"),
		intFlag(fs, &o.Rate, "rate", o.Rate, "fixed arrival rate in requests/s (latency from the intended send time); 0 = closed loop"),
		intFlag(fs, &o.Users, "users", o.Users, "distinct buyers (tokens) of the live and soldout benchmarks"),
		intFlag(fs, &o.Rounds, "rounds", o.Rounds, "run the sequence this many times, interleaved, and report each benchmark's median round"),
	} {
		if err != nil {
			return err
		}
	}
	stringFlag(fs, &o.RedisURL, "redis-url", "", "Redis of textbook, live and soldout; empty runs an in-process one "+
		"(live and soldout write under a key prefix of their own, deleted afterwards)")
	stringFlag(fs, &o.DatabaseURL, "database-url", "", "database of the live engine; empty uses SQLite in a temporary directory")
	stringFlag(fs, &o.BrokerURL, "broker-url", "", "broker of the live engine; empty runs NATS JetStream in-process")
	fs.StringVar(&o.RateLimitIP, "rate-limit-ip", "off", "the live engine's limit per client IP (20/1m, 5/1s or off)")
	fs.StringVar(&o.RateLimitUser, "rate-limit-user", "off", "the live engine's limit per buyer (10/1m, 5/1s or off)")
	fs.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case o.Duration <= 0 || o.Warmup < 0:
		return errors.New("--duration must be positive and --warmup not negative")
	case o.Concurrency < 1 || o.Users < 1 || o.Rounds < 1 || o.Rate < 0:
		return errors.New("--concurrency, --users and --rounds must be at least 1, --rate not negative")
	}
	names := map[string][]string{
		"hello":    {"hello"},
		"textbook": {"hello", "textbook"},
		"live":     {"hello", "textbook", "live"},
		"soldout":  {"hello", "textbook", "soldout"},
		"all":      {"hello", "textbook", "live", "soldout"},
	}[which]

	b := &throughputBench{o: o, stderr: stderr}
	defer b.close()
	rep := benchReport{
		Concurrency: o.Concurrency, Rate: o.Rate, DurationMS: loadgen.Millis(o.Duration), WarmupMS: loadgen.Millis(o.Warmup), Rounds: o.Rounds,
		Redis: orEmbedded(redactURL(o.RedisURL)), Database: "none", Broker: "none",
		RateLimits: "ip " + o.RateLimitIP + ", user " + o.RateLimitUser,
	}
	// Rounds interleave the benchmarks, so that a noisy spell of the
	// shared machine hits them all alike rather than one of them.
	rounds := map[string][]benchResult{}
	for round := range o.Rounds {
		for _, name := range names {
			var (
				res benchResult
				err error
			)
			fmt.Fprintf(stderr, "bench %s (round %d of %d): %s after %s of warm-up…\n", name, round+1, o.Rounds, o.Duration, o.Warmup)
			switch name {
			case "hello":
				res, err = b.hello(ctx)
			case "textbook":
				res, err = b.textbook(ctx)
			case "live":
				res, err = b.live(ctx)
			case "soldout":
				res, err = b.soldOut(ctx)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			rounds[name] = append(rounds[name], res)
		}
	}
	for _, name := range names {
		rs := rounds[name]
		slices.SortFunc(rs, func(a, b benchResult) int { return cmp.Compare(a.RPS, b.RPS) })
		med := rs[len(rs)/2]
		for _, r := range rs {
			med.RoundsRPS = append(med.RoundsRPS, r.RPS)
		}
		rep.Results = append(rep.Results, med)
	}
	if b.engine != nil {
		rep.Database, rep.Broker = redactURL(b.engine.Config.databaseURL()), orEmbedded(redactURL(b.engine.Config.BrokerURL))
	}
	var hello, textbook float64
	for _, r := range rep.Results {
		switch r.Name {
		case "hello":
			hello = r.RPS
		case "textbook":
			textbook = r.RPS
		}
	}
	for i := range rep.Results {
		if hello > 0 {
			rep.Results[i].VsHello = rep.Results[i].RPS / hello
		}
		if textbook > 0 {
			rep.Results[i].VsTextbook = rep.Results[i].RPS / textbook
		}
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.print(stdout)
	return nil
}

func (rep *benchReport) print(w io.Writer) {
	mode := "closed loop"
	if rep.Rate > 0 {
		mode = fmt.Sprintf("fixed rate %s/s, latency from the intended send time", loadgen.Thousands(int64(rep.Rate)))
	}
	rounds := ""
	if rep.Rounds > 1 {
		rounds = fmt.Sprintf(", median of %d interleaved rounds", rep.Rounds)
	}
	fmt.Fprintf(w, "seckill bench: %d connections, %s, %s measured after %s warm-up%s; redis %s\n",
		rep.Concurrency, mode, loadgen.FormatMillis(rep.DurationMS), loadgen.FormatMillis(rep.WarmupMS), rounds, rep.Redis)
	if rep.Database != "none" {
		fmt.Fprintf(w, "  live engine: database %s, broker %s, rate limits %s\n", rep.Database, rep.Broker, rep.RateLimits)
	}
	fmt.Fprintf(w, "  %-9s %10s %9s %9s %9s %9s %10s  %s\n", "bench", "req/s", "p50", "p99", "p99.9", "× hello", "× textbook", "answers")
	for _, r := range rep.Results {
		ratio := func(v float64) string {
			if v == 0 {
				return "—"
			}
			return strconv.FormatFloat(v, 'f', 2, 64)
		}
		answers := loadgen.Thousands(r.Expected) + " as expected"
		if n := r.Requests - r.Expected; n > 0 {
			var other []string
			for _, k := range sortedKeys(r.Unexpected) {
				other = append(other, k+" "+loadgen.Thousands(r.Unexpected[k]))
			}
			if r.Errors > 0 {
				other = append(other, "transport errors "+loadgen.Thousands(r.Errors))
			}
			answers += fmt.Sprintf(", %s not: %s", loadgen.Thousands(n), strings.Join(other, ", "))
		}
		fmt.Fprintf(w, "  %-9s %10s %9s %9s %9s %9s %10s  %s\n", r.Name, loadgen.Thousands(int64(r.RPS)),
			loadgen.FormatDuration(r.Latency.P50), loadgen.FormatDuration(r.Latency.P99), loadgen.FormatDuration(r.Latency.P999), ratio(r.VsHello), ratio(r.VsTextbook), answers)
	}
	for _, r := range rep.Results {
		fmt.Fprintf(w, "  %-9s %s\n", r.Name+":", r.Description)
	}
	if rep.Rounds > 1 {
		for _, r := range rep.Results {
			each := make([]string, len(r.RoundsRPS))
			for i, v := range r.RoundsRPS {
				each[i] = loadgen.Thousands(int64(v))
			}
			fmt.Fprintf(w, "  %-9s req/s of each round, slowest first: %s\n", r.Name+":", strings.Join(each, " · "))
		}
	}
}

// throughputBench holds what the throughput benchmarks of one run share:
// the Redis connection and the live engine, started once.
type throughputBench struct {
	o      throughputOptions
	stderr io.Writer

	redis   *strategies.Redis
	engine  *Main
	dataDir string
	admin   *apiclient.Client
	tokens  []string
	closers []func()
}

func (b *throughputBench) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if b.engine != nil {
		if err := b.engine.Close(ctx); err != nil {
			fmt.Fprintf(b.stderr, "bench: stop engine: %v\n", err)
		}
	}
	if b.redis != nil && b.engine != nil && !b.redis.Embedded() {
		if _, err := b.redis.DeletePrefix(ctx, b.engine.Config.RedisKeyPrefix); err != nil {
			fmt.Fprintf(b.stderr, "bench: clean up Redis: %v\n", err)
		}
	}
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
	if b.admin != nil {
		b.admin.Close()
	}
	if b.dataDir != "" {
		os.RemoveAll(b.dataDir)
	}
}

// serveBare serves h on a fresh local port until the bench closes.
func (b *throughputBench) serveBare(h http.Handler) (loadgen.Target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return loadgen.Target{}, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	b.closers = append(b.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return loadgen.ParseTarget("http://" + ln.Addr().String())
}

var helloBody = []byte("hello\n")

func (b *throughputBench) hello(ctx context.Context) (benchResult, error) {
	t, err := b.serveBare(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(helloBody)
	}))
	if err != nil {
		return benchResult{}, err
	}
	req := t.AppendRequest(nil, "GET", "/", nil)
	res, err := b.measure(ctx, t, func(int, int64) []byte { return req }, http.StatusOK)
	res.Name, res.Description = "hello", "bare net/http handler writing 6 bytes: the machine's HTTP ceiling"
	return res, err
}

func (b *throughputBench) openRedis(ctx context.Context) error {
	if b.redis != nil {
		return nil
	}
	r, err := strategies.OpenRedis(ctx, b.o.RedisURL)
	if err != nil {
		return err
	}
	b.redis = r
	b.closers = append(b.closers, r.Close)
	return nil
}

func (b *throughputBench) textbook(ctx context.Context) (benchResult, error) {
	if err := b.openRedis(ctx); err != nil {
		return benchResult{}, err
	}
	// Stock no run can exhaust: every request runs the whole script.
	s, err := b.redis.LuaPerRequest(ctx, 1_000_000_000_000)
	if err != nil {
		return benchResult{}, err
	}
	b.closers = append(b.closers, func() { _ = s.Close(context.Background()) })
	t, err := b.serveBare(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	if err != nil {
		return benchResult{}, err
	}
	req := t.AppendRequest(nil, "POST", "/reserve", qtyOneBody, jsonContentType)
	res, err := b.measure(ctx, t, func(int, int64) []byte { return req }, http.StatusOK)
	res.Name, res.Description = "textbook", "bare handler, one EVALSHA of a plain reserve script per request: no auth, no limit, no outbox"
	return res, err
}

// startEngine runs the full engine once for live and soldout: real JWTs,
// the combiner, the outbox, the relay, the broker and the order writer.
func (b *throughputBench) startEngine(ctx context.Context) error {
	if b.engine != nil {
		return nil
	}
	if err := b.openRedis(ctx); err != nil { // to clean up after
		return err
	}
	dir, err := os.MkdirTemp("", "seckill-bench-")
	if err != nil {
		return err
	}
	b.dataDir = dir
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.RedisURL, cfg.DatabaseURL, cfg.BrokerURL = b.o.RedisURL, b.o.DatabaseURL, b.o.BrokerURL
	cfg.RateLimitIP, cfg.RateLimitUser = b.o.RateLimitIP, b.o.RateLimitUser
	// Keys of its own: no other node's relay sees its sales, and they are
	// all deleted afterwards.
	cfg.RedisKeyPrefix = "skbench" + randomHex(6)
	cfg.JWTSecret, cfg.AdminToken = randomHex(24), randomHex(24)
	cfg.ShutdownTimeout = 30 * time.Second
	logger, err := newLogger(b.stderr, "error")
	if err != nil {
		return err
	}
	m := &Main{Config: cfg, Stdout: io.Discard, Logger: logger}
	if err := m.Run(ctx); err != nil {
		return err
	}
	b.engine = m
	b.admin = apiclient.New("http://" + m.Addr())
	b.tokens = make([]string, b.o.Users)
	run := randomHex(4)
	for i := range b.tokens {
		if b.tokens[i], err = jwt.Sign([]byte(cfg.JWTSecret), "bench-"+run+"-"+strconv.Itoa(i), 2*time.Hour, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// liveSale creates a sale that is already on and preheats it.
func (b *throughputBench) liveSale(ctx context.Context, stock, limit int64) (string, error) {
	id := "bench-" + randomHex(6)
	now := time.Now()
	var body map[string]any
	st, err := b.admin.Do(ctx, "POST", "/admin/v1/sales", b.engine.Config.AdminToken, map[string]any{
		"id": id, "name": "bench", "price_cents": 100, "stock": stock, "per_user_limit": limit,
		"start_at": now.Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).UTC().Format(time.RFC3339Nano),
	}, &body)
	if err != nil || st != http.StatusCreated {
		return "", fmt.Errorf("create sale: %d %v %v", st, body, err)
	}
	if st, err := b.admin.Do(ctx, "POST", "/admin/v1/sales/"+id+"/preheat", b.engine.Config.AdminToken, nil, nil); err != nil || st != http.StatusOK {
		return "", fmt.Errorf("preheat sale: %d %v", st, err)
	}
	return id, nil
}

// reservationRequests renders one reservation request per buyer token.
func (b *throughputBench) reservationRequests(t loadgen.Target, sale string) [][]byte {
	reqs := make([][]byte, len(b.tokens))
	for i, tok := range b.tokens {
		reqs[i] = t.AppendRequest(nil, "POST", "/api/v1/sales/"+sale+"/reservations", qtyOneBody,
			loadgen.Header{Name: "Authorization", Value: "Bearer " + tok}, jsonContentType)
	}
	return reqs
}

func (b *throughputBench) live(ctx context.Context) (benchResult, error) {
	if err := b.startEngine(ctx); err != nil {
		return benchResult{}, err
	}
	// Stock and limits no run can exhaust: every request is a reservation.
	sale, err := b.liveSale(ctx, seckill.MaxSaleStock, seckill.MaxPerUserLimit)
	if err != nil {
		return benchResult{}, err
	}
	t, _ := loadgen.ParseTarget("http://" + b.engine.Addr())
	reqs := b.reservationRequests(t, sale)
	res, err := b.measure(ctx, t, func(_ int, seq int64) []byte { return reqs[seq%int64(len(reqs))] }, http.StatusAccepted)
	res.Name = "live"
	res.Description = fmt.Sprintf("POST reservations through the full API: JWT of %s buyers, combiner, reserve script with outbox; relay, broker and order writer running",
		loadgen.Thousands(int64(len(reqs))))
	return res, err
}

func (b *throughputBench) soldOut(ctx context.Context) (benchResult, error) {
	if err := b.startEngine(ctx); err != nil {
		return benchResult{}, err
	}
	sale, err := b.liveSale(ctx, 1, 1)
	if err != nil {
		return benchResult{}, err
	}
	// The one unit goes to a buyer outside the crowd, so the crowd hears
	// sold_out, never limit_exceeded.
	owner, err := jwt.Sign([]byte(b.engine.Config.JWTSecret), "bench-owner-"+randomHex(4), time.Hour, time.Now())
	if err != nil {
		return benchResult{}, err
	}
	var acc map[string]any
	if st, err := b.admin.Do(ctx, "POST", "/api/v1/sales/"+sale+"/reservations", owner, map[string]any{"qty": 1}, &acc); err != nil || st != http.StatusAccepted {
		return benchResult{}, fmt.Errorf("buy the only unit: %d %v %v", st, acc, err)
	}
	t, _ := loadgen.ParseTarget("http://" + b.engine.Addr())
	reqs := b.reservationRequests(t, sale)
	res, err := b.measure(ctx, t, func(_ int, seq int64) []byte { return reqs[seq%int64(len(reqs))] }, http.StatusConflict)
	res.Name, res.Description = "soldout", "POST reservations on a sold-out sale through the full API (409 sold_out)"
	return res, err
}

// measure warms up, then loads t for the configured duration, each worker
// on its own keep-alive connection, counting answers by status.
func (b *throughputBench) measure(ctx context.Context, t loadgen.Target, req func(worker int, seq int64) []byte, want int) (benchResult, error) {
	o := b.o
	conns := make([]*loadgen.Conn, o.Concurrency)
	for i := range conns {
		conns[i] = loadgen.NewConn(t)
		if err := conns[i].Connect(); err != nil {
			return benchResult{}, err
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var (
		expected atomic.Int64
		mu       sync.Mutex
		other    map[string]int64
		counting atomic.Bool
	)
	op := func(_ context.Context, c loadgen.Call) error {
		resp, err := conns[c.Worker].Do(req(c.Worker, c.Seq))
		if !counting.Load() {
			return err
		}
		switch {
		case err != nil:
			return err
		case resp.Status == want:
			expected.Add(1)
		default:
			key := strconv.Itoa(resp.Status)
			if code := apiclient.ErrorCode(resp.Body); code != "" {
				key += " " + code
			}
			mu.Lock()
			other[key]++
			mu.Unlock()
		}
		return nil
	}
	run := func(d time.Duration) (loadgen.Result, error) {
		return loadgen.Run(ctx, loadgen.Options{Workers: o.Concurrency, Duration: d, Rate: float64(o.Rate)}, op)
	}
	if o.Warmup > 0 {
		if _, err := run(o.Warmup); err != nil {
			return benchResult{}, err
		}
	}
	other = map[string]int64{}
	counting.Store(true)
	res, err := run(o.Duration)
	if err != nil {
		return benchResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, err
	}
	return benchResult{
		Requests: res.Calls, Expected: expected.Load(), Unexpected: other, Errors: res.Errors,
		RPS: res.Throughput(), Latency: res.Latency.Summary(), MaxLagMS: loadgen.Millis(res.MaxLag),
	}, nil
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

// svg draws the comparison as a horizontal bar chart, decisions per second
// on a log scale (the strategies span orders of magnitude), with each
// row's p99 and, in red, what it oversold. Hand-written: no dependencies.
func (rep *compareReport) svg() string {
	const (
		width, left, right = 900, 170, 250
		top, rowH, barH    = 70, 44, 24
	)
	rows := rep.Rows
	height := top + rowH*len(rows) + 60
	plotW := float64(width - left - right)
	maxV := 1.0
	for _, r := range rows {
		maxV = max(maxV, r.PerSec)
	}
	lo := maxV // the slowest row sets the first decade
	for _, r := range rows {
		if r.PerSec > 0 {
			lo = min(lo, r.PerSec)
		}
	}
	loExp := math.Floor(math.Log10(max(lo, 1)))
	hiExp := math.Ceil(math.Log10(maxV))
	if hiExp <= loExp {
		hiExp = loExp + 1
	}
	x := func(v float64) float64 {
		if v <= 0 {
			return 0
		}
		f := (math.Log10(v) - loExp) / (hiExp - loExp)
		return math.Max(0, math.Min(1, f)) * plotW
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="system-ui, sans-serif" font-size="13">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="16" font-weight="bold">Ways to deduct stock: %s buyers for %s units, %d at once</text>`+"\n",
		left-150, loadgen.Thousands(int64(rep.Buyers)), loadgen.Thousands(int64(rep.Stock)), rep.Concurrency)
	dialect, _, _ := strings.Cut(rep.Database, " ") // the URL would not fit
	fmt.Fprintf(&b, `<text x="%d" y="46" fill="#555">decisions per second (log scale) · database %s · redis %s</text>`+"\n",
		left-150, html.EscapeString(dialect), html.EscapeString(rep.Redis))
	for e := loExp; e <= hiExp; e++ {
		gx := float64(left) + x(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", gx, top-6, gx, top+rowH*len(rows))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#777">%s</text>`+"\n", gx, top+rowH*len(rows)+18, loadgen.Thousands(int64(math.Pow(10, e))))
	}
	for i, r := range rows {
		y := top + i*rowH
		color := "#3b82f6"
		if r.Store == "sql" {
			color = "#8b5cf6"
		}
		if r.Strategy == "seckill" {
			color = "#16a34a"
		}
		if r.Oversold > 0 {
			color = "#dc2626"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-10, y+barH/2+5, html.EscapeString(r.Strategy))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s" rx="3"><title>%s</title></rect>`+"\n",
			left, y, math.Max(x(r.PerSec), 1), barH, color, html.EscapeString(r.Description))
		label := fmt.Sprintf("%s/s · p99 %s · sold %s", loadgen.Thousands(int64(r.PerSec)), loadgen.FormatDuration(r.Latency.P99), loadgen.Thousands(r.Sold))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(left)+x(r.PerSec)+8, y+barH/2+5, html.EscapeString(label))
		if r.Oversold > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#dc2626" font-weight="bold">oversold %s</text>`+"\n",
				float64(left)+x(r.PerSec)+8, y+barH/2+20, loadgen.Thousands(r.Oversold))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">purple: SQL · blue: Redis · green: seckill · red: oversold</text>`+"\n", left-150, height-12)
	b.WriteString("</svg>\n")
	return b.String()
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
