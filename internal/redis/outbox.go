package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// The relay's side of the outbox. Every sale's outbox stream is read by one
// consumer group (the relays, as competing consumers): an entry is read,
// published to the broker, and only once the broker has confirmed it
// acknowledged and deleted in one script (outbox_ack.lua), so the stream
// holds exactly the reservations not yet known to be on the broker.
//
// The relay finds the streams through a registry, the set
// <prefix>:outboxes of sale ids, which Preheat fills before it loads a
// sale. The set is a key of its own, in its own Cluster slot, and no script
// touches it.

var (
	// Acking twice is harmless (the second XACK finds nothing pending),
	// so a lost reply may be retried.
	outboxAckScript    = rueidis.NewLuaScriptRetryable(lua("outbox_ack.lua"))
	outboxForgetScript = rueidis.NewLuaScriptRetryable(lua("outbox_forget.lua"))
	// Making a group that exists answers as making it did.
	outboxGroupScript = rueidis.NewLuaScriptRetryable(lua("outbox_group.lua"))
)

// Outbox is the relay's side of the outboxes (relay.Outbox), and what
// others read of them: their lengths and the age of their oldest entry.
type Outbox struct{ *conn }

// Outbox returns the store's outboxes.
func (s *Store) Outbox() Outbox { return Outbox{s.conn} }

// forgetGrace is how long after its window ends a sale stays registered
// even with an empty outbox. It covers clocks: a Cluster failover may hand
// the sale's slot to a node whose clock is a little behind, which could
// still accept a reservation at the very end of the window.
const forgetGrace = time.Minute

// ErrMalformedOutboxEntry is wrapped by seckill.OutboxEntry.Err.
var ErrMalformedOutboxEntry = errors.New("malformed outbox entry")

func (s *conn) outboxRegistryKey() string { return s.prefix + ":outboxes" }

// register adds a sale to the registry of outboxes. Preheat calls it
// before it loads the sale, so that a sale that can take reservations is
// always registered. Registering twice changes nothing.
func (s *conn) register(ctx context.Context, saleID string) error {
	err := s.client.Do(ctx, s.client.B().Sadd().Key(s.outboxRegistryKey()).Member(saleID).Build()).Error()
	if err != nil {
		return fmt.Errorf("register outbox: %w", classify(err))
	}
	return nil
}

// OutboxSales returns the ids of the sales whose outboxes a relay must
// read, sorted.
func (s Outbox) OutboxSales(ctx context.Context) ([]string, error) {
	ids, err := s.client.Do(ctx, s.client.B().Smembers().Key(s.outboxRegistryKey()).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("outbox sales: %w", classify(err))
	}
	slices.Sort(ids)
	return ids, nil
}

