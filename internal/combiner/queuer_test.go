package combiner

import (
	"context"
	"errors"
	"testing"

	"github.com/seckill-dev/seckill"
)

// memRoom gives places in arrival order and reads positions from them.
type memRoom struct{ order []string }

func (m *memRoom) JoinBatch(_ context.Context, _ *seckill.Sale, _ int64, reqs []seckill.QueueJoin) ([]seckill.QueueJoinResult, error) {
	out := make([]seckill.QueueJoinResult, len(reqs))
	for i, r := range reqs {
		m.order = append(m.order, r.UserID)
		out[i] = seckill.QueueJoinResult{Position: int64(len(m.order)), Place: seckill.QueuePlace{UserID: r.UserID, Score: seckill.QueueScoreBase + int64(len(m.order))}}
	}
	return out, nil
}

func (m *memRoom) Position(context.Context, string, string) (int64, bool, error) {
	return 42, true, nil // where the database's place put her back
}

type placeKeeper struct {
	had  map[string]seckill.QueuePlace
	fail error
}

func (k placeKeeper) Keep(_ context.Context, _ string, places []seckill.QueuePlace) ([]seckill.QueuePlace, error) {
	if k.fail != nil {
		return nil, k.fail
	}
	out := make([]seckill.QueuePlace, len(places))
	for i, p := range places {
		out[i] = p
		if h, ok := k.had[p.UserID]; ok {
			out[i] = h
		}
	}
	return out, nil
}

// TestQueuerAnswersThePlaceTheDatabaseKept: a place kept as given is
// answered as the room gave it; a buyer the database knew with another
// place is answered that place at its position now; a place the
// database did not take is the keeper's error (try later).
func TestQueuerAnswersThePlaceTheDatabaseKept(t *testing.T) {
	sale := &seckill.Sale{ID: "room"}
	before := seckill.QueuePlace{UserID: "ann", Score: 77}
	q := NewQueuer(&memRoom{}, placeKeeper{had: map[string]seckill.QueuePlace{"ann": before}}, Config{})
	defer q.Stop(context.Background())
	if r, err := q.Join(context.Background(), sale, 0, seckill.QueueJoin{UserID: "bob"}); err != nil || r.Position != 1 || r.Place.UserID != "bob" {
		t.Fatalf("bob's join = %+v, %v; want position 1 as the room gave it", r, err)
	}
	if r, err := q.Join(context.Background(), sale, 0, seckill.QueueJoin{UserID: "ann"}); err != nil || r.Position != 42 || r.Place != before {
		t.Fatalf("ann's join = %+v, %v; want her earlier place %+v at position 42", r, err, before)
	}
	down := &seckill.Error{Code: seckill.ETRYLATER, Message: "not kept"}
	q2 := NewQueuer(&memRoom{}, placeKeeper{fail: down}, Config{})
	defer q2.Stop(context.Background())
	if r, err := q2.Join(context.Background(), sale, 0, seckill.QueueJoin{UserID: "cat"}); !errors.Is(err, down) {
		t.Fatalf("a join not kept = %+v, %v; want the keeper's error", r, err)
	}
}
