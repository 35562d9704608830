package strategies

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

var (
	//go:embed lock_release.lua
	lockReleaseLua string
	//go:embed reserve_plain.lua
	reservePlainLua string

	lockReleaseScript  = rueidis.NewLuaScript(lockReleaseLua)
	reservePlainScript = rueidis.NewLuaScript(reservePlainLua)
)

// Redis is the Redis the Redis strategies run on: a server by URL, or an
// in-process miniredis.
type Redis struct {
	client rueidis.Client
	url    string
	mini   *miniredis.Miniredis
	engine Engine
}

// Engine is the seam to seckill's own reserve path, which the "seckill"
// strategy races: in the engine, internal/redis's stock store behind
// internal/combiner. The command that runs the comparison supplies it
// (WithEngine), so that this package imports no other adapter.
type Engine interface {
	// OpenStock opens a stock store on the Redis at url whose every key
	// starts with keyPrefix + ":".
	OpenStock(ctx context.Context, url, keyPrefix string) (EngineStock, error)
}

// EngineStock is the engine's stock store with its combiner in front.
type EngineStock interface {
	Preheat(ctx context.Context, s *seckill.Sale) (created bool, err error)
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
	// ReserveOne decides one request, batched with whatever else is
	// waiting for the same sale.
	ReserveOne(ctx context.Context, saleID string, req seckill.ReserveRequest) (seckill.ReserveResult, error)
	// Close drains the combiner and closes the store.
	Close(ctx context.Context) error
}

// RedisOption configures OpenRedis.
type RedisOption func(*Redis)

// WithEngine gives the "seckill" strategy seckill's own reserve path;
// without it that strategy does not open.
func WithEngine(e Engine) RedisOption { return func(r *Redis) { r.engine = e } }

// engineKeyPrefix is internal/redis's DefaultKeyPrefix: the keys of a
// deployment, which DeletePrefix never touches.
const engineKeyPrefix = "sk"

// OpenRedis connects to the Redis at url (redis://, rediss://; see
// internal/redis.New), or, when url is empty, starts an in-process
// miniredis, the embedded default's server. (The strategies need raw
// commands as well as internal/redis's store, so they start the server
// themselves instead of through redis.StartEmbedded, which keeps its
// address private.)
func OpenRedis(ctx context.Context, url string, opts ...RedisOption) (*Redis, error) {
	r := &Redis{url: url}
	for _, o := range opts {
		o(r)
	}
	if url == "" {
		r.mini = miniredis.NewMiniRedis()
		if err := r.mini.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		r.url = "redis://" + r.mini.Addr()
	}
	opt, err := rueidis.ParseURL(r.url)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("redis: %w", err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("redis: connect: %w", err)
	}
	r.client = c
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		r.Close()
		return nil, fmt.Errorf("redis: ping: %w", err)
	}
	return r, nil
}

// Embedded reports whether r is the in-process server.
func (r *Redis) Embedded() bool { return r.mini != nil }

// Close closes the client, and stops the embedded server.
func (r *Redis) Close() {
	if r.client != nil {
		r.client.Close()
	}
	if r.mini != nil {
		r.mini.Close()
	}
}

// keys is a strategy's set of keys, deleted by Close.
type keys struct {
	r    *Redis
	base string // "<unique>:{bench}:"
	del  []string

	once sync.Once
	err  error
}

func (r *Redis) newKeys() *keys {
	return &keys{r: r, base: uniqueName("skcmp") + ":{bench}:"}
}

func (k *keys) key(name string) string {
	key := k.base + name
	k.del = append(k.del, key)
	return key
}

func (k *keys) Close(ctx context.Context) error {
	k.once.Do(func() {
		if len(k.del) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// One DEL per key: they need not share a Cluster slot.
		c := k.r.client
		cmds := make(rueidis.Commands, len(k.del))
		for i, key := range k.del {
			cmds[i] = c.B().Del().Key(key).Build()
		}
		for _, res := range c.DoMulti(ctx, cmds...) {
			if err := res.Error(); err != nil {
				k.err = fmt.Errorf("delete keys: %w", err)
			}
		}
	})
	return k.err
}