// OutboxTotal is the entries of every outbox OutboxSales lists: claims not
// yet relayed, or relayed and not yet acknowledged.
func (s Outbox) OutboxTotal(ctx context.Context) (int64, error) {
	sales, err := s.OutboxSales(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range sales {
		l, err := s.OutboxLen(ctx, id)
		if err != nil {
			return 0, err
		}
		n += l
	}
	return n, nil
}

// ForgetOutbox removes a sale from the registry of outboxes when its
// outbox is empty and it can take no more reservations: it is not loaded,
// or its window ended more than a minute ago. forgotten reports whether it
// did. A live sale's outbox is never forgotten, even when empty, since its
// next reservation would then go unseen.
func (s Outbox) ForgetOutbox(ctx context.Context, saleID string) (forgotten bool, err error) {
	if _, ok := bucketBase(saleID); !ok {
		return false, fmt.Errorf("forget outbox: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	keys := s.keys(saleID)
	forgettable := func() (bool, error) {
		n, err := outboxForgetScript.Exec(ctx, s.client, []string{keys[keyStock], keys[keyOutbox]},
			[]string{strconv.FormatInt(forgetGrace.Milliseconds(), 10)}).AsInt64()
		return n == 1, err
	}
	if ok, err := forgettable(); err != nil {
		return false, fmt.Errorf("forget outbox: %w", classify(err))
	} else if !ok {
		return false, nil
	}
	if err := s.client.Do(ctx, s.client.B().Srem().Key(s.outboxRegistryKey()).Member(saleID).Build()).Error(); err != nil {
		return false, fmt.Errorf("forget outbox: %w", classify(err))
	}
	// The check and the removal are two steps on two slots. A Preheat
	// that registered the sale in between has loaded it by now (it
	// registers first), and so has any reservation: asking again catches
	// both, and the sale goes back in.
	ok, checkErr := forgettable()
	if checkErr == nil && ok {
		return true, nil
	}
	if err := s.register(ctx, saleID); err != nil {
		return false, fmt.Errorf("forget outbox: sale %s may be missing from the registry until its next preheat: %w", saleID, err)
	}
	if checkErr != nil {
		return false, fmt.Errorf("forget outbox: %w", classify(checkErr))
	}
	return false, nil
}

// ReadOutbox hands consumer up to count entries of a sale's outbox that no
// consumer of group was given yet (XREADGROUP >); they stay pending for it
// until acked. Each reservation of an entry comes as one OutboxEntry under
// the entry's stream id, and count counts entries, as in the other reads.
// The group is made on first use, from the stream's start (outbox_group.lua),
// never for a sale with no outbox. block > 0 waits that long for an entry.
func (s Outbox) ReadOutbox(ctx context.Context, saleID, group, consumer string, count int, block time.Duration) ([]seckill.OutboxEntry, error) {
	return s.readOutbox(ctx, "read outbox", saleID, group, consumer, ">", count, block)
}

// ReadPendingOutbox reads up to count entries of a sale's outbox that were
// given to consumer and are still pending (not acked), oldest first: the
// batch a relay must publish again after a failed Publish or Ack, or after
// a restart under the same consumer name.
func (s Outbox) ReadPendingOutbox(ctx context.Context, saleID, group, consumer string, count int) ([]seckill.OutboxEntry, error) {
	return s.readOutbox(ctx, "read pending outbox", saleID, group, consumer, "0", count, 0)
}

func (s *conn) readOutbox(ctx context.Context, op, saleID, group, consumer, id string, count int, block time.Duration) ([]seckill.OutboxEntry, error) {
	if err := checkOutboxArgs(saleID, group, consumer, count); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	key := s.keys(saleID)[keyOutbox]
	build := func() rueidis.Completed {
		c := s.client.B().Xreadgroup().Group(group, consumer).Count(int64(count))
		if block > 0 {
			return c.Block(max(block.Milliseconds(), 1)).Streams().Key(key).Id(id).Build()
		}
		return c.Streams().Key(key).Id(id).Build()
	}
	streams, err := s.client.Do(ctx, build()).AsXRead()
	if isNoGroup(err) {
		var made bool
		if made, err = s.createGroup(ctx, saleID, group); err == nil && !made {
			return nil, nil // neither the stream nor the sale: nothing to read
		} else if err == nil {
			streams, err = s.client.Do(ctx, build()).AsXRead()
		}
	}
	if rueidis.IsRedisNil(err) { // BLOCK timed out
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", op, classify(err))
	}
	entries := streams[key]
	// miniredis ignores COUNT when re-reading pending entries.
	if len(entries) > count {
		entries = entries[:count]
	}
	return decodeOutbox(saleID, entries), nil
}

// ClaimStaleOutbox takes over up to count entries of a sale's outbox that
// have been pending in group for at least minIdle, whoever held them (a
// relay that died between reading and acking), and returns them; they are
// then pending for consumer.
func (s Outbox) ClaimStaleOutbox(ctx context.Context, saleID, group, consumer string, minIdle time.Duration, count int) ([]seckill.OutboxEntry, error) {
	if err := checkOutboxArgs(saleID, group, consumer, count); err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	key := s.keys(saleID)[keyOutbox]
	idle := strconv.FormatInt(max(minIdle.Milliseconds(), 0), 10)
	var out []seckill.OutboxEntry
	// XAUTOCLAIM looks at a bounded stretch of the pending list per call
	// (COUNT × 10 entries in Redis) and returns a cursor to go on from.
	for cursor, claimed := "0-0", 0; claimed < count; {
		cmd := s.client.B().Xautoclaim().Key(key).Group(group).Consumer(consumer).
			MinIdleTime(idle).Start(cursor).Count(int64(count - claimed)).Build()
		reply, err := s.client.Do(ctx, cmd).ToArray()
		if isNoGroup(err) { // no group: nothing was ever read, so nothing is pending
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("claim outbox: %w", classify(err))
		}
		if len(reply) < 2 {
			return nil, fmt.Errorf("claim outbox: XAUTOCLAIM answered %d elements; want at least 2", len(reply))
		}
		if cursor, err = reply[0].ToString(); err != nil {
			return nil, fmt.Errorf("claim outbox: XAUTOCLAIM cursor: %w", err)
		}
		entries, err := reply[1].AsXRange()
		if err != nil {
			return nil, fmt.Errorf("claim outbox: XAUTOCLAIM entries: %w", err)
		}
		claimed += len(entries)
		out = append(out, decodeOutbox(saleID, entries)...)
		if cursor == "0-0" {
			break
		}
	}
	return out, nil
}

// AckOutbox acknowledges entries of a sale's outbox for group and deletes
// them from the stream, atomically. Call it only once the broker has
// confirmed the entries. An id that is not pending in the group (never
// read, or already acked) is left as it is.
func (s Outbox) AckOutbox(ctx context.Context, saleID, group string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if err := checkOutboxArgs(saleID, group, "-", 1); err != nil {
		return fmt.Errorf("ack outbox: %w", err)
	}
	args := make([]string, 0, len(ids)+1)
	args = append(args, group)
	args = append(args, ids...)
	keys := s.keys(saleID)
	if err := outboxAckScript.Exec(ctx, s.client, []string{keys[keyOutbox], keys[keyStock]}, args).Error(); err != nil {
		return fmt.Errorf("ack outbox: %w", classify(err))
	}
	return nil
}

// OutboxPending returns the number of a sale's outbox entries that group
// has handed to a relay and not yet acked: reservations in flight to the
// broker. It is 0 when the group does not exist.
func (s Outbox) OutboxPending(ctx context.Context, saleID, group string) (int64, error) {
	if err := checkOutboxArgs(saleID, group, "-", 1); err != nil {
		return 0, fmt.Errorf("outbox pending: %w", err)
	}
	reply, err := s.client.Do(ctx, s.client.B().Xpending().Key(s.keys(saleID)[keyOutbox]).Group(group).Build()).ToArray()
	if isNoGroup(err) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("outbox pending: %w", classify(err))
	}
	if len(reply) == 0 {
		return 0, fmt.Errorf("outbox pending: empty XPENDING answer")
	}
	n, err := reply[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("outbox pending: %w", err)
	}
	return n, nil
}

// createGroup makes group on the outbox of saleID (a sale id or a
// bucket's tag), unless neither the outbox nor the sale exists: made is
// false then, and there is nothing to read (outbox_group.lua).
func (s *conn) createGroup(ctx context.Context, saleID, group string) (made bool, err error) {
	keys := s.keys(saleID)
	n, err := outboxGroupScript.Exec(ctx, s.client, []string{keys[keyStock], keys[keyOutbox]}, []string{group}).AsInt64()
	return n == 1, err
}

func isNoGroup(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(rerr.Error(), "NOGROUP")
}

func checkOutboxArgs(saleID, group, consumer string, count int) error {
	switch {
	case !validOutboxName(saleID):
		return seckill.Errorf(seckill.EINVALID, "invalid sale id")
	case group == "" || consumer == "":
		return seckill.Errorf(seckill.EINVALID, "consumer group and consumer name must not be empty")
	case count < 1:
		return seckill.Errorf(seckill.EINVALID, "count must be at least 1, got %d", count)
	}
	return nil
}

// validOutboxName accepts what OutboxSales lists: a sale id, or the tag of
// one bucket of a sale of several (buckets.go).
func validOutboxName(name string) bool {
	_, ok := bucketBase(name)
	return ok
}

// OutboxLen returns the number of reservations in a sale's outbox: those
// not yet relayed, or relayed and not yet acknowledged.
// For a sale of several buckets it is the sum of every bucket's outbox; a
// bucket's name (as OutboxSales lists it) gives that bucket's alone.
func (s Outbox) OutboxLen(ctx context.Context, saleID string) (int64, error) {
	base, ok := bucketBase(saleID)
	if !ok {
		return 0, fmt.Errorf("outbox len: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	tags := []string{saleID}
	if base == saleID {
		bs, err := s.buckets(ctx, saleID)
		if err != nil {
			return 0, fmt.Errorf("outbox len: %w", err)
		}
		tags = bs.tags
	}
	cmds := make(rueidis.Commands, 0, 2*len(tags))
	for _, tag := range tags {
		cmds = append(cmds, s.outboxCountCmds(tag)...)
	}
	res := s.client.DoMulti(ctx, cmds...)
	var n int64
	for b := range tags {
		c, err := outboxCount(res[2*b], res[2*b+1])
		if err != nil {
			return 0, fmt.Errorf("outbox len: %w", err)
		}
		n += c
	}
	return n, nil
}

// outboxCountCmds are the two reads outboxCount takes: the stock hash's
// outboxed and relayed, and the outbox's XLEN.
func (s *conn) outboxCountCmds(tag string) rueidis.Commands {
	keys := s.keys(tag)
	return rueidis.Commands{
		s.client.B().Hmget().Key(keys[keyStock]).Field("outboxed", "relayed").Build(),
		s.client.B().Xlen().Key(keys[keyOutbox]).Build(),
	}
}

// outboxCount is the reservations in one outbox: outboxed - relayed
// (reserve.lua, outbox_ack.lua), or, before the sale's first batch
// written with the count, the entries, each of one reservation then. A
// stock hash lost while its outbox was not leaves only the entries to
// count, each of which may hold many reservations.
func outboxCount(counts, xlen rueidis.RedisResult) (int64, error) {
	vals, err := counts.ToArray()
	if err != nil {
		return 0, classify(err)
	}
	entries, err := xlen.AsInt64()
	if err != nil {
		return 0, classify(err)
	}
	if len(vals) != 2 || vals[0].IsNil() {
		return entries, nil
	}
	outboxed, err := vals[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("malformed outboxed: %w", err)
	}
	var relayed int64
	if !vals[1].IsNil() {
		if relayed, err = vals[1].AsInt64(); err != nil {
			return 0, fmt.Errorf("malformed relayed: %w", err)
		}
	}
	return max(outboxed-relayed, entries), nil
}

// OutboxOldest is when the oldest entry of the sale's outbox (of each of
// its buckets) was appended, by the Redis clock its stream id carries;
// empty when no outbox of the sale holds an entry.
func (s Outbox) OutboxOldest(ctx context.Context, saleID string) (oldest time.Time, empty bool, err error) {
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("outbox oldest: %w", err)
	}
	cmds := make(rueidis.Commands, len(bs.tags))
	for i, tag := range bs.tags {
		cmds[i] = s.client.B().Xrange().Key(s.keys(tag)[keyOutbox]).Start("-").End("+").Count(1).Build()
	}
	empty = true
	for _, r := range s.client.DoMulti(ctx, cmds...) {
		entries, err := r.AsXRange()
		if err != nil {
			return time.Time{}, false, fmt.Errorf("outbox oldest: %w", classify(err))
		}
		if len(entries) == 0 {
			continue
		}
		ms, _, _ := strings.Cut(entries[0].ID, "-")
		at, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("outbox oldest: stream id %q: %w", entries[0].ID, err)
		}
		if t := time.UnixMilli(at); empty || t.Before(oldest) {
			oldest = t
		}
		empty = false
	}
	return oldest, empty, nil
}
