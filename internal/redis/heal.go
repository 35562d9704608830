package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

var (
	// Both are safe to resend: begin sets a flag, apply checks its token
	// and HSETNX-es its records.
	healBeginScript = rueidis.NewLuaScriptRetryable(lua("heal_begin.lua"))
	healApplyScript = rueidis.NewLuaScript(lua("record.lua", "heal_apply.lua"))
	healAbortScript = rueidis.NewLuaScriptRetryable(lua("heal_abort.lua"))
	healShareScript = rueidis.NewLuaScriptRetryable(lua("heal_share.lua"))
)

// ErrHealing answers a batch for a sale whose state the engine is
// rebuilding from the database after the stock store lost writes.
var ErrHealing = &seckill.Error{Code: seckill.ETRYLATER, Message: "The sale is being repaired after a stock-store failure; retry in a moment."}

// Healer is what the heal watcher (internal/heal) reads and writes: the
// sales' states and the server's identity, to see lost writes, and the
// heal scripts that rebuild a sale from the database.
type Healer struct{ *conn }

// Healer returns the store's healer.
func (s *Store) Healer() Healer { return Healer{s.conn} }

// ReservationsOf is Ledger.ReservationsOf.
func (s Healer) ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]seckill.ReservationRecord, error) {
	return Ledger{s.conn}.ReservationsOf(ctx, saleID, ids)
}

// SaleState reads a sale's stock hash in one call; of a sale of several
// buckets, every bucket's (one round trip per shard), summed: it is loaded
// when every bucket is, healing when any is, and its total counts the
// units journalled as moving.
func (s Healer) SaleState(ctx context.Context, saleID string) (seckill.StockWatch, error) {
	if !seckill.ValidSaleID(saleID) {
		return seckill.StockWatch{}, fmt.Errorf("sale state: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	if _, ok := s.layouts.m.Load(saleID); !ok {
		// One call for a sale of one bucket, the watcher's every tick.
		st, err := bucketWatch(saleID, s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(saleID)[keyStock]).
			Field("total", "reserved", "seq", "healing", "heals", "buckets").Build()))
		if err != nil || st.Buckets <= 1 {
			return st, err
		}
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return seckill.StockWatch{}, fmt.Errorf("sale state: %w", err)
	}
	if bs.k() == 1 { // bucket 0 vanished since
		return bucketWatch(saleID, s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(saleID)[keyStock]).
			Field("total", "reserved", "seq", "healing", "heals", "buckets").Build()))
	}
	cmds := make(rueidis.Commands, 0, 2*bs.k())
	for _, tag := range bs.tags {
		cmds = append(cmds,
			s.client.B().Hmget().Key(s.keys(tag)[keyStock]).Field("total", "reserved", "seq", "healing", "heals", "buckets").Build(),
			s.client.B().Hgetall().Key(s.movesKey(tag)).Build())
	}
	replies := s.client.DoMulti(ctx, cmds...)
	sum := seckill.StockWatch{Loaded: true, Buckets: int64(bs.k())}
	states := make([]bucketState, bs.k())
	for b := range bs.tags {
		st, err := bucketWatch(saleID, replies[2*b])
		if err != nil {
			return seckill.StockWatch{}, err
		}
		if states[b].journal, err = replies[2*b+1].AsStrMap(); err != nil {
			return seckill.StockWatch{}, fmt.Errorf("sale state: %w", classify(err))
		}
		sum.Loaded = sum.Loaded && st.Loaded
		sum.Total += st.Total
		sum.Reserved += st.Reserved
		sum.Seq += st.Seq
		if b == 0 {
			sum.Heals = st.Heals
		}
		if st.Healing && (!sum.Healing || st.HealingSince.Before(sum.HealingSince)) {
			sum.Healing, sum.HealingSince = true, st.HealingSince
		}
	}
	if !sum.Loaded {
		// A bucket vanished: the sale is no longer whole.
		return seckill.StockWatch{Healing: sum.Healing, HealingSince: sum.HealingSince, Buckets: sum.Buckets}, nil
	}
	sum.Total += inTransit(states)
	return sum, nil
}

