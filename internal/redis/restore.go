package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// The Redis side of restoring (restore.Stock).
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

// Restorer gives reservations' units back and announces restocks
// (restore.Stock).
type Restorer struct{ *conn }

// Restorer returns the store's restorer.
func (s *Store) Restorer() Restorer { return Restorer{s.conn} }

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
func (s Restorer) RestoreReservation(ctx context.Context, reservationID string) (restored bool, err error) {
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
// sale in one script call (restore.Stock): results[i] answers
// reservationIDs[i], in order, so an id listed twice is restored once.
// An id that is not a reservation id of saleID is ErrNotFound there. More
// than MaxRestoreBatch ids is EINVALID, as is an invalid sale id.
func (s Restorer) RestoreReservations(ctx context.Context, saleID string, reservationIDs []string) ([]seckill.ReservationRestore, error) {
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
func (s *conn) restoreScript(ctx context.Context, saleID string, ids []string) ([]int64, error) {
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
func (s *conn) restoreIn(ctx context.Context, tag string, ids []string) ([]int64, error) {
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

func (s *conn) restockedChannel() string { return s.prefix + ":restocked" }

// PublishRestocked announces to every subscriber (every API node) that a
// sale has stock again. Announcements are fire and forget: a subscriber
// that is reconnecting at that moment misses it.
func (s Restorer) PublishRestocked(ctx context.Context, saleID string) error {
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
func (s Restorer) SubscribeRestocked(ctx context.Context, fn func(saleID string)) error {
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
