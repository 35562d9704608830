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

// SaleState reads a sale's stock hash in one call.
func (s Healer) SaleState(ctx context.Context, saleID string) (seckill.StockWatch, error) {
	if !seckill.ValidSaleID(saleID) {
		return seckill.StockWatch{}, fmt.Errorf("sale state: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	vals, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(saleID)[keyStock]).
		Field("total", "reserved", "seq", "healing", "heals", "buckets").Build()).ToArray()
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
// if it vanished; recreated reports that.
func (s Healer) BeginHeal(ctx context.Context, sale *seckill.Sale, token string) (recreated bool, err error) {
	if err := sale.Validate(); err != nil {
		return false, fmt.Errorf("begin heal: %w", err)
	}
	if err := s.register(ctx, sale.ID); err != nil {
		return false, fmt.Errorf("begin heal: %w", err)
	}
	args := []string{
		strconv.FormatInt(sale.Stock, 10),
		strconv.FormatInt(sale.PurchaseLimit, 10),
		strconv.FormatInt(sale.StartAt.UnixMilli(), 10),
		strconv.FormatInt(sale.EndAt.UnixMilli(), 10),
		token,
	}
	n, err := healBeginScript.Exec(ctx, s.client, s.keys(sale.ID)[:1], args).AsInt64()
	if err != nil {
		return false, fmt.Errorf("begin heal: %w", classify(err))
	}
	return n == 1, nil
}

// ApplyHeal adds an active record (and its units, to reserved and to the
// buyer) for each of add that the store has no record of, releases each
// active record of release (the database refused its claim), counts the
// heal and lets claims in again. It fails, changing nothing, when the
// sale's healing flag no longer holds token.
func (s Healer) ApplyHeal(ctx context.Context, saleID, token string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	return s.applyHeal(ctx, saleID, token, "1", add, release)
}

// HealPage is ApplyHeal of one page of a large heal: it leaves the sale
// healing (claims refused), for the next page and the ApplyHeal that
// ends it.
func (s Healer) HealPage(ctx context.Context, saleID, token string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	return s.applyHeal(ctx, saleID, token, "0", add, release)
}

func (s *conn) applyHeal(ctx context.Context, saleID, token, finish string, add, release []seckill.ReservationRecord) (added, released int, err error) {
	keys := s.keys(saleID)
	args := make([]string, 0, 3+4*len(add)+3*len(release))
	args = append(args, token, finish, strconv.Itoa(len(add)))
	for _, r := range add {
		args = append(args, r.ReservationID, r.UserID, strconv.FormatInt(r.Qty, 10), strconv.FormatInt(r.ReservedAt.UnixMilli(), 10))
	}
	for _, r := range release {
		args = append(args, r.ReservationID, r.UserID, strconv.FormatInt(r.Qty, 10))
	}
	msg, err := healApplyScript.Exec(ctx, s.client, []string{keys[keyStock], keys[keyBuyers], keys[keyRes]}, args).ToMessage()
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
// could not finish, unless another heal took over since.
func (s Healer) AbortHeal(ctx context.Context, saleID, token string) error {
	err := healAbortScript.Exec(ctx, s.client, s.keys(saleID)[:1], []string{token}).Error()
	if err != nil {
		return fmt.Errorf("abort heal: %w", classify(err))
	}
	return nil
}
