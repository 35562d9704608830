package lostclaim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
)

// landedStore is a database in which the order landed between the
// caller's reads and the resolver's record: RecordFailedOrder refuses.
type landedStore struct{ order *seckill.Order }

func (s *landedStore) Order(context.Context, string) (*seckill.Order, error) { return s.order, nil }
func (s *landedStore) FailedOrder(context.Context, string) (*seckill.FailedOrder, error) {
	return nil, seckill.ErrNotFound
}
func (s *landedStore) RecordFailedOrder(context.Context, *seckill.FailedOrder) error {
	return seckill.ErrDuplicate
}

func TestResolve(t *testing.T) {
	ids := claimid.NewMinter([]byte("k"))
	t0 := time.Now()
	id := ids.New("tea", "alice", 1, t0)
	st := &landedStore{order: &seckill.Order{ReservationID: id, UserID: "alice", Status: seckill.OrderPlaced}}
	now := t0
	r := New(st, ids, Config{After: time.Second, Now: func() time.Time { return now }})
	ctx := context.Background()

	if c, err := r.Resolve(ctx, id, "mallory"); err != nil || c.Known {
		t.Errorf("someone else's id: %+v, %v; want unknown", c, err)
	}
	if c, err := r.Resolve(ctx, id, "alice"); err != nil || !c.Known || c.Order != nil || c.Failed != nil || c.Qty != 1 {
		t.Errorf("within the bound: %+v, %v; want pending qty 1", c, err)
	}
	now = t0.Add(time.Second)
	if c, err := r.Resolve(ctx, id, "alice"); err != nil || c.Order != st.order {
		t.Errorf("after the bound, with the order landed meanwhile: %+v, %v; want the order", c, err)
	}
}

// countingLimiter allows limit.Rate lookups per key, then refuses.
type countingLimiter struct{ n map[string]int }

func (l *countingLimiter) Allow(_ context.Context, key string, limit seckill.RateLimit) (seckill.RateResult, error) {
	if l.n[key] >= limit.Rate {
		return seckill.RateResult{RetryAfter: time.Minute}, nil
	}
	l.n[key]++
	return seckill.RateResult{Allowed: true}, nil
}

// recordingStore is a database that has neither the order nor the failed
// order, and records what it is given.
type recordingStore struct{ failed []*seckill.FailedOrder }

func (s *recordingStore) Order(context.Context, string) (*seckill.Order, error) {
	return nil, seckill.ErrNotFound
}
func (s *recordingStore) FailedOrder(context.Context, string) (*seckill.FailedOrder, error) {
	return nil, seckill.ErrNotFound
}
func (s *recordingStore) RecordFailedOrder(_ context.Context, f *seckill.FailedOrder) error {
	s.failed = append(s.failed, f)
	return nil
}

type fakeOutbox struct {
	oldest time.Time
	empty  bool
}

func (o *fakeOutbox) OutboxOldest(context.Context, string) (time.Time, bool, error) {
	return o.oldest, o.empty, nil
}

// TestLostOnceNothingInFlight: a forgotten claim past MinAge fails as
// soon as no outbox entry is old enough to be its and the broker holds
// nothing, long before After; while either may hold it, it stays pending.
func TestLostOnceNothingInFlight(t *testing.T) {
	ids := claimid.NewMinter([]byte("k"))
	t0 := time.Now()
	id := ids.New("tea", "alice", 1, t0)
	now := t0.Add(5 * time.Second)
	st := &recordingStore{}
	out := &fakeOutbox{oldest: t0.Add(-time.Second)}
	backlog := int64(2)
	var lost int
	r := New(st, ids, Config{
		After: time.Hour, MinAge: 2 * time.Second, Now: func() time.Time { return now },
		Outbox: out, Backlog: func(context.Context) (int64, error) { return backlog, nil },
		OnLost: func(*seckill.FailedOrder) { lost++ },
	})
	ctx := context.Background()
	pending := func(why string) {
		t.Helper()
		if c, err := r.Resolve(ctx, id, "alice"); err != nil || !c.Known || c.Failed != nil {
			t.Fatalf("%s: %+v, %v; want pending", why, c, err)
		}
	}
	pending("an outbox entry older than the claim")
	out.oldest = t0.Add(4 * time.Second) // after the claim, but within MinAge of it: may be its
	pending("an outbox entry within MinAge of the claim")
	out.empty = true
	pending("events in the broker")
	backlog = 0
	c, err := r.Resolve(ctx, id, "alice")
	if err != nil || c.Failed == nil || len(st.failed) != 1 || lost != 1 {
		t.Fatalf("nothing in flight: %+v, %v, %d recorded, %d lost; want failed, recorded once", c, err, len(st.failed), lost)
	}
	if reason := st.failed[0].Reason; !strings.HasPrefix(reason, seckill.ReasonLostInStockStore) || !strings.Contains(reason, "broker empty") {
		t.Errorf("reason %q; want %s and what was in flight", reason, seckill.ReasonLostInStockStore)
	}
}

// TestLookupLimit: a buyer guessing claim ids is refused after the lookup
// limit, and then even an id whose tag is right (the guess that would
// have succeeded) is not looked at: no failed order, no alert. Other
// buyers are not affected.
func TestLookupLimit(t *testing.T) {
	ids := claimid.NewMinter([]byte("deployment key"))
	t0 := time.Now()
	st := &recordingStore{}
	lim := &countingLimiter{n: map[string]int{}}
	r := New(st, ids, Config{After: time.Second, Now: func() time.Time { return t0.Add(time.Hour) },
		Limiter: lim, LookupLimit: seckill.RateLimit{Rate: 5, Period: time.Hour}})
	ctx := context.Background()
	right := ids.New("tea", "mallory", 1, t0)
	for i := range 5 {
		wrong := ids.New("tea", "someone-else", 1, t0.Add(time.Duration(i)*time.Millisecond))
		if c, err := r.Resolve(ctx, wrong, "mallory"); err != nil || c.Known {
			t.Fatalf("guess %d: %+v, %v; want unknown", i, c, err)
		}
	}
	c, err := r.Resolve(ctx, right, "mallory")
	if seckill.ErrorCode(err) != seckill.ERATELIMITED || c.Known {
		t.Fatalf("after the limit: %+v, %v; want rate_limited", c, err)
	}
	if len(st.failed) != 0 {
		t.Fatalf("a failed order was recorded past the limit: %+v", st.failed[0])
	}
	// Another buyer's lost claim still resolves (and is recorded).
	alice := ids.New("tea", "alice", 1, t0)
	if c, err := r.Resolve(ctx, alice, "alice"); err != nil || c.Failed == nil {
		t.Fatalf("alice's lost claim: %+v, %v; want a failed order", c, err)
	}
	if DefaultLookupLimit.Validate() != nil || New(st, ids, Config{}).cfg.LookupLimit != DefaultLookupLimit {
		t.Fatal("the default lookup limit is not in force")
	}
}
