package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// The Redis side of restoring (seckill.StockRestorer) and the stock-store
// side of reconciliation (seckill.StockLedger).
//
// A restore runs one script on the sale's slot (restore.lua) that gives
// an active reservation's units back to the stock and to its buyer's
// limit and marks its record restored. The record stays, so a second
// restore finds it restored and changes nothing, and reconciliation still
// sees the reservation.
//
// Restocks are announced on one pub/sub channel per key prefix,
// <prefix>:restocked, whose messages are sale ids. Classic PUBLISH is
// broadcast to every node of a Cluster, so a subscriber on any node hears
// every announcement.

// Restoring twice changes nothing, so a lost reply may be retried. A
// retried call may then answer restored=false for the restore its own lost
// first attempt made; the units are given back once either way.
var restoreScript = rueidis.NewLuaScriptRetryable(lua("record.lua", "restore.lua"))

// StatusRestored is a reservation whose units were given back.
const StatusRestored = "restored"

// ErrInconsistentReservation is wrapped by RestoreReservation when the
// sale's keys disagree with the reservation's record (the stock hash is
// gone, or `reserved` or the buyer's units are below the reservation's
// qty, or the record is malformed). No script of this store can bring that
// about: it calls for an operator. Nothing was changed.
var ErrInconsistentReservation = errors.New("reservation inconsistent with the sale's stock")

var (
	_ seckill.StockRestorer = (*Store)(nil)
	_ seckill.StockLedger   = (*Store)(nil)
)

// RestoreReservation gives an active reservation's units back to its
// sale's stock and to its buyer's limit, and marks it restored, in one
// script; restored is false when it was restored already (then nothing
// changes). seckill.ErrNotFound when there is no record of the
// reservation, which includes an id that is not a well-formed reservation
// id: no record can exist under it. When the sale's keys disagree with the
// record, the error wraps ErrInconsistentReservation and nothing changes.
//
// The buyer's idempotency key is not released: a replay of the request
// that made the reservation keeps answering with that reservation, now
// restored, and takes no unit. A buyer who wants the units again sends a
// new request (with a new key).
func (s *Store) RestoreReservation(ctx context.Context, reservationID string) (restored bool, err error) {
	saleID, ok := seckill.SaleIDOfReservation(reservationID)
	if !ok {
		return false, fmt.Errorf("restore %q: %w", reservationID, seckill.ErrNotFound)
	}
	codes, err := s.restoreScript(ctx, saleID, []string{reservationID})
	if err != nil {
		return false, fmt.Errorf("restore %s: %w", reservationID, err)
	}
	return restoreAnswer(reservationID, codes[0])
}

// MaxRestoreBatch caps the reservations of one RestoreReservations call,
// so that one script call stays short for the Redis that runs it.
const MaxRestoreBatch = 1000

// RestoreReservations does RestoreReservation for reservations of one
// sale in one script call (seckill.StockRestorer): results[i] answers
// reservationIDs[i], in order, so an id listed twice is restored once.
// An id that is not a reservation id of saleID is ErrNotFound there. More
// than MaxRestoreBatch ids is EINVALID, as is an invalid sale id.
func (s *Store) RestoreReservations(ctx context.Context, saleID string, reservationIDs []string) ([]seckill.ReservationRestore, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("restore reservations: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	if len(reservationIDs) > MaxRestoreBatch {
		return nil, fmt.Errorf("restore reservations: %w",
			seckill.Errorf(seckill.EINVALID, "%d reservations is over the limit of %d", len(reservationIDs), MaxRestoreBatch))
	}
	results := make([]seckill.ReservationRestore, len(reservationIDs))
	ids := make([]string, 0, len(reservationIDs))
	at := make([]int, 0, len(reservationIDs))
	for i, id := range reservationIDs {
		if sale, ok := seckill.SaleIDOfReservation(id); !ok || sale != saleID {
			results[i].Err = fmt.Errorf("restore %q: %w", id, seckill.ErrNotFound)
			continue
		}
		ids = append(ids, id)
		at = append(at, i)
	}
	if len(ids) == 0 {
		return results, nil
	}
	codes, err := s.restoreScript(ctx, saleID, ids)
	if err != nil {
		return nil, fmt.Errorf("restore %d reservations of sale %s: %w", len(ids), saleID, err)
	}
	for j, code := range codes {
		r := &results[at[j]]
		r.Restored, r.Err = restoreAnswer(ids[j], code)
	}
	return results, nil
}