// LockTTL is how long a redis-lock holder keeps the lock at most. It is
// far longer than the three round trips the lock guards, so it does not
// expire under a live holder on a healthy machine.
const LockTTL = 5 * time.Second

// Lock guards a read-then-write of a stock counter with a lock: SET lock
// <token> NX PX, GET stock, SET stock n-1, then release the lock only if
// its value is still our token (lock_release.lua). A buyer who finds the
// lock taken backs off for about a millisecond and tries again; one who
// reads zero stock, with or without the lock, is refused. The stock
// counter only falls, so a zero read without the lock is final.
func (r *Redis) Lock(ctx context.Context, stock int64) (Strategy, error) {
	k := r.newKeys()
	l := &redisLock{keys: k, lock: k.key("lock"), stock: k.key("stock")}
	c := r.client
	if err := c.Do(ctx, c.B().Set().Key(l.stock).Value(strconv.FormatInt(stock, 10)).Build()).Error(); err != nil {
		return nil, fmt.Errorf("set stock: %w", err)
	}
	return l, nil
}

type redisLock struct {
	*keys
	lock, stock string
}

func (l *redisLock) get(ctx context.Context) (int64, error) {
	c := l.r.client
	n, err := c.Do(ctx, c.B().Get().Key(l.stock).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("get stock: %w", err)
	}
	return n, nil
}

func (l *redisLock) Reserve(ctx context.Context, _ string) (bool, error) {
	c := l.r.client
	token := strconv.FormatUint(rand.Uint64(), 36)
	for {
		if n, err := l.get(ctx); err != nil || n <= 0 {
			return false, err
		}
		err := c.Do(ctx, c.B().Set().Key(l.lock).Value(token).Nx().PxMilliseconds(LockTTL.Milliseconds()).Build()).Error()
		if err == nil {
			return l.holding(ctx, token)
		}
		if !rueidis.IsRedisNil(err) {
			return false, fmt.Errorf("lock: %w", err)
		}
		backoff := time.Duration(500+rand.IntN(1000)) * time.Microsecond
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// holding runs the read-then-write under the lock, and releases it.
func (l *redisLock) holding(ctx context.Context, token string) (claimed bool, err error) {
	c := l.r.client
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if rerr := lockReleaseScript.Exec(rctx, c, []string{l.lock}, []string{token}).Error(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("release lock: %w", rerr))
		}
	}()
	n, err := l.get(ctx)
	if err != nil || n <= 0 {
		return false, err
	}
	if err := c.Do(ctx, c.B().Set().Key(l.stock).Value(strconv.FormatInt(n-1, 10)).Build()).Error(); err != nil {
		return false, fmt.Errorf("set stock: %w", err)
	}
	return true, nil
}

func (l *redisLock) Remaining(ctx context.Context) (int64, error) { return l.get(ctx) }

// LuaPerRequest deducts with one EVALSHA of reserve_plain.lua per request:
// atomic, so correct, and one script call per buyer.
func (r *Redis) LuaPerRequest(ctx context.Context, stock int64) (Strategy, error) {
	k := r.newKeys()
	p := &plainLua{keys: k, stock: k.key("stock")}
	c := r.client
	cmd := c.B().Hset().Key(p.stock).FieldValue().FieldValue("total", strconv.FormatInt(stock, 10)).FieldValue("reserved", "0").Build()
	if err := c.Do(ctx, cmd).Error(); err != nil {
		return nil, fmt.Errorf("set stock: %w", err)
	}
	return p, nil
}

type plainLua struct {
	*keys
	stock string
}

var qtyOne = []string{"1"}

