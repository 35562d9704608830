package redis

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestQueueAfterTheStartIsArrivalOrderOnePlaceEachCappedPerAddress: once
// the sale started, places follow arrival, a second join keeps the first
// place, and an address holds at most the cap.
func TestQueueAfterTheStartIsArrivalOrderOnePlaceEachCappedPerAddress(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		ctx := t.Context()
		q := newStore(t).Queue()
		now := time.Now()
		sale := &seckill.Sale{ID: "qs", StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
			Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1}}
		res, err := q.JoinBatch(ctx, sale, 2, []seckill.QueueJoin{{UserID: "a", IP: "1.1.1.1"}, {UserID: "b", IP: "2.2.2.2"}, {UserID: "a", IP: "1.1.1.1"}})
		if err != nil || res[0].Position != 1 || res[1].Position != 2 || res[2].Position != 1 {
			t.Fatalf("joins = %+v, %v; want a 1, b 2, a again 1", res, err)
		}
		res, err = q.JoinBatch(ctx, sale, 2, []seckill.QueueJoin{{UserID: "c", IP: "1.1.1.1"}, {UserID: "d", IP: "1.1.1.1"}, {UserID: "e"}})
		if err != nil || res[0].Position != 3 || res[1].Refused != seckill.ERATELIMITED || res[2].Position != 4 {
			t.Fatalf("joins = %+v, %v; want c 3, d refused (1.1.1.1 holds 2), e 4", res, err)
		}
		if p, ok, err := q.Position(ctx, "qs", "b"); err != nil || !ok || p != 2 {
			t.Fatalf("Position(b) = %d, %v, %v", p, ok, err)
		}
		if _, ok, _ := q.Position(ctx, "qs", "d"); ok {
			t.Fatal("a refused buyer has a place")
		}
		if n, err := q.Length(ctx, "qs"); err != nil || n != 4 {
			t.Fatalf("Length = %d, %v; want 4", n, err)
		}
	})
}