// restoreScript runs restore.lua on ids of saleID and returns its codes:
// on the sale's key set, or, for a sale of several buckets, on each
// bucket's for the ids whose records it holds.
func (s *Store) restoreScript(ctx context.Context, saleID string, ids []string) ([]int64, error) {
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return nil, err
	}
	if bs.k() == 1 {
		return s.restoreIn(ctx, saleID, ids)
	}
	tags, err := s.bucketsOf(ctx, bs, ids)
	if err != nil {
		return nil, err
	}
	byTag := map[string][]int{}
	for i, tag := range tags {
		byTag[tag] = append(byTag[tag], i)
	}
	codes := make([]int64, len(ids))
	for tag, at := range byTag {
		sub := make([]string, len(at))
		for j, i := range at {
			sub[j] = ids[i]
		}
		got, err := s.restoreIn(ctx, tag, sub)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			codes[i] = got[j]
		}
	}
	return codes, nil
}

// restoreIn runs restore.lua on ids in the key set of tag.
func (s *Store) restoreIn(ctx context.Context, tag string, ids []string) ([]int64, error) {
	keys := s.keys(tag)
	answers, err := restoreScript.Exec(ctx, s.client, []string{keys[keyStock], keys[keyBuyers], keys[keyRes]}, ids).ToArray()
	if err != nil {
		return nil, classify(err)
	}
	if len(answers) != len(ids) {
		return nil, fmt.Errorf("restore script answered %d reservations of %d", len(answers), len(ids))
	}
	codes := make([]int64, len(answers))
	for i, a := range answers {
		if codes[i], err = a.AsInt64(); err != nil {
			return nil, fmt.Errorf("unexpected answer from restore script: %w", err)
		}
	}
	return codes, nil
}

// restoreAnswer turns one code of restore.lua (see its header) into
// RestoreReservation's answer.
func restoreAnswer(reservationID string, code int64) (restored bool, err error) {
	switch code {
	case 1:
		return true, nil
	case 0:
		return false, nil
	case -1:
		return false, fmt.Errorf("restore %s: %w", reservationID, seckill.ErrNotFound)
	case -2:
		return false, fmt.Errorf("restore %s: %w: malformed record", reservationID, ErrInconsistentReservation)
	case -3:
		return false, fmt.Errorf("restore %s: %w: the sale's reserved units are below its qty, or the sale is not loaded",
			reservationID, ErrInconsistentReservation)
	case -4:
		return false, fmt.Errorf("restore %s: %w: its buyer holds fewer units than its qty", reservationID, ErrInconsistentReservation)
	}
	return false, fmt.Errorf("restore %s: unexpected answer %d from restore script", reservationID, code)
}

func (s *Store) restockedChannel() string { return s.prefix + ":restocked" }