func (p *plainLua) Reserve(ctx context.Context, _ string) (bool, error) {
	n, err := reservePlainScript.Exec(ctx, p.r.client, []string{p.stock}, qtyOne).AsInt64()
	if err != nil {
		return false, fmt.Errorf("reserve: %w", err)
	}
	return n == 1, nil
}

func (p *plainLua) Remaining(ctx context.Context) (int64, error) {
	c := p.r.client
	v, err := c.Do(ctx, c.B().Hmget().Key(p.stock).Field("total", "reserved").Build()).AsIntSlice()
	if err != nil || len(v) != 2 {
		return 0, fmt.Errorf("read stock: %v", err)
	}
	return v[0] - v[1], nil
}

// Seckill is seckill's own path, through the Engine: internal/redis's
// reserve script (window, per-user limit of 1, reservation record and
// outbox append in the same call) behind internal/combiner, which sends
// the requests that arrive while a call is in flight together in the next
// call.
func (r *Redis) Seckill(ctx context.Context, stock int64) (Strategy, error) {
	if r.engine == nil {
		return nil, errors.New("seckill strategy: no engine (OpenRedis without WithEngine)")
	}
	prefix := uniqueName("skcmp")
	store, err := r.engine.OpenStock(ctx, r.url, prefix)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	sale := &seckill.Sale{
		ID: "bench", Name: "bench compare", Stock: stock, PurchaseLimit: 1,
		StartAt: now.Add(-time.Second), EndAt: now.Add(24 * time.Hour),
	}
	s := &seckillStrategy{r: r, prefix: prefix, store: store, sale: sale.ID}
	if _, err := store.Preheat(ctx, sale); err != nil {
		s.Close(ctx)
		return nil, err
	}
	return s, nil
}

type seckillStrategy struct {
	r      *Redis
	prefix string // this strategy's own: Close deletes every key under it
	store  EngineStock
	sale   string

	closeOnce sync.Once
	closeErr  error
}

func (s *seckillStrategy) Reserve(ctx context.Context, userID string) (bool, error) {
	res, err := s.store.ReserveOne(ctx, s.sale, seckill.ReserveRequest{
		ReservationID: seckill.NewReservationID(s.sale, time.Now()),
		UserID:        userID,
		Qty:           1,
	})
	if err != nil {
		return false, err
	}
	return res.Outcome == seckill.OutcomeReserved, nil
}

func (s *seckillStrategy) Remaining(ctx context.Context) (int64, error) {
	lvl, err := s.store.Stock(ctx, s.sale)
	if err != nil {
		return 0, err
	}
	return lvl.Total - lvl.Reserved, nil
}

func (s *seckillStrategy) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err := s.store.Close(sctx)
		if _, derr := s.r.DeletePrefix(sctx, s.prefix); derr != nil {
			err = errors.Join(err, derr)
		}
		s.closeErr = err
	})
	return s.closeErr
}

// DeletePrefix deletes every key that starts with prefix + ":", on every
// node: a benchmark that ran seckill under a key prefix of its own uses it
// to leave a shared Redis as it found it. The prefix must be one nothing
// else uses; the default prefix is refused.
func (r *Redis) DeletePrefix(ctx context.Context, prefix string) (deleted int, err error) {
	if prefix == "" || prefix == engineKeyPrefix || strings.ContainsAny(prefix, "*?[]") {
		return 0, fmt.Errorf("delete prefix %q: refused", prefix)
	}
	for _, node := range r.client.Nodes() {
		cursor := uint64(0)
		for {
			entry, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return deleted, fmt.Errorf("delete prefix %q: %w", prefix, err)
			}
			for _, key := range entry.Elements {
				if err := node.Do(ctx, node.B().Del().Key(key).Build()).Error(); err != nil {
					return deleted, fmt.Errorf("delete prefix %q: %w", prefix, err)
				}
				deleted++
			}
			if cursor = entry.Cursor; cursor == 0 {
				return deleted, nil
			}
		}
	}
	return deleted, nil
}
