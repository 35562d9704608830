package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// Stock buckets: one hot sale over several Cluster shards (docs/shards.md).
//
// Bucket 0 is the sale's own keys, <prefix>:{<sale>}:*, whose stock hash
// holds `buckets` = K; bucket b > 0 is a complete copy under the tag
// <sale>~<b>~<n> (n: the first that puts its slot mid-way into the b-th
// K-th of the slot space after bucket 0's), so the scripts run on a bucket
// unchanged. A buyer reserves in the home bucket FNV-1a(user) mod K, which
// keeps the limit and idempotency exact; a home bucket that runs dry pulls
// units from another.
//
// A move takes units out of the donor before they reach the receiver, so a
// crash between its two scripts undersells and never oversells:
//
//	move_out.lua  on the donor: total -= n only if total - reserved >= n,
//	              and a journal entry <prefix>:{donor}:moves[id] = "<dst>:<n>:<s>"
//	move_in.lua   on the receiver: total += n, once per move id
//	              (<prefix>:{dst}:movesin holds the ids applied)
//
// A journal entry older than moveStale is finished by the sale's next
// rebalance; Stock counts journalled units in the total.

var (
	// Never retried by the client: a lost reply is settled by the journal.
	moveOutScript = rueidis.NewLuaScript(lua("move_out.lua"))
	// Applying a move twice changes nothing (movesin), so it may be retried.
	moveInScript = rueidis.NewLuaScriptRetryable(lua("move_in.lua"))
)

const (
	// moveStale is how old a journal entry must be before a rebalance
	// finishes it for a mover that went silent.
	moveStale = 2 * time.Second
	// rebalanceRounds bounds the reads and moves of one rebalance, and the
	// rebalances of one request: generous, since giving up early is a
	// phantom sold-out. A round costs one round trip per shard.
	rebalanceRounds = 64
	bucketSep       = "~"
	slotCount       = 16384
)

// bucketSet is the layout of one sale's buckets. Immutable once built.
type bucketSet struct {
	sale string
	tags []string // tags[b] is bucket b's hash tag; tags[0] == sale
}

func (bs *bucketSet) k() int { return len(bs.tags) }

// home is the bucket of a buyer.
func (bs *bucketSet) home(user string) int {
	if len(bs.tags) == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(user))
	return int(h.Sum32() % uint32(len(bs.tags)))
}

// newBucketSet lays out k buckets of sale.
func newBucketSet(sale string, k int) *bucketSet {
	bs := &bucketSet{sale: sale, tags: make([]string, k)}
	bs.tags[0] = sale
	if k == 1 {
		return bs
	}
	// Bucket b goes in the middle half of the ((part of bucket 0) + b)-th
	// of K equal parts of the slot space.
	part := slotCount / k
	first := int(keySlot(sale)) / part
	for b := 1; b < k; b++ {
		lo := ((first+b)%k)*part + part/4
		for n := 0; ; n++ {
			tag := sale + bucketSep + strconv.Itoa(b) + bucketSep + strconv.Itoa(n)
			if d := int(keySlot(tag)) - lo; d >= 0 && d < part/2 || n >= 100_000 {
				bs.tags[b] = tag
				break
			}
		}
	}
	return bs
}

// bucketBase returns the sale of a bucket tag ("<sale>~<b>~<n>") or of a
// sale id, and whether name is either.
func bucketBase(name string) (string, bool) {
	sale, rest, found := strings.Cut(name, bucketSep)
	if !seckill.ValidSaleID(sale) {
		return "", false
	}
	if !found {
		return sale, true
	}
	b, n, ok := strings.Cut(rest, bucketSep)
	if !ok || !digits(b) || !digits(n) {
		return "", false
	}
	return sale, true
}

