package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// Durability modes: what a claim waits for before its buyer hears
// "claimed". Redis acknowledges a write once it is in memory; AOF with
// appendfsync everysec can lose the last second of them on a power loss,
// and a failover to an asynchronous replica loses what the replica had not
// received.
const (
	// DurabilityNone acknowledges a claim once Redis has run the script.
	DurabilityNone = "none"
	// DurabilityFsync requires Redis to run appendonly yes with appendfsync
	// always, checked at start: every write is on disk before Redis
	// answers.
	DurabilityFsync = "fsync"
	// DurabilityReplicas ("replicas:N") sends one WAIT N after each
	// reservation batch: the batch's claims are answered only once N
	// replicas have them.
	DurabilityReplicas = "replicas"
)

// Durability is a parsed durability mode.
type Durability struct {
	Mode     string // DurabilityNone, DurabilityFsync or DurabilityReplicas
	Replicas int    // replicas:N
}

func (d Durability) String() string {
	if d.Mode == DurabilityReplicas {
		return DurabilityReplicas + ":" + strconv.Itoa(d.Replicas)
	}
	return d.Mode
}

// ParseDurability parses "none", "fsync" or "replicas:N" (N ≥ 1).
func ParseDurability(s string) (Durability, error) {
	switch {
	case s == "" || s == DurabilityNone:
		return Durability{Mode: DurabilityNone}, nil
	case s == DurabilityFsync:
		return Durability{Mode: DurabilityFsync}, nil
	case strings.HasPrefix(s, DurabilityReplicas+":"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, DurabilityReplicas+":"))
		if err == nil && n >= 1 && n <= 100 {
			return Durability{Mode: DurabilityReplicas, Replicas: n}, nil
		}
	}
	return Durability{}, fmt.Errorf("redis durability %q: want none, fsync or replicas:N with N from 1 to 100", s)
}

// DefaultWaitTimeout bounds the WAIT of replicas:N: a batch whose replicas
// do not all answer in time is refused with try_later.
const DefaultWaitTimeout = 500 * time.Millisecond

// WithWaitReplicas makes every Reserve call that claims units wait, with
// one WAIT n timeout on the connection that ran the script, until n
// replicas have the batch. Fewer acknowledgements refuse the whole batch
// with ErrNotDurable (try_later): its claims may or may not survive a
// failover, so no buyer is told "claimed" (an idempotent retry replays
// the reservation if it did survive).
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(o *options) {
		o.waitReplicas = n
		o.waitTimeout = timeout
	}
}

// durablePoolSize caps the dedicated connections of a store that WAITs.
const durablePoolSize = 64

// ErrNotDurable answers a batch whose claims fewer replicas acknowledged
// than the durability mode asks for.
var ErrNotDurable = &seckill.Error{Code: seckill.ETRYLATER, Message: "The claim could not be made durable in time; retry with the same Idempotency-Key."}

var reserveSHA1 = func() string { h := sha1.Sum([]byte(reserveLua)); return hex.EncodeToString(h[:]) }()

// ErrConfigRefused is CheckFsync's error for a server that refuses CONFIG
// GET, where the settings cannot be checked.
var ErrConfigRefused = errors.New("refused CONFIG GET")

// reserveDurable runs the reserve script and WAIT in one pipeline on one
// dedicated connection: WAIT counts the replicas that have every write of
// its own connection, so it must follow the script on the same one.
func (s *conn) reserveDurable(ctx context.Context, keys, args []string) (rueidis.RedisMessage, int64, error) {
	var msg rueidis.RedisMessage
	var acked int64
	err := s.client.Dedicated(func(c rueidis.DedicatedClient) error {
		wait := func() rueidis.Completed {
			return c.B().Wait().Numreplicas(int64(s.waitReplicas)).Timeout(s.waitTimeout.Milliseconds()).Build()
		}
		res := c.DoMulti(ctx, c.B().Evalsha().Sha1(reserveSHA1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), wait())
		if rerr, ok := rueidis.IsRedisErr(res[0].Error()); ok && rerr.IsNoScript() {
			res = c.DoMulti(ctx, c.B().Eval().Script(reserveLua).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), wait())
		}
		var err error
		if msg, err = res[0].ToMessage(); err != nil {
			return err
		}
		acked, err = res[1].AsInt64()
		return err
	})
	return msg, acked, err
}

// CheckDurability is the check at start for d: fsync needs CheckFsync to
// pass, unless the server refuses CONFIG and trustOperator is set (the
// operator vouches that it runs appendonly yes and appendfsync always,
// --redis-config-check off), which is logged as a warning. The other modes
// need no check.
func (s *Store) CheckDurability(ctx context.Context, d Durability, trustOperator bool, logger *slog.Logger) error {
	if d.Mode != DurabilityFsync {
		return nil
	}
	err := s.CheckFsync(ctx)
	if errors.Is(err, ErrConfigRefused) && trustOperator {
		logger.Warn("redis durability fsync: CONFIG is refused; trusting the operator that Redis runs appendonly yes and appendfsync always (--redis-config-check off)", "err", err)
		return nil
	}
	return err
}

// CheckFsync verifies that every primary runs appendonly yes and
// appendfsync always, as DurabilityFsync needs. A server that refuses
// CONFIG (managed services often do) is an error that says so: the
// operator must then vouch for the setting explicitly.
func (s *Store) CheckFsync(ctx context.Context) error {
	for addr, c := range s.client.Nodes() {
		vals, err := c.Do(ctx, c.B().ConfigGet().Parameter("appendonly", "appendfsync").Build()).AsStrMap()
		if err != nil {
			if _, ok := rueidis.IsRedisErr(err); ok {
				return fmt.Errorf("redis durability fsync: %s %w (%w); check appendonly yes and appendfsync always yourself, then start with the override", addr, ErrConfigRefused, err)
			}
			if role, rerr := c.Do(ctx, c.B().Role().Build()).ToArray(); rerr == nil && len(role) > 0 {
				if r, _ := role[0].ToString(); r != "master" {
					continue // a replica the client knows of
				}
			}
			return fmt.Errorf("redis durability fsync: %s: %w", addr, classify(err))
		}
		if role, rerr := c.Do(ctx, c.B().Role().Build()).ToArray(); rerr == nil && len(role) > 0 {
			if r, _ := role[0].ToString(); r != "master" {
				continue
			}
		}
		if v := vals["appendonly"]; v != "yes" {
			return fmt.Errorf("redis durability fsync: %s runs appendonly %q; it needs appendonly yes (and appendfsync always)", addr, v)
		}
		if v := vals["appendfsync"]; v != "always" {
			return fmt.Errorf("redis durability fsync: %s runs appendfsync %q; it needs appendfsync always (everysec loses up to a second of claims on a power loss)", addr, v)
		}
	}
	return nil
}
