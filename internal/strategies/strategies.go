// Package strategies owns the ways of deducting stock that `seckill bench
// compare` sets side by side, each behind one small interface: three on a
// SQL database (a naive read-then-write, a conditional UPDATE, an
// optimistic lock on a version column) and three on Redis (a lock with
// SET NX PX and an owner-checked release, one Lua call per request, and
// seckill's own batched script behind the request combiner).
//
// Every strategy keeps its state in a table or keys of its own, named
// uniquely when it is created and dropped by Close, so strategies can run
// side by side, and against shared servers, without touching anything
// else. The naive strategy is wrong on purpose: it is the baseline that
// shows overselling.
package strategies

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Strategy takes one unit of a fixed stock for a buyer, or refuses when it
// finds none left.
type Strategy interface {
	// Reserve tries to take one unit for userID. claimed reports whether
	// the buyer was told "yours": the count of such answers is the units
	// sold, whatever the store ends up holding.
	Reserve(ctx context.Context, userID string) (claimed bool, err error)
	// Remaining is the stock left as the store holds it. It is negative
	// when the store itself recorded an oversell.
	Remaining(ctx context.Context) (int64, error)
	// Close drops the strategy's table or keys. Safe to call twice.
	Close(ctx context.Context) error
}

// Kind describes one strategy and how to create it.
type Kind struct {
	Name        string // short, for flags and tables
	Description string
	// Store is "sql" or "redis": which backend the strategy needs.
	Store string
	// Racy is true for the strategy expected to oversell.
	Racy bool
	// The strategy's constructor, a method of the backend Store names.
	onSQL   func(db *SQL, ctx context.Context, stock int64) (Strategy, error)
	onRedis func(r *Redis, ctx context.Context, stock int64) (Strategy, error)
}

// Kinds lists the strategies in the order of the comparison table.
var Kinds = []Kind{
	{Name: "naive-sql", Description: "SQL: SELECT stock, then UPDATE stock = stock - 1 (no lock)", Store: "sql", Racy: true,
		onSQL: (*SQL).Naive},
	{Name: "sql-conditional", Description: "SQL: UPDATE … SET stock = stock - 1 WHERE stock > 0", Store: "sql",
		onSQL: (*SQL).Conditional},
	{Name: "sql-optimistic", Description: "SQL: read stock and version, UPDATE … WHERE version = ?, retry on conflict", Store: "sql",
		onSQL: (*SQL).Optimistic},
	{Name: "redis-lock", Description: "Redis: lock (SET NX PX), GET then SET the stock, owner-checked release", Store: "redis",
		onRedis: (*Redis).Lock},
	{Name: "redis-lua", Description: "Redis: one Lua call (EVALSHA) per request", Store: "redis",
		onRedis: (*Redis).LuaPerRequest},
	{Name: "seckill", Description: "Redis: seckill's reserve script, batched by the request combiner", Store: "redis",
		onRedis: (*Redis).Seckill},
}

// KindByName returns the strategy called name.
func KindByName(name string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Open creates the strategy with stock units on db or r, whichever it
// needs (the other may be nil).
func (k Kind) Open(ctx context.Context, db *SQL, r *Redis, stock int64) (Strategy, error) {
	if stock < 1 {
		return nil, fmt.Errorf("%s: stock must be at least 1", k.Name)
	}
	var s Strategy
	var err error
	switch {
	case k.Store == "sql" && db == nil:
		return nil, fmt.Errorf("%s: needs a SQL database", k.Name)
	case k.Store == "sql":
		s, err = k.onSQL(db, ctx, stock)
	case r == nil:
		return nil, fmt.Errorf("%s: needs Redis", k.Name)
	default:
		s, err = k.onRedis(r, ctx, stock)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Name, err)
	}
	return s, nil
}

// uniqueName returns prefix followed by 12 random hex digits.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
