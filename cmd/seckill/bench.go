package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/seckill-dev/seckill/internal/bench"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/metrics"
	"github.com/seckill-dev/seckill/internal/rush"
)

// runBench is `seckill bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		bench.Usage(stderr)
		return errUsage
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "-h", "--help", "help":
		bench.Usage(stderr)
		return flag.ErrHelp
	case "rush":
		return runBenchRush(ctx, rest, stdout, stderr)
	case "compare":
		return runBenchCompare(ctx, rest, stdout, stderr)
	case "fairness":
		return runBenchFairness(ctx, rest, stdout, stderr)
	case "hello", "textbook", "live", "soldout", "all", "entries":
		return runBenchThroughput(ctx, sub, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "seckill bench: unknown benchmark %q\n\n", sub)
		bench.Usage(stderr)
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

// runBenchThroughput is `seckill bench hello|textbook|live|soldout|all`.
func runBenchThroughput(ctx context.Context, which string, args []string, stdout, stderr io.Writer) error {
	o := bench.DefaultThroughputOptions()
	var (
		asJSON bool
		only   string
	)
	fs := flagSet("bench "+which, stderr)
	if err := errors.Join(
		durationFlag(fs, &o.Duration, "duration", o.Duration, "how long each benchmark is measured"),
		durationFlag(fs, &o.Warmup, "warmup", o.Warmup, "unmeasured load before each benchmark"),
		intFlag(fs, &o.Concurrency, "concurrency", o.Concurrency, "keep-alive connections, each with one request in flight"),
		intFlag(fs, &o.Rate, "rate", o.Rate, "fixed arrival rate in requests/s (latency from the intended send time); 0 = closed loop"),
		intFlag(fs, &o.Users, "users", o.Users, "distinct buyers (tokens) of the live and soldout benchmarks"),
		intFlag(fs, &o.Clients, "clients", o.Clients, "distinct client addresses the buyers come from (X-Forwarded-For of a trusted proxy); 0: one per buyer"),
		intFlag(fs, &o.Rounds, "rounds", o.Rounds, "run the sequence this many times, interleaved; ratios are medians of the per-round ratios"),
	); err != nil {
		return err
	}
	stringFlag(fs, &o.RedisURL, "redis-url", "", "Redis of textbook, live and soldout; empty runs an in-process one "+
		"(live and soldout write under a key prefix of their own, deleted afterwards)")
	stringFlag(fs, &o.DatabaseURL, "database-url", "", "database of the live engines; empty uses SQLite in a temporary directory")
	stringFlag(fs, &o.BrokerURL, "broker-url", "", "broker of the live engines; empty runs NATS JetStream in-process")
	fs.StringVar(&o.RateLimitIP, "rate-limit-ip", o.RateLimitIP, "the engines' limit per client IP (20/1m, 5/1s or off); the -nolimit benchmarks run with none")
	fs.StringVar(&o.RateLimitUser, "rate-limit-user", o.RateLimitUser, "the engines' limit per buyer (10/1m, 5/1s or off)")
	fs.BoolVar(&asJSON, "json", false, "print the results as JSON")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the server side (this process: engines and baselines) to this file")
	fs.StringVar(&only, "only", "", "comma-separated benchmarks to run instead of the subcommand's set")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	names, err := bench.Names(which, only)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, "error")
	if err != nil {
		return err
	}
	rep, err := bench.Throughput(ctx, names, o, bench.Wiring{
		StartEngine: func(ctx context.Context, c bench.EngineConfig) (bench.Engine, error) {
			return runBenchEngine(ctx, c, logger)
		},
		Server: func(h http.Handler) *http.Server { return httpapi.NewHTTPServer(h, logger) },
	}, stderr)
	if err != nil {
		return err
	}
	return writeReport(stdout, asJSON, rep, func(w io.Writer) error { rep.Print(w); return nil })
}