// PublishRestocked announces to every subscriber (every API node) that a
// sale has stock again. Announcements are fire and forget: a subscriber
// that is reconnecting at that moment misses it.
func (s *Store) PublishRestocked(ctx context.Context, saleID string) error {
	if !seckill.ValidSaleID(saleID) {
		return fmt.Errorf("publish restocked: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	err := s.client.Do(ctx, s.client.B().Publish().Channel(s.restockedChannel()).Message(saleID).Build()).Error()
	if err != nil {
		return fmt.Errorf("publish restocked: %w", classify(err))
	}
	return nil
}

// Back-off between attempts to subscribe: doubled after every failed
// attempt up to the max, back to the min once a subscription is
// confirmed, and jittered so that API nodes cut off together do not come
// back in step.
const (
	subscribeMinBackoff = 50 * time.Millisecond
	subscribeMaxBackoff = 5 * time.Second
)

// SubscribeRestocked calls fn with the sale id of every restock
// announcement until ctx ends, and then returns nil. It holds a connection
// of its own, so announcements never queue behind reservations. A lost
// connection is retried with a back-off until ctx ends; announcements made
// while it is away are lost (the local sold-out flag lapses by itself, see
// internal/soldout). It returns an error only when retrying cannot help:
// Redis refuses the subscription (an ACL, a server without pub/sub), or
// the client says it is closing. Cancel ctx before closing the store: a
// closed client does not reliably refuse new subscriptions.
//
// fn runs on the subscription's goroutine, one call at a time: it must
// return quickly, since announcements wait for it. Messages that are not
// a valid sale id are dropped.
func (s *Store) SubscribeRestocked(ctx context.Context, fn func(saleID string)) error {
	var confirmed atomic.Bool
	hctx := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
		if sub.Kind == "subscribe" {
			confirmed.Store(true)
		}
	})
	handle := func(m rueidis.PubSubMessage) {
		if seckill.ValidSaleID(m.Message) {
			fn(m.Message)
		}
	}
	backoff := subscribeMinBackoff
	for {
		confirmed.Store(false)
		err := s.client.Dedicated(func(c rueidis.DedicatedClient) error {
			return c.Receive(hctx, c.B().Subscribe().Channel(s.restockedChannel()).Build(), handle)
		})
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, rueidis.ErrClosing) {
			return fmt.Errorf("subscribe restocked: %w", seckill.ErrClosed)
		}
		if _, ok := rueidis.IsRedisErr(err); ok && !errors.Is(classify(err), errUnavailable) {
			return fmt.Errorf("subscribe restocked: %w", err)
		}
		if confirmed.Load() {
			backoff = subscribeMinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, subscribeMaxBackoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// reservationsScanCount is the COUNT hint of each HSCAN call: enough to
// list a large sale in few round trips, few enough that no call blocks
// Redis for long.
const reservationsScanCount = 1000

// Reservations lists every reservation record of a sale, sorted by
// reservation id (which sorts by time); none for a sale that has none or
// is not loaded. It holds the whole list: for a large sale, use
// ScanReservations. A malformed record fails the whole call, naming it:
// reconciliation must not skip what it cannot read.
func (s *Store) Reservations(ctx context.Context, saleID string) ([]seckill.ReservationRecord, error) {
	var out []seckill.ReservationRecord
	index := map[string]int{}
	err := s.ScanReservations(ctx, saleID, reservationsScanCount, func(page []seckill.ReservationRecord) error {
		for _, r := range page {
			if j, ok := index[r.ReservationID]; ok {
				out[j] = r
				continue
			}
			index[r.ReservationID] = len(out)
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b seckill.ReservationRecord) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	return out, nil
}

// ScanReservations calls fn with the reservation records of a sale, one
// HSCAN reply (about count records) of one bucket at a time, so that
// neither Redis nor this process holds a large sale at once; nothing for
// a sale that is not loaded. The pages are no snapshot: a reservation
// made or restored during the scan may or may not be in them, or may
// appear in its earlier state. HSCAN returns an element twice only when
// the hash shrinks during the scan, and a res hash never shrinks (records
// are never deleted, only the whole key is); a page repeats no record.
// A malformed record fails the scan, naming it.
func (s *Store) ScanReservations(ctx context.Context, saleID string, count int, fn func([]seckill.ReservationRecord) error) error {
	if !seckill.ValidSaleID(saleID) {
		return fmt.Errorf("reservations: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	if count < 1 {
		count = reservationsScanCount
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	var page []seckill.ReservationRecord
	seen := map[string]int{}
	for _, tag := range bs.tags { // every bucket of the sale
		key := s.keys(tag)[keyRes]
		var cursor uint64
		for {
			e, err := s.client.Do(ctx, s.client.B().Hscan().Key(key).Cursor(cursor).Count(int64(count)).Build()).AsScanEntry()
			if err != nil {
				return fmt.Errorf("reservations: %w", classify(err))
			}
			if len(e.Elements)%2 != 0 {
				return fmt.Errorf("reservations: HSCAN answered %d elements; want field, value pairs", len(e.Elements))
			}
			page = page[:0]
			clear(seen)
			for i := 0; i < len(e.Elements); i += 2 {
				r, err := parseRecord(idOfField(saleID, e.Elements[i]), e.Elements[i+1])
				if err != nil {
					return fmt.Errorf("reservations: sale %s: %w", saleID, err)
				}
				if j, ok := seen[r.ReservationID]; ok {
					page[j] = r
					continue
				}
				seen[r.ReservationID] = len(page)
				page = append(page, r)
			}
			if len(page) > 0 {
				if err := fn(page); err != nil {
					return err
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// ReservationsOf reads the records of ids, reservations of saleID, with
// one HMGET of each bucket's res hash (pipelined), and returns those it
// found. A malformed record fails the call, naming it.
func (s *Store) ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]seckill.ReservationRecord, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("reservations of ids: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	out := make(map[string]seckill.ReservationRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("reservations of ids: %w", err)
	}
	// Each id's compact field, then its whole id (a record written before).
	fields := make([]string, 0, 2*len(ids))
	of := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		for _, f := range recordFields(id) {
			fields, of = append(fields, f), append(of, id)
		}
	}
	cmds := make(rueidis.Commands, 0, len(bs.tags))
	for _, tag := range bs.tags {
		cmds = append(cmds, s.client.B().Hmget().Key(s.keys(tag)[keyRes]).Field(fields...).Build())
	}
	for _, res := range s.client.DoMulti(ctx, cmds...) {
		vals, err := res.ToArray()
		if err != nil {
			return nil, fmt.Errorf("reservations of ids: %w", classify(err))
		}
		for i, v := range vals {
			rec, err := v.ToString()
			if err != nil || i >= len(of) {
				continue // nil: not in this bucket, or not under this field
			}
			r, err := parseRecord(of[i], rec)
			if err != nil {
				return nil, fmt.Errorf("reservations of ids: sale %s: %w", saleID, err)
			}
			out[r.ReservationID] = r
		}
	}
	return out, nil
}