// bucketWatch parses one HMGET of a stock hash for SaleState.
func bucketWatch(saleID string, r rueidis.RedisResult) (seckill.StockWatch, error) {
	vals, err := r.ToArray()
	if err != nil {
		return seckill.StockWatch{}, fmt.Errorf("sale state: %w", classify(err))
	}
	if len(vals) != 6 || vals[0].IsNil() {
		return seckill.StockWatch{}, nil
	}
	st := seckill.StockWatch{Loaded: true, Healing: !vals[3].IsNil(), Buckets: 1}
	if st.Healing { // the token is "<unix ms>:<random>"
		tok, _ := vals[3].ToString()
		ms, _, _ := strings.Cut(tok, ":")
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			st.HealingSince = time.UnixMilli(n)
		}
	}
	for i, p := range []*int64{&st.Total, &st.Reserved, &st.Seq, nil, &st.Heals, &st.Buckets} {
		if p == nil || vals[i].IsNil() {
			continue
		}
		if *p, err = vals[i].AsInt64(); err != nil {
			return seckill.StockWatch{}, fmt.Errorf("sale state %s: malformed stock hash: %w", saleID, err)
		}
	}
	return st, nil
}

// ServerID identifies the Redis process(es) behind the store: the run_id of
// every node, which changes when a server restarts (and may have reloaded
// less than it had acknowledged) or a failover puts another one in charge.
func (s Healer) ServerID(ctx context.Context) (string, error) {
	if s.embedded != nil {
		// Lives and dies with this process: a new one starts empty, and
		// the engine heals it at start (see cmd/seckill).
		return "embedded", nil
	}
	var ids []string
	for _, c := range s.client.Nodes() {
		info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
		if err != nil {
			return "", fmt.Errorf("server id: %w", classify(err))
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
				ids = append(ids, v)
			}
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ","), nil
}

// BeginHeal makes the sale refuse claims (try later) until ApplyHeal or
// AbortHeal with the same token, recreating its stock hash (reserved 0)
// if it vanished; recreated reports that. Of a sale of several buckets it
// does so in every bucket (bucket 0 last, as preheat), recreating a
// vanished one with no units: ApplyHeal gives each its share.
func (s Healer) BeginHeal(ctx context.Context, sale *seckill.Sale, token string) (recreated bool, err error) {
	if err := sale.Validate(); err != nil {
		return false, fmt.Errorf("begin heal: %w", err)
	}
	bs, err := s.healLayout(ctx, sale)
	if err != nil {
		return false, fmt.Errorf("begin heal: %w", err)
	}
	for b := bs.k() - 1; b >= 0; b-- {
		if err := s.register(ctx, bs.tags[b]); err != nil {
			return false, fmt.Errorf("begin heal: %w", err)
		}
		args := []string{
			strconv.FormatInt(sale.Stock, 10),
			strconv.FormatInt(sale.PurchaseLimit, 10),
			strconv.FormatInt(sale.StartAt.UnixMilli(), 10),
			strconv.FormatInt(sale.EndAt.UnixMilli(), 10),
			token,
		}
		if bs.k() > 1 {
			args[0] = "0"
			if b == 0 {
				args = append(args, strconv.Itoa(bs.k()))
			}
		}
		if !sale.Admission.FirstCome() {
			if len(args) == 5 {
				args = append(args, "")
			}
			args = append(args, string(sale.Admission.Of()))
		}
		n, err := healBeginScript.Exec(ctx, s.client, s.keys(bs.tags[b])[:1], args).AsInt64()
		if err != nil {
			return false, fmt.Errorf("begin heal: %w", classify(err))
		}
		recreated = recreated || n == 1
	}
	return recreated, nil
}

