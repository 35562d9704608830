package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/seckill-dev/seckill/internal/redact"
	"github.com/seckill-dev/seckill/internal/rush"
	"github.com/seckill-dev/seckill/internal/secrets"
)

// runDemo is `seckill demo`: the engine on the embedded default (or any
// backends its flags name), one sale, a crowd of simulated buyers released
// at the start instant, a live progress line on stderr and a report on
// stdout. It fails when the report shows a broken promise.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, opts, asJSON, serve, err := demoSettings(args, stderr)
	if err != nil {
		return err
	}
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "seckill-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.DataDir = dir
	}
	logger, err := newLogger(stderr, cfg.LogLevel)
	if err != nil {
		return err
	}
	m := &Main{Config: cfg, Stdout: io.Discard, Logger: logger}
	if err := m.Run(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		if cerr := m.Close(sctx); cerr != nil {
			logger.Error("shutdown", "err", cerr)
		}
	}()
	opts.URLs = []string{"http://" + m.Addr()}
	opts.AdminToken, opts.JWTSecret = m.Config.AdminToken, m.Config.JWTSecret
	opts.Backend = describeBackends(&m.Config)
	where := "admin_token in " + filepath.Join(cfg.DataDir, secrets.File)
	if cfg.AdminToken != "" {
		where = "the one --admin-token gave"
	}
	fmt.Fprintf(stderr, "control room: http://%s/admin  (admin token: %s)\n", m.Addr(), where)
	err = rushAndReport(ctx, opts, "demo", asJSON, stdout, stderr)
	if serve && ctx.Err() == nil {
		fmt.Fprintf(stderr, "still serving on http://%s (control room /admin, buyer page /sales/{id}); Ctrl-C stops it\n", m.Addr())
		<-ctx.Done()
	}
	return err
}

// demoSettings reads demo's flags. The environment gives their defaults
// as for serve, except for production's secrets, data, backends and a
// non-loopback address (demoIgnoreEnv).
func demoSettings(args []string, stderr io.Writer) (cfg Config, opts rush.Options, asJSON, serve bool, err error) {
	cfg, opts = demoConfig(), rush.DefaultOptions()
	fs := flagSet("demo", stderr)
	if err = cfg.register(fs); err != nil {
		return
	}
	if err = registerRushFlags(fs, &opts); err != nil {
		return
	}
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&cfg.BuyerPay, "buyer-pay", cfg.BuyerPay, "let a buyer pay by saying so (POST /api/v1/reservations/{id}/pay, the buyer page's Pay button): on or off; demos only, never a real sale")
	fs.BoolVar(&serve, "serve", false, "keep the engine serving after the rush, so the control room and the buyer page can be watched (Ctrl-C stops it); give --lead time to open them")
	if err = parse(fs, args); err != nil {
		return
	}
	demoIgnoreEnv(fs, &cfg, stderr)
	err = opts.Validate()
	return
}

// demoIgnoreEnv undoes what the environment set of the settings a demo
// must not take from a production host unless its flag says so: run on a
// node whose environment configures serve, `demo --serve` would otherwise
// mint buyer tokens with production's secret, write into production's
// data dir and backends, and listen on a public address.
func demoIgnoreEnv(fs *flag.FlagSet, cfg *Config, warn io.Writer) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	d := demoConfig()
	for _, s := range []struct {
		name string
		p    *string
		def  string
	}{
		{"jwt-secret", &cfg.JWTSecret, d.JWTSecret},
		{"admin-token", &cfg.AdminToken, d.AdminToken},
		{"data-dir", &cfg.DataDir, d.DataDir},
		{"redis-url", &cfg.RedisURL, d.RedisURL},
		{"database-url", &cfg.DatabaseURL, d.DatabaseURL},
		{"broker-url", &cfg.BrokerURL, d.BrokerURL},
		{"jwt-jwks-url", &cfg.JWTJWKSURL, d.JWTJWKSURL},
		{"jwt-issuer", &cfg.JWTIssuer, d.JWTIssuer},
		{"jwt-audience", &cfg.JWTAudience, d.JWTAudience},
		{"http-addr", &cfg.HTTPAddr, d.HTTPAddr},
		{"payment-webhook-secret", &cfg.PaymentWebhookSecret, d.PaymentWebhookSecret},
		{"service-token", &cfg.ServiceToken, d.ServiceToken},
	} {
		if _, set := os.LookupEnv(envName(s.name)); !set || given[s.name] || *s.p == s.def {
			continue
		}
		if s.name == "http-addr" && loopbackAddr(*s.p) {
			continue
		}
		*s.p = s.def
		fmt.Fprintf(warn, "demo: ignoring $%s (a production setting); pass --%s to use it\n", envName(s.name), s.name)
	}
}

