package redis

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// FuzzDecodeBatch: whatever an outbox entry of the batch format holds,
// decodeBatch answers without panicking; a well-counted entry gives one
// answer per line, in order, each a reservation of the sale or an error
// marked ErrMalformedOutboxEntry; anything else is one error. Lines that
// reserve.lua could have written decode to what they say, with the digest
// of their key when the entry's k field lines up with its lines; an entry
// without k (written before keys travelled) decodes without digests.
func FuzzDecodeBatch(f *testing.F) {
	const sale = "tea"
	id := seckill.NewReservationID(sale, time.UnixMilli(1_790_000_000_000))
	short := id[len(sale)+1:]
	f.Add("1", "1790000000000", "1 "+short+" alice", false, "")
	f.Add("2", "1790000000000", "1 "+short+" alice\n3 "+short+" bob", false, "")
	f.Add("2", "1790000000000", "1 "+short+" alice\n3 "+short+" bob", true, "k-1\n")
	f.Add("2", "1790000000000", "1 "+short+" alice\n3 "+short+" bob", true, "k-1")
	f.Add("1", "1790000000000", "1 "+short+" alice", true, "k 1")
	f.Add("2", "1790000000000", "1 "+short+" alice", false, "")
	f.Add("1", "0", "1 "+short+" alice", false, "")
	f.Add("1", "1790000000000", "0 "+short+" alice", true, "k")
	f.Add("1", "1790000000000", "1 short alice", false, "")
	f.Add("1", "1790000000000", "1 "+short+" ", false, "")
	f.Add("x", "", "", true, "")
	f.Fuzz(func(t *testing.T, n, at, batch string, keyed bool, keys string) {
		fields := map[string]string{OutboxCount: n, OutboxAtMs: at, OutboxBatch: batch}
		if keyed {
			fields[OutboxKeys] = keys
		}
		e := rueidis.XRangeEntry{ID: "1-0", FieldValues: fields}
		out := decodeBatch(nil, sale, e)
		count, cerr := strconv.Atoi(n)
		ms, merr := strconv.ParseInt(at, 10, 64)
		if cerr != nil || count < 1 || count != strings.Count(batch, "\n")+1 || merr != nil || ms <= 0 {
			if len(out) != 1 || !errors.Is(out[0].Err, ErrMalformedOutboxEntry) || out[0].Fields[OutboxBatch] != batch {
				t.Fatalf("an entry that does not count its lines or time them: %+v, want one malformed answer with its fields", out)
			}
			return
		}
		if len(out) != count {
			t.Fatalf("%d lines decoded to %d answers", count, len(out))
		}
		lines := strings.Split(batch, "\n")
		keyOf := make([]string, count)
		if keyed && strings.Count(keys, "\n")+1 == count {
			keyOf = strings.Split(keys, "\n")
		}
		for i, o := range out {
			if o.Seq != i || o.StreamID != e.ID || o.Event.SaleID != sale {
				t.Fatalf("answer %d: seq %d, stream id %q, sale %q", i, o.Seq, o.StreamID, o.Event.SaleID)
			}
			if o.Err != nil {
				if !errors.Is(o.Err, ErrMalformedOutboxEntry) {
					t.Fatalf("answer %d: %v is not marked malformed", i, o.Err)
				}
				continue
			}
			ev := o.Event
			want := strconv.FormatInt(ev.Qty, 10) + " " + ev.ReservationID[len(sale)+1:] + " " + ev.UserID
			if !isReservationOf(ev.ReservationID, sale) || !seckill.ValidUserID(ev.UserID) || ev.Qty < 1 ||
				!ev.ReservedAt.Equal(time.UnixMilli(ms)) || want != lines[i] {
				t.Fatalf("answer %d: %+v decoded from %q, which is not what it says", i, ev, lines[i])
			}
			wantDigest := ""
			if seckill.ValidIdempotencyKey(keyOf[i]) {
				wantDigest = seckill.IdempotencyDigest(keyOf[i])
			}
			if ev.KeyDigest != wantDigest {
				t.Fatalf("answer %d: key digest %q, want %q (key %q)", i, ev.KeyDigest, wantDigest, keyOf[i])
			}
		}
	})
}