// healLayout is the layout of the sale's buckets: the loaded one, or,
// when bucket 0 vanished, the one preheat would give it (remembered, so
// that the heal's later calls find every bucket).
func (s Healer) healLayout(ctx context.Context, sale *seckill.Sale) (*bucketSet, error) {
	bs, err := s.buckets(ctx, sale.ID)
	if err != nil || bs.k() > 1 {
		return bs, err
	}
	k := sale.BucketCount()
	if s.minBuckets > k && sale.Admission.FirstCome() {
		k = s.minBuckets
	}
	if k == 1 {
		return bs, nil
	}
	v, _ := s.layouts.m.LoadOrStore(sale.ID, newBucketSet(sale.ID, int(k)))
	return v.(*bucketSet), nil
}

// ApplyHeal adds an active record (and its units, to reserved and to the
// buyer) for each of add that the store has no record of (a restored
// record, counting nothing, for each of add marked Restored), releases each
// active record of release (the database refused its claim), counts the
// heal and lets claims in again. It fails, changing nothing, when the
// sale's healing flag no longer holds token. sale is the database's row.
//
// Of a sale of several buckets, each record goes to its buyer's home
// bucket; then each bucket gets its share of the units neither sold nor
// held (seckill.HealShares), its move journal is dropped, and claims come
// back bucket by bucket.
func (s Healer) ApplyHeal(ctx context.Context, sale *seckill.Sale, token string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	bs, err := s.buckets(ctx, sale.ID)
	if err != nil {
		return 0, 0, fmt.Errorf("apply heal: %w", err)
	}
	if bs.k() == 1 {
		return s.applyHeal(ctx, sale.ID, sale.ID, token, "1", add, release)
	}
	if added, released, err = s.healPageBuckets(ctx, bs, token, add, release); err != nil {
		return added, released, err
	}
	if err := s.shareBuckets(ctx, bs, sale, token); err != nil {
		return added, released, err
	}
	for _, tag := range bs.tags {
		if _, _, err := s.applyHeal(ctx, sale.ID, tag, token, "1", nil, nil); err != nil {
			return added, released, err
		}
	}
	return added, released, nil
}

// HealPage is ApplyHeal of one page of a large heal: it leaves the sale
// healing (claims refused), for the next page and the ApplyHeal that
// ends it.
func (s Healer) HealPage(ctx context.Context, saleID, token string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return 0, 0, fmt.Errorf("apply heal: %w", err)
	}
	if bs.k() == 1 {
		return s.applyHeal(ctx, saleID, saleID, token, "0", add, release)
	}
	return s.healPageBuckets(ctx, bs, token, add, release)
}

// healPageBuckets applies a page to a sale of several buckets: each
// record in its buyer's home bucket, where every reservation is made.
func (s Healer) healPageBuckets(ctx context.Context, bs *bucketSet, token string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	adds := make([][]seckill.ReservationRecord, bs.k())
	releases := make([][]seckill.ReservationRecord, bs.k())
	for _, r := range add {
		adds[bs.home(r.UserID)] = append(adds[bs.home(r.UserID)], r)
	}
	for _, r := range release {
		releases[bs.home(r.UserID)] = append(releases[bs.home(r.UserID)], r)
	}
	for b, tag := range bs.tags {
		if len(adds[b]) == 0 && len(releases[b]) == 0 {
			continue
		}
		a, r, err := s.applyHeal(ctx, bs.sale, tag, token, "0", adds[b], releases[b])
		added, released = added+a, released+r
		if err != nil {
			return added, released, err
		}
	}
	return added, released, nil
}

