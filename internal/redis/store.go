// Package redis owns the live inventory of every sale: the stock store
// (seckill.StockStore) on Redis standalone, Sentinel or Cluster, and the
// embedded default on an in-process miniredis, both driven through the same
// rueidis client and the same Lua scripts.
//
// A Store (New, StartEmbedded) is the connection; it opens and closes the
// client. Each port is a small type over it, got from the Store, with its
// methods in a file of its own:
//
//	StockStore()   seckill.StockStore, the request paths' reads   stock.go, replay.go
//	RateLimiter()  seckill.RateLimiter                            ratelimit.go
//	Outbox()       the relay's outbox (relay.Outbox)              outbox.go
//	Restorer()     restore.Stock                                  restore.go
//	Ledger()       reconcile.StockLedger, for reconciliation      ledger.go
//	Healer()       the heal watcher's side (heal.Stock)           heal.go
//	Archive()      freeing an ended sale's keys (archive.Stock)   archive.go
//	Admin()        an operator's changes (saleadmin.Live)         admin.go
//	Lottery()      a lottery sale's entries and winners           lottery.go
//	Queue()        a queue sale's line                            queue.go
//
// They share the key layout below, so they stay in one package.
//
// Each sale's state lives in five keys that share one Cluster hash slot
// (<prefix> is "sk" unless WithKeyPrefix says otherwise):
//
//	<prefix>:{<sale>}:stock   hash {total, reserved, limit, start_ms, end_ms}
//	<prefix>:{<sale>}:buyers  hash user -> units held (no expiry)
//	<prefix>:{<sale>}:idem    hash idempotency key -> earlier reservation
//	<prefix>:{<sale>}:res     hash reservation id -> record
//	<prefix>:{<sale>}:outbox  stream of reservations for the relay
//
// so one script call can decide a whole batch of requests and append the
// claims to the outbox atomically. One more key, outside any sale's slot and
// touched by no script, lists the sales whose outbox the relay must read:
//
//	<prefix>:outboxes         set of sale ids (see outbox.go)
//	<prefix>:restocked        pub/sub channel of sale ids with stock back (see restore.go)
package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

var (
	// Preheat is idempotent, so a lost reply may be retried.
	preheatScript = rueidis.NewLuaScriptRetryable(lua("stock_write.lua", "preheat.lua"))
	// The reserve script's source is also sent by hand, with a WAIT
	// behind it (durability.go).
	reserveLua = lua("outcomes.lua", "ratelimits.lua", "reserve.lua")
	// Reserve is never retried by the client: without an idempotency key a
	// resent batch would reserve twice.
	reserveScript = rueidis.NewLuaScript(reserveLua)
)

// DefaultKeyPrefix is the first segment of every key the store writes.
const DefaultKeyPrefix = "sk"

// MaxBatch is the most requests one Reserve call accepts. A script blocks
// its Redis node while it runs, some microseconds per request; this keeps
// one call to a few milliseconds.
const MaxBatch = 1024

// Reservation statuses held in the res hash.
const (
	// StatusActive is a reservation that holds its units.
	StatusActive = "active"
)

// Store is the connection to Redis that every port type of this package
// shares (StockStore, Outbox, Restorer, ...): it opens the client and closes
// it. It is safe for concurrent use; its client pipelines concurrent calls
// onto shared connections by itself.
type Store struct {
	*conn
	closeOnce sync.Once
}

// conn is what the port types share: the client, the key layout and the
// sales' bucket layouts. Its methods are the package's building blocks;
// the exported methods live on the port types (see the package doc).
type conn struct {
	client   rueidis.Client
	prefix   string
	embedded *miniredis.Miniredis // nil unless started by StartEmbedded
	layouts  bucketCache          // each sale's stock buckets (buckets.go)
	// waitReplicas > 0 makes Reserve WAIT for that many replicas
	// (WithWaitReplicas).
	waitReplicas int
	waitTimeout  time.Duration
	// onAppend, if set, is told of every Reserve that appended claims to
	// an outbox, and how many (WithOnOutboxAppend).
	onAppend func(claims int)

	// afterMoveOut, if set, runs between a move's two steps; tests use it
	// to crash a rebalance halfway.
	afterMoveOut func() error
	// moveStale, if set, replaces the age after which a journalled move
	// is finished by another rebalance (tests).
	moveStale time.Duration
	// minBuckets, if set, loads every sale with at least that many
	// buckets, so tests can run whole suites on bucketed sales.
	minBuckets int64
}

// Option configures a Store.
type Option func(*options)

type options struct {
	prefix       string
	waitReplicas int
	waitTimeout  time.Duration
	onAppend     func(claims int)
}

// WithOnOutboxAppend calls fn after every Reserve call that claimed units,
// and so appended to an outbox, with the number of claims: a relay of
// this process wakes on it instead of finding the entries at its next
// poll, and a lingering relay learns when a full batch is waiting. fn
// must not block.
func WithOnOutboxAppend(fn func(claims int)) Option {
	return func(o *options) { o.onAppend = fn }
}

// WithKeyPrefix replaces DefaultKeyPrefix, so tests (or two deployments
// sharing one Redis) cannot see each other's keys. The prefix must not
// contain '{' or '}', which would move the hash tag.
func WithKeyPrefix(prefix string) Option {
	return func(o *options) { o.prefix = prefix }
}

