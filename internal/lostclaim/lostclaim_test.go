package lostclaim

import (
	"context"
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