// runBenchEngine runs the engine serve runs, as bench asks for it.
func runBenchEngine(ctx context.Context, c bench.EngineConfig, logger *slog.Logger) (bench.Engine, error) {
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = c.DataDir
	cfg.RedisURL, cfg.DatabaseURL, cfg.BrokerURL = c.RedisURL, c.DatabaseURL, c.BrokerURL
	cfg.RateLimitIP, cfg.RateLimitUser = c.RateLimitIP, c.RateLimitUser
	cfg.TrustedProxies = c.TrustedProxies
	cfg.QueuePerIP = c.QueuePerIP
	cfg.RedisKeyPrefix, cfg.BrokerQueue, cfg.Namespace = c.RedisKeyPrefix, c.BrokerQueue, c.Namespace
	cfg.JWTSecret, cfg.AdminToken = c.JWTSecret, c.AdminToken
	cfg.ShutdownTimeout = 30 * time.Second
	if c.APIOnly {
		cfg.Roles = "api"
	}
	m := &Main{Config: cfg, Stdout: io.Discard, Logger: logger}
	if isRabbitMQ(cfg.BrokerURL) {
		// Its queues go when it closes, and those of killed runs now.
		if err := noteBenchQueue(ctx, cfg.BrokerURL, cfg.BrokerQueue); err != nil {
			logger.Warn("bench: leftover RabbitMQ queues", "err", err)
		}
		if err := m.Run(ctx); err != nil {
			return nil, errors.Join(err, forgetBenchQueue(context.WithoutCancel(ctx), cfg.BrokerURL, cfg.BrokerQueue))
		}
		return rabbitBenchEngine{m}, nil
	}
	if err := m.Run(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// rabbitBenchEngine is a bench engine on RabbitMQ: closing it deletes
// its queues.
type rabbitBenchEngine struct{ *Main }

func (e rabbitBenchEngine) Close(ctx context.Context) error {
	err := e.Main.Close(ctx)
	return errors.Join(err, forgetBenchQueue(context.WithoutCancel(ctx), e.Config.BrokerURL, e.Config.BrokerQueue))
}

// Unsettled counts the claims this engine took that are not yet orders or
// failed orders: its outbox entries (a handed-off batch stays in the
// outbox until committed) and what waits in its broker. bench waits for 0
// after each window of a live benchmark.
func (m *Main) Unsettled(ctx context.Context) (int64, error) {
	n, err := m.stock.Outbox().OutboxTotal(ctx)
	if b, ok := m.broker.(metrics.BacklogReader); ok && err == nil {
		var l int64
		l, err = b.Backlog(ctx)
		n += l
	}
	return n, err
}

// runBenchCompare is `seckill bench compare`.
func runBenchCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := bench.CompareOptions{Stock: 200, Buyers: 10_000, Concurrency: 64, SQLConns: 64}
	var (
		only, svgPath string
		asJSON        bool
	)
	fs := flagSet("bench compare", stderr)
	stringFlag(fs, &o.RedisURL, "redis-url", "", "Redis of the Redis strategies; empty runs an in-process one (miniredis)")
	stringFlag(fs, &o.DatabaseURL, "database-url", "", "database of the SQL strategies (mysql://, postgres://, sqlite:PATH); empty uses SQLite in a temporary directory")
	fs.StringVar(&only, "strategies", "", "comma-separated strategies to run (default all): "+strings.Join(bench.StrategyNames(), ", "))
	fs.StringVar(&svgPath, "svg", "", "write a bar chart of the results to this SVG file")
	fs.BoolVar(&asJSON, "json", false, "print the results as JSON")
	if err := errors.Join(
		intFlag(fs, &o.Stock, "stock", o.Stock, "units on sale"),
		intFlag(fs, &o.Buyers, "buyers", o.Buyers, "buyers, one request each"),
		intFlag(fs, &o.Concurrency, "concurrency", o.Concurrency, "buyers in flight at once"),
		intFlag(fs, &o.SQLConns, "sql-conns", o.SQLConns, "database connections of the SQL strategies (SQLite: at most 8)"),
	); err != nil {
		return err
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if only != "" {
		o.Strategies = strings.Split(only, ",")
	}
	rep, err := bench.Compare(ctx, o, stderr)
	if err != nil {
		return err
	}
	if svgPath != "" {
		if err := os.WriteFile(svgPath, []byte(rep.SVG()), 0o644); err != nil {
			return err
		}
	}
	if err := writeReport(stdout, asJSON, rep, func(w io.Writer) error {
		rep.Print(w)
		if svgPath != "" {
			fmt.Fprintf(w, "  chart written to %s\n", svgPath)
		}
		return nil
	}); err != nil {
		return err
	}
	return rep.Err()
}