// shareBuckets gives every bucket of a healing sale its share of the
// units neither sold nor held. A move journalled before the heal cannot
// land afterwards: its id is marked applied in its receiver first.
func (s Healer) shareBuckets(ctx context.Context, bs *bucketSet, sale *seckill.Sale, token string) error {
	states, err := s.readBuckets(ctx, bs)
	if err != nil {
		return fmt.Errorf("apply heal: %w", err)
	}
	reserved := make([]int64, bs.k())
	for b, st := range states {
		reserved[b] = st.reserved
		for id, entry := range st.journal {
			dst, _, _ := strings.Cut(entry, ":")
			d, err := strconv.Atoi(dst)
			if err != nil || d < 0 || d >= bs.k() {
				return fmt.Errorf("apply heal: bucket %d: malformed journal entry %q", b, entry)
			}
			if err := s.client.Do(ctx, s.client.B().Sadd().Key(s.movesInKey(bs.tags[d])).Member(id).Build()).Error(); err != nil {
				return fmt.Errorf("apply heal: %w", classify(err))
			}
		}
	}
	shares := seckill.HealShares(sale.Stock, sale.Stock-sale.Unsold, reserved)
	for b, tag := range bs.tags {
		keys := s.keys(tag)
		n, err := healShareScript.Exec(ctx, s.client, []string{keys[keyStock], s.movesKey(tag)},
			[]string{token, strconv.FormatInt(shares[b], 10)}).AsInt64()
		if err != nil {
			return fmt.Errorf("apply heal: %w", classify(err))
		}
		if n < 0 {
			return fmt.Errorf("apply heal of sale %s: another heal took over", bs.sale)
		}
	}
	return nil
}

func (s *conn) applyHeal(ctx context.Context, saleID, tag, token, finish string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	keys := s.keys(tag)
	args := make([]string, 0, 3+6*len(add)+3*len(release))
	args = append(args, token, finish, strconv.Itoa(len(add)))
	for _, r := range add {
		field := "" // the order was made without a key
		if seckill.ValidIdempotencyDigest(r.KeyDigest) {
			field = digestField(r.UserID, r.KeyDigest)
		}
		restored := ""
		if r.Restored {
			restored = "1"
		}
		args = append(args, r.ReservationID, r.UserID, strconv.FormatInt(r.Qty, 10), strconv.FormatInt(r.ReservedAt.UnixMilli(), 10), field, restored)
	}
	for _, r := range release {
		args = append(args, r.ReservationID, r.UserID, strconv.FormatInt(r.Qty, 10))
	}
	msg, err := healApplyScript.Exec(ctx, s.client, []string{keys[keyStock], keys[keyBuyers], keys[keyRes], keys[keyIdem]}, args).ToMessage()
	if err != nil {
		return 0, 0, fmt.Errorf("apply heal: %w", classify(err))
	}
	if msg.IsInt64() {
		return 0, 0, fmt.Errorf("apply heal of sale %s: another heal took over", saleID)
	}
	counts, err := msg.AsIntSlice()
	if err != nil || len(counts) != 2 {
		return 0, 0, fmt.Errorf("apply heal: unexpected answer: %v", err)
	}
	return int(counts[0]), int(counts[1]), nil
}

// AbortHeal lets claims in again after a heal (begun with token) that
// could not finish, unless another heal took over since; of a sale of
// several buckets, in every bucket, unless a bucket got its new share
// already: the others may still count units the loss took out of them, so
// the sale stays healing and is healed again once the heal is stale.
func (s Healer) AbortHeal(ctx context.Context, saleID, token string) error {
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return fmt.Errorf("abort heal: %w", err)
	}
	if bs.k() > 1 {
		cmds := make(rueidis.Commands, bs.k())
		for b, tag := range bs.tags {
			cmds[b] = s.client.B().Hget().Key(s.keys(tag)[keyStock]).Field("shared").Build()
		}
		for b, r := range s.client.DoMulti(ctx, cmds...) {
			shared, err := r.ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				return fmt.Errorf("abort heal: %w", classify(err))
			}
			if err == nil && shared == token {
				return fmt.Errorf("abort heal of sale %s: bucket %d has its new share; claims stay refused until the next heal", saleID, b)
			}
		}
	}
	for _, tag := range bs.tags {
		if err := healAbortScript.Exec(ctx, s.client, s.keys(tag)[:1], []string{token}).Error(); err != nil {
			return fmt.Errorf("abort heal: %w", classify(err))
		}
	}
	return nil
}
