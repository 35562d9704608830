package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// idemField is the idempotency hash's field of a buyer's key, as
// reserve.lua writes it: the user's length first, so that no two
// (user, key) pairs can spell the same field.
func idemField(userID, key string) string {
	return strconv.Itoa(len(userID)) + ":" + userID + key
}

// digestField is the field of a buyer's key that a heal writes
// (heal_apply.lua) from the key's digest (seckill.IdempotencyDigest),
// which is all the database keeps of it, and reserve.lua reads. A key
// holds no control character, so no key's own field is one.
func digestField(userID, digest string) string {
	return strconv.Itoa(len(userID)) + ":" + userID + "\x01" + digest
}

// keyArg is a request's idempotency key as reserve.lua takes it: after
// its digest, for the entries a heal wrote; "" stays "".
func keyArg(key string) string {
	if key == "" {
		return ""
	}
	return seckill.IdempotencyDigest(key) + key
}

// Replays looks up, in one HMGET of the sale's idempotency hash (of each
// key's field, and of the field a heal writes of its digest), the
// earlier answers of keyed requests, without reserving anything:
// results[i] is what reserve.lua would answer reqs[i] from its
// idempotency check alone, OutcomeReplayed (with the earlier reservation
// id) for an equal qty or OutcomeKeyReused for another, and the zero
// Outcome when the request has no key or its key holds no reservation.
//
// The local sold-out flag (internal/soldout) asks it for keyed requests
// on a sale it knows to be sold out: a key that holds no reservation can
// only be answered sold_out there, the reserve script need not run.
func (s StockStore) Replays(ctx context.Context, saleID string, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	results := make([]seckill.ReserveResult, len(reqs))
	fields := make([]string, 0, 2*len(reqs))
	for _, r := range reqs {
		if r.IdempotencyKey != "" {
			fields = append(fields, idemField(r.UserID, r.IdempotencyKey), digestField(r.UserID, seckill.IdempotencyDigest(r.IdempotencyKey)))
		}
	}
	if len(fields) == 0 {
		return results, nil
	}
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("replays: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("replays: %w", err)
	}
	var vals []rueidis.RedisMessage
	if bs.k() == 1 {
		vals, err = s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(saleID)[keyIdem]).Field(fields...).Build()).ToArray()
	} else {
		vals, err = s.homeIdem(ctx, bs, reqs) // each key lives in its buyer's home bucket
	}
	if err != nil {
		return nil, fmt.Errorf("replays: %w", classify(err))
	}
	if len(vals) != len(fields) {
		return nil, fmt.Errorf("replays: HMGET answered %d fields of %d", len(vals), len(fields))
	}
	j := 0
	for i, r := range reqs {
		if r.IdempotencyKey == "" {
			continue
		}
		v := vals[j]
		if v.IsNil() {
			v = vals[j+1]
		}
		j += 2
		if v.IsNil() {
			continue
		}
		prev, err := v.ToString()
		if err != nil {
			return nil, fmt.Errorf("replays: %w", err)
		}
		qtys, id, ok := strings.Cut(prev, ":")
		if !ok {
			return nil, fmt.Errorf("replays: malformed idempotency entry %q", prev)
		}
		if !strings.Contains(id, ".") { // stored without its "<sale>." (see reserve.lua)
			id = saleID + "." + id
		}
		if qtys == strconv.FormatInt(r.Qty, 10) {
			results[i] = seckill.ReserveResult{Outcome: seckill.OutcomeReplayed, ReservationID: id, Qty: r.Qty}
		} else {
			results[i].Outcome = seckill.OutcomeKeyReused
		}
	}
	return results, nil
}