// New connects to the Redis at url: redis://[user:pass@]host:port[/db], or
// rediss:// for TLS. More Cluster seed nodes (or Sentinels) go in
// ?addr=host:port parameters, and ?master_set=NAME selects Sentinel.
// Cluster mode is detected by the client. New fails when no node answers.
func New(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, url, o, nil)
}

// StartEmbedded starts an in-process Redis-compatible server (miniredis) on
// 127.0.0.1 and returns a Store connected to it through the same client and
// scripts as production. The data lives in memory only. Close stops the
// server too.
func StartEmbedded(ctx context.Context, opts ...Option) (*Store, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("redis: start embedded: %w", err)
	}
	s, err := newStore(ctx, "redis://"+srv.Addr(), o, srv)
	if err != nil {
		srv.Close()
		return nil, err
	}
	return s, nil
}

func buildOptions(opts []Option) (options, error) {
	o := options{prefix: DefaultKeyPrefix}
	for _, opt := range opts {
		opt(&o)
	}
	if o.prefix == "" || strings.ContainsAny(o.prefix, "{}") {
		return o, fmt.Errorf("redis: key prefix %q must be non-empty and free of braces", o.prefix)
	}
	return o, nil
}

// newStore connects to the Redis at url (srv's, for an embedded store).
func newStore(ctx context.Context, url string, o options, srv *miniredis.Miniredis) (*Store, error) {
	copt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	// Client-side caching needs CLIENT TRACKING, which miniredis lacks,
	// and the store reads nothing that could be served from a cache.
	copt.DisableCache = true
	if o.waitReplicas > 0 {
		// Each reserve batch takes a dedicated connection for its
		// script + WAIT. The combiner keeps one batch per sale in flight,
		// but nothing else should open hundreds of connections at once.
		copt.BlockingPoolSize = durablePoolSize
	}
	raw, err := rueidis.NewClient(copt)
	if err != nil {
		return nil, fmt.Errorf("redis: connect: %w", classify(err))
	}
	client := unrecycled{raw}
	s := &Store{conn: &conn{client: client, prefix: o.prefix, embedded: srv, waitReplicas: o.waitReplicas, waitTimeout: o.waitTimeout, onAppend: o.onAppend}}
	if s.waitReplicas > 0 && s.waitTimeout <= 0 {
		s.waitTimeout = DefaultWaitTimeout
	}
	if err := s.Ping(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("redis: connect: %w", err)
	}
	return s, nil
}

// Close closes the client and, for an embedded store, stops the server.
// It is safe to call more than once.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		s.client.Close()
		if s.embedded != nil {
			s.embedded.Close()
		}
	})
}

// Ping reports whether Redis answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Do(ctx, s.client.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("ping: %w", classify(err))
	}
	return nil
}

// keys returns the five keys of a sale, in the order the scripts take
// them. The {sale} hash tag puts them in one Cluster slot.
func (s *conn) keys(saleID string) []string {
	base := s.prefix + ":{" + saleID + "}:"
	return []string{base + "stock", base + "buyers", base + "idem", base + "res", base + "outbox"}
}

const (
	keyStock = iota
	keyBuyers
	keyIdem
	keyRes
	keyOutbox
)

// errUnavailable is what callers see when Redis cannot be reached: a
// temporary condition the API answers with 503 and Retry-After.
var errUnavailable = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "The stock store is unavailable; retry later."}

// classify turns client errors into what callers branch on: failures to
// reach Redis (network, timeouts, a Cluster failing over) are unavailable;
// anything else (an error reply from a script, a bad reply shape) stays
// internal.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok {
		if rerr.IsClusterDown() || rerr.IsTryAgain() || rerr.IsLoading() ||
			strings.HasPrefix(rerr.Error(), "MASTERDOWN") || strings.HasPrefix(rerr.Error(), "READONLY") {
			return unavailable(err)
		}
		return err
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, rueidis.ErrClosing) || errors.Is(err, context.DeadlineExceeded) {
		return unavailable(err)
	}
	return err
}

func unavailable(err error) error { return fmt.Errorf("%w: %w", errUnavailable, err) }

// ServerCPU is the CPU time the Redis server has used since it started
// (INFO cpu: used_cpu_user + used_cpu_sys), for benchmarks that report
// Redis's CPU per request. On a Cluster it is the sum over the masters.
func (s *Store) ServerCPU(ctx context.Context) (time.Duration, error) {
	var total time.Duration
	for _, c := range s.client.Nodes() {
		text, err := c.Do(ctx, c.B().Info().Section("cpu").Build()).ToString()
		if err != nil {
			return 0, fmt.Errorf("info cpu: %w", classify(err))
		}
		for _, line := range strings.Split(text, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
				continue
			}
			secs, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("info cpu: %s=%q: %w", k, v, err)
			}
			total += time.Duration(secs * float64(time.Second))
		}
	}
	return total, nil
}

// unrecycled is the store's client: it pins every command it sends, so
// that rueidis never recycles one. rueidis retries a read-only command on
// a new connection when its connection breaks, and recycles the command
// once it is answered there, while the broken connection's writer may
// still be reading it: a data race, which the race detector caught in a
// fault test that restarts Redis. The store builds a command a batch, not
// a request, so the allocations this costs are few.
type unrecycled struct{ rueidis.Client }

func (c unrecycled) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return c.Client.Do(ctx, cmd.Pin())
}

func (c unrecycled) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	for i := range multi {
		multi[i] = multi[i].Pin()
	}
	return c.Client.DoMulti(ctx, multi...)
}