func digits(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// bucketCache remembers each sale's layout; a sale's bucket count never
// changes once it is loaded.
type bucketCache struct{ m sync.Map } // sale id -> *bucketSet

// buckets returns the layout of saleID, read once from bucket 0's stock
// hash. A sale not loaded yet is one bucket and is not remembered.
func (s *conn) buckets(ctx context.Context, saleID string) (*bucketSet, error) {
	if v, ok := s.layouts.m.Load(saleID); ok {
		return v.(*bucketSet), nil
	}
	vals, err := s.client.Do(ctx, s.client.B().Hmget().Key(s.keys(saleID)[keyStock]).Field("total", "buckets").Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("buckets: %w", classify(err))
	}
	if len(vals) != 2 || vals[0].IsNil() {
		return newBucketSet(saleID, 1), nil
	}
	k := int64(1)
	if !vals[1].IsNil() {
		if k, err = vals[1].AsInt64(); err != nil || k < 1 || k > seckill.MaxSaleBuckets {
			return nil, fmt.Errorf("buckets: sale %s: malformed bucket count: %v", saleID, err)
		}
	}
	bs := newBucketSet(saleID, int(k))
	v, _ := s.layouts.m.LoadOrStore(saleID, bs)
	return v.(*bucketSet), nil
}

// preheatBuckets loads buckets 1..K-1 of a sale (bucket 0 is the sale's own
// stock hash, loaded last by Preheat with the bucket count) and registers
// their outboxes. Bucket b gets Stock/K units, the first Stock%K one more.
func (s *conn) preheatBuckets(ctx context.Context, sale *seckill.Sale, healing string) error {
	k := sale.BucketCount()
	bs := newBucketSet(sale.ID, int(k))
	for b := 1; b < int(k); b++ {
		if err := s.register(ctx, bs.tags[b]); err != nil {
			return err
		}
		if err := preheatScript.Exec(ctx, s.client, s.keys(bs.tags[b])[:1], preheatArgs(sale, k, b, healing)).Error(); err != nil {
			return classify(err)
		}
	}
	return nil
}

// stockArgs is the ARGV of stock_write.lua (so of preheat.lua and
// sale_edit.lua) for bucket b of sale in k buckets: the bucket's share of
// the stock, the per-user limit, the window and, for bucket 0 of several,
// the bucket count.
func stockArgs(sale *seckill.Sale, k int64, b int) []string {
	args := []string{
		strconv.FormatInt(bucketShare(sale.Stock, k, b), 10),
		strconv.FormatInt(sale.PurchaseLimit, 10),
		strconv.FormatInt(sale.StartAt.UnixMilli(), 10),
		strconv.FormatInt(sale.EndAt.UnixMilli(), 10),
	}
	if b == 0 && k > 1 {
		args = append(args, strconv.FormatInt(k, 10))
	}
	if !sale.Admission.FirstCome() {
		if len(args) == 4 {
			args = append(args, "")
		}
		args = append(args, string(sale.Admission.Of()))
	}
	return args
}

// preheatArgs is the ARGV of preheat.lua: stockArgs, then the healing
// flag to load the hash with, if any.
func preheatArgs(sale *seckill.Sale, k int64, b int, healing string) []string {
	args := stockArgs(sale, k, b)
	if healing == "" {
		return args
	}
	for len(args) < 6 {
		args = append(args, "")
	}
	return append(args, healing)
}

func bucketShare(stock, k int64, b int) int64 {
	share := stock / k
	if int64(b) < stock%k {
		share++
	}
	return share
}

// reserveBuckets decides reqs of a sale of several buckets: each request
// in its buyer's home bucket, every bucket's requests in one script call,
// the buckets at once. Requests a bucket answered sold_out go back to that
// bucket after a rebalance moved units in, until the rebalance finds none.
// Each bucket's requests are decided atomically and in order; the batch as
// a whole is not one atomic step. When one bucket's call fails the batch
// fails, as with a lost reply: reservations made in the other buckets
// stand and are ordered, and a retry with the same idempotency key gets
// them back.
func (s *conn) reserveBuckets(ctx context.Context, bs *bucketSet, reqs []seckill.ReserveRequest) ([]seckill.ReserveResult, error) {
	results := make([]seckill.ReserveResult, len(reqs))
	byBucket := make([][]int, bs.k())
	for i, r := range reqs {
		b := bs.home(r.UserID)
		byBucket[b] = append(byBucket[b], i)
	}
	var (
		wg       sync.WaitGroup
		errs     = make([]error, bs.k())
		attempts = make([]int, bs.k())
	)
	for b, idx := range byBucket {
		if len(idx) == 0 {
			continue
		}
		wg.Go(func() {
			for len(idx) > 0 {
				attempts[b]++
				sub := make([]seckill.ReserveRequest, len(idx))
				for j, i := range idx {
					sub[j] = reqs[i]
				}
				res, err := s.reserveIn(ctx, bs.tags[b], sub, false)
				if err != nil {
					errs[b] = err
					return
				}
				var again []int
				var need int64
				for j, i := range idx {
					results[i] = res[j]
					if res[j].Outcome == seckill.OutcomeSoldOut {
						again = append(again, i)
						need += reqs[i].Qty
					}
				}
				if len(again) == 0 || attempts[b] > rebalanceRounds {
					return
				}
				// A failed rebalance leaves its units safe (journalled)
				// and the sold_out answers standing: they are what
				// Redis said, and the requests of other buckets in this
				// batch may have reserved, which an error would hide.
				if moved, err := s.rebalance(ctx, bs, b, need); err != nil || !moved {
					return // every bucket is out: sold_out stands
				}
				idx = again
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// bucketState is one read of one bucket.
type bucketState struct {
	total, reserved, movedIn, movedOut, heals int64
	loaded                                    bool
	journal                                   map[string]string // move id -> "<dst>:<n>:<unix s>"
}

func (st bucketState) available() int64 { return max(st.total-st.reserved, 0) }

// readBuckets reads every bucket's stock hash and move journal, the
// buckets at once (one round trip per shard).
func (s *conn) readBuckets(ctx context.Context, bs *bucketSet) ([]bucketState, error) {
	cmds := make(rueidis.Commands, 0, 2*bs.k())
	for _, tag := range bs.tags {
		keys := s.keys(tag)
		cmds = append(cmds,
			s.client.B().Hmget().Key(keys[keyStock]).Field("total", "reserved", "moved_in", "moved_out", "heals").Build(),
			s.client.B().Hgetall().Key(s.movesKey(tag)).Build())
	}
	replies := s.client.DoMulti(ctx, cmds...)
	out := make([]bucketState, bs.k())
	for b := range out {
		vals, err := replies[2*b].ToArray()
		if err != nil {
			return nil, fmt.Errorf("read buckets: %w", classify(err))
		}
		if len(vals) == 5 && !vals[0].IsNil() {
			out[b].loaded = true
			nums := []*int64{&out[b].total, &out[b].reserved, &out[b].movedIn, &out[b].movedOut, &out[b].heals}
			for i, p := range nums {
				if vals[i].IsNil() {
					continue
				}
				if *p, err = vals[i].AsInt64(); err != nil {
					return nil, fmt.Errorf("read buckets: bucket %s: malformed stock hash: %w", bs.tags[b], err)
				}
			}
		}
		if out[b].journal, err = replies[2*b+1].AsStrMap(); err != nil {
			return nil, fmt.Errorf("read buckets: %w", classify(err))
		}
	}
	return out, nil
}

func (s *conn) movesKey(tag string) string   { return s.prefix + ":{" + tag + "}:moves" }
func (s *conn) movesInKey(tag string) string { return s.prefix + ":{" + tag + "}:movesin" }

// rebalance moves unreserved units into bucket dst, at least need if the
// donor has them and up to half of the donor's unreserved units, from the
// bucket with the most. moved is false only when two consecutive reads of
// every bucket found nothing to move, nothing in transit and no change: the
// whole sale is sold out (but for a restore landing after the read).
func (s *conn) rebalance(ctx context.Context, bs *bucketSet, dst int, need int64) (moved bool, err error) {
	var last []bucketState
	for round := 0; round < rebalanceRounds; round++ {
		states, err := s.readBuckets(ctx, bs)
		if err != nil {
			return false, err
		}
		transit := false
		for b, st := range states {
			for id, entry := range st.journal {
				transit = true
				if _, err := s.finishStaleMove(ctx, bs, b, id, entry); err != nil {
					return false, err
				}
			}
		}
		donor, best := -1, int64(0)
		for b, st := range states {
			if b != dst && st.loaded && st.available() > best {
				donor, best = b, st.available()
			}
		}
		if donor >= 0 {
			n, err := s.move(ctx, bs, donor, dst, min(best, max(need, (best+1)/2)))
			if err != nil {
				return false, err
			}
			if n > 0 {
				return true, nil
			}
			last = nil
			continue // the donor sold out meanwhile: read again
		}
		if states[dst].available() > 0 {
			return true, nil // units arrived (another mover, or a restore)
		}
		if !transit && last != nil && sameStates(last, states) {
			return false, nil
		}
		if transit {
			// Another mover's units are between two buckets: they land
			// within a round trip, or are finished once stale.
			select {
			case <-ctx.Done():
				return false, fmt.Errorf("rebalance: %w", ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
		last = states
	}
	return false, nil
}

func sameStates(a, b []bucketState) bool {
	for i := range a {
		x, y := a[i], b[i]
		if x.total != y.total || x.reserved != y.reserved || x.movedIn != y.movedIn || x.movedOut != y.movedOut || len(x.journal) != len(y.journal) {
			return false
		}
	}
	return true
}

// move takes up to n unreserved units from bucket src to bucket dst and
// returns how many moved.
func (s *conn) move(ctx context.Context, bs *bucketSet, src, dst int, n int64) (int64, error) {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	got, err := moveOutScript.Exec(ctx, s.client, []string{s.keys(bs.tags[src])[keyStock], s.movesKey(bs.tags[src])},
		[]string{id, strconv.FormatInt(n, 10), strconv.Itoa(dst)}).AsInt64()
	if err != nil {
		// Moved or not, the journal says: a stale entry is finished by a
		// later rebalance.
		return 0, fmt.Errorf("rebalance: move out of bucket %d: %w", src, classify(err))
	}
	if got <= 0 {
		return 0, nil
	}
	if s.afterMoveOut != nil {
		if err := s.afterMoveOut(); err != nil {
			return 0, err
		}
	}
	if err := s.finishMove(ctx, bs, src, dst, id, got); err != nil {
		return 0, err
	}
	return got, nil
}

// finishMove adds a journalled move's units to its receiver (once, however
// often it is called) and deletes the journal entry.
func (s *conn) finishMove(ctx context.Context, bs *bucketSet, src, dst int, id string, n int64) error {
	code, err := moveInScript.Exec(ctx, s.client, []string{s.keys(bs.tags[dst])[keyStock], s.movesInKey(bs.tags[dst])},
		[]string{id, strconv.FormatInt(n, 10)}).AsInt64()
	if err != nil {
		return fmt.Errorf("rebalance: move into bucket %d: %w", dst, classify(err))
	}
	if code < 0 {
		return fmt.Errorf("rebalance: move into bucket %d: bucket not loaded; the move stays journalled", dst)
	}
	if err := s.client.Do(ctx, s.client.B().Hdel().Key(s.movesKey(bs.tags[src])).Field(id).Build()).Error(); err != nil {
		return fmt.Errorf("rebalance: journal of bucket %d: %w", src, classify(err))
	}
	return nil
}

// finishStaleMove finishes a journal entry of bucket src older than
// moveStale: its mover died, or lost its connection, between the steps.
// The entry's time is Redis's; a node whose clock is off finishes moves
// early (harmless: finishing is idempotent) or late (a longer undersell).
func (s *conn) finishStaleMove(ctx context.Context, bs *bucketSet, src int, id, entry string) (finished bool, err error) {
	parts := strings.Split(entry, ":")
	if len(parts) != 3 {
		return false, fmt.Errorf("rebalance: bucket %d: malformed journal entry %q", src, entry)
	}
	dst, err1 := strconv.Atoi(parts[0])
	n, err2 := strconv.ParseInt(parts[1], 10, 64)
	at, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || dst < 0 || dst >= bs.k() {
		return false, fmt.Errorf("rebalance: bucket %d: malformed journal entry %q", src, entry)
	}
	if time.Since(time.Unix(at, 0)) < s.staleAfter() {
		return false, nil
	}
	return true, s.finishMove(ctx, bs, src, dst, id, n)
}

// RepairMoves finishes every stale move of a sale's buckets (a mover that
// died between its two steps): the next rebalance does it anyway; this is
// for an operator, or a test, that wants it now.
func (s Admin) RepairMoves(ctx context.Context, saleID string) (repaired int, err error) {
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return 0, err
	}
	states, err := s.readBuckets(ctx, bs)
	if err != nil {
		return 0, err
	}
	for b, st := range states {
		for id, entry := range st.journal {
			done, err := s.finishStaleMove(ctx, bs, b, id, entry)
			if err != nil {
				return repaired, err
			}
			if done {
				repaired++
			}
		}
	}
	return repaired, nil
}

// bucketsStock is the stock of a sale of several buckets: every bucket's
// total and reserved, and the units journalled as moving between two.
func (s *conn) bucketsStock(ctx context.Context, bs *bucketSet) (seckill.StockLevel, error) {
	states, err := s.readBuckets(ctx, bs)
	if err != nil {
		return seckill.StockLevel{}, fmt.Errorf("stock: %w", err)
	}
	level := seckill.StockLevel{Total: inTransit(states), Heals: states[0].heals} // a heal counts in every bucket
	for b, st := range states {
		if !st.loaded {
			return seckill.StockLevel{}, fmt.Errorf("stock: sale %s: bucket %d is not loaded: %w", bs.sale, b, seckill.ErrNotFound)
		}
		level.Total += st.total
		level.Reserved += st.reserved
	}
	return level, nil
}

// homeIdem reads the idempotency entries of every keyed request (its
// key's and its digest's, as Replays) from its buyer's home bucket, in
// the order of reqs (unkeyed ones skipped), one round trip per shard.
func (s *conn) homeIdem(ctx context.Context, bs *bucketSet, reqs []seckill.ReserveRequest) ([]rueidis.RedisMessage, error) {
	cmds := make(rueidis.Commands, 0, len(reqs))
	for _, r := range reqs {
		if r.IdempotencyKey != "" {
			key := s.keys(bs.tags[bs.home(r.UserID)])[keyIdem]
			cmds = append(cmds, s.client.B().Hmget().Key(key).
				Field(idemField(r.UserID, r.IdempotencyKey), digestField(r.UserID, seckill.IdempotencyDigest(r.IdempotencyKey))).Build())
		}
	}
	out := make([]rueidis.RedisMessage, 0, 2*len(cmds))
	for _, r := range s.client.DoMulti(ctx, cmds...) {
		vals, err := r.ToArray()
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, nil
}

// bucketsOf returns, for each reservation id of a sale of several
// buckets, the tag of the bucket holding its record (bucket 0's when none
// does), in one round trip per shard.
func (s *conn) bucketsOf(ctx context.Context, bs *bucketSet, ids []string) ([]string, error) {
	cmds := make(rueidis.Commands, 0, len(ids)*bs.k())
	for _, id := range ids {
		for _, tag := range bs.tags {
			cmds = append(cmds, s.client.B().Hmget().Key(s.keys(tag)[keyRes]).Field(recordFields(id)...).Build())
		}
	}
	replies := s.client.DoMulti(ctx, cmds...)
	out := make([]string, len(ids))
	for i := range ids {
		out[i] = bs.tags[0]
		for b := bs.k() - 1; b >= 0; b-- {
			found, err := anyField(replies[i*bs.k()+b])
			if err != nil {
				return nil, err
			}
			if found {
				out[i] = bs.tags[b]
			}
		}
	}
	return out, nil
}

// bucketOf returns the tag of the bucket holding a reservation's record:
// the sale itself when it has one bucket, else the first bucket whose res
// hash has it (the sale itself when none has).
func (s *conn) bucketOf(ctx context.Context, saleID, reservationID string) (string, error) {
	bs, err := s.buckets(ctx, saleID)
	if err != nil || bs.k() == 1 {
		return saleID, err
	}
	cmds := make(rueidis.Commands, bs.k())
	for b, tag := range bs.tags {
		cmds[b] = s.client.B().Hmget().Key(s.keys(tag)[keyRes]).Field(recordFields(reservationID)...).Build()
	}
	for b, r := range s.client.DoMulti(ctx, cmds...) {
		found, err := anyField(r)
		if err != nil {
			return "", err
		}
		if found {
			return bs.tags[b], nil
		}
	}
	return saleID, nil
}

// anyField reports whether an HMGET found any of its fields.
func anyField(r rueidis.RedisResult) (bool, error) {
	vals, err := r.ToArray()
	if err != nil {
		return false, classify(err)
	}
	for _, v := range vals {
		if !v.IsNil() {
			return true, nil
		}
	}
	return false, nil
}

// inTransit sums the units journalled as moving.
func inTransit(states []bucketState) int64 {
	var n int64
	for _, st := range states {
		for _, e := range st.journal {
			if parts := strings.Split(e, ":"); len(parts) == 3 {
				v, _ := strconv.ParseInt(parts[1], 10, 64)
				n += v
			}
		}
	}
	return n
}

func (s *conn) staleAfter() time.Duration {
	if s.moveStale > 0 {
		return s.moveStale
	}
	return moveStale
}

// keySlot is Redis Cluster's slot of a hash tag: CRC16 (XMODEM) mod 16384.
func keySlot(tag string) uint16 {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % slotCount
}