// loopbackAddr reports whether addr (host:port) listens on loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// demoConfig is serve's DefaultConfig as a demo changes it.
func demoConfig() Config {
	cfg := DefaultConfig()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = "" // a temporary one unless --data-dir says otherwise
	cfg.LogLevel = "error"
	// The crowd comes from one address and is polite (one request per
	// buyer): rate limits would only turn it away. --rate-limit-* still
	// turn them on.
	cfg.RateLimitIP, cfg.RateLimitUser = "off", "off"
	// The buyer page of a demo lets anyone pick a name; serve never does
	// unless told to (--demo-login on).
	cfg.DemoLogin = "on"
	// The crowd and the engine share this machine's cores, so a request
	// may wait on the crowd's own load longer than a production node's
	// budget; the demo shows the sale, not that. --request-budget still
	// sets it.
	cfg.RequestBudget = 30 * time.Second
	return cfg
}

// describeBackends names the backends of cfg for the report.
func describeBackends(cfg *Config) string {
	return fmt.Sprintf("redis %s, database %s, broker %s",
		redact.URLOr(cfg.RedisURL, "embedded"), redact.URL(cfg.databaseURL()), redact.URLOr(cfg.BrokerURL, "embedded"))
}

// rushAndReport runs the rush, prints its report and judges it.
func rushAndReport(ctx context.Context, opts rush.Options, name string, asJSON bool, stdout, stderr io.Writer) error {
	opts.ProgressTo = stderr
	rep, err := rush.Run(ctx, opts)
	if err != nil {
		return err
	}
	if err := writeReport(stdout, asJSON, rep, func(w io.Writer) error { rep.Print(w, name); return nil }); err != nil {
		return err
	}
	return rep.Err()
}

// registerRushFlags adds the flags of a rush's sale and crowd to fs.
func registerRushFlags(fs *flag.FlagSet, o *rush.Options) error {
	if err := errors.Join(
		intFlag(fs, &o.Stock, "stock", o.Stock, "units on sale"),
		intFlag(fs, &o.Buyers, "buyers", o.Buyers, "simulated buyers, released at the start instant"),
		intFlag(fs, &o.Concurrency, "concurrency", o.Concurrency, "buyers in flight at once (one keep-alive connection each)"),
		intFlag(fs, &o.Limit, "limit", o.Limit, "per-user limit of the sale (each buyer asks for one unit)"),
		durationFlag(fs, &o.Lead, "lead", o.Lead, "the sale starts this long after it is created"),
		durationFlag(fs, &o.OrderTimeout, "order-timeout", o.OrderTimeout, "how long after the start every claim may take to become an order"),
		durationFlag(fs, &o.PollInterval, "poll-interval", o.PollInterval, "how often a buyer polls a claimed reservation"),
	); err != nil {
		return err
	}
	fs.BoolVar(&o.IdempotencyKeys, "idempotency-keys", o.IdempotencyKeys,
		"every buyer sends an Idempotency-Key (keyed requests bypass the local sold-out flag)")
	return nil
}
