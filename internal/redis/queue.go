package redis

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// A join is idempotent per buyer (a second join keeps the first place),
// so a lost reply may be retried.
var queueJoinScript = rueidis.NewLuaScriptRetryable(lua("queue_join.lua"))

// Queue keeps queue sales' waiting rooms in the sale's hash slot:
// <prefix>:{sale}:queue, :queue_ip and :queue_seq (queue_join.lua).
type Queue struct{ s *conn }

// Queue returns the store's waiting rooms.
func (s *Store) Queue() *Queue { return &Queue{s: s.conn} }

func (q *Queue) key(saleID, what string) string { return q.s.prefix + ":{" + saleID + "}:" + what }

// JoinBatch gives reqs, all of sale s, their places in one script call.
func (q *Queue) JoinBatch(ctx context.Context, s *seckill.Sale, perIP int64, reqs []seckill.QueueJoin) ([]seckill.QueueJoinResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) > MaxBatch {
		return nil, seckill.Errorf(seckill.EINVALID, "batch of %d joins is over the limit of %d", len(reqs), MaxBatch)
	}
	args := make([]string, 0, 2+3*len(reqs))
	args = append(args, strconv.FormatInt(s.StartAt.UnixMilli(), 10), strconv.FormatInt(perIP, 10))
	var rnd [8]byte
	for i, r := range reqs {
		if !seckill.ValidUserID(r.UserID) || len(r.IP) > MaxRateKeyBytes {
			return nil, seckill.Errorf(seckill.EINVALID, "join %d: invalid user id or address", i)
		}
		_, _ = rand.Read(rnd[:])
		args = append(args, r.UserID, r.IP, strconv.FormatUint(binary.BigEndian.Uint64(rnd[:])>>24, 10))
	}
	keys := []string{q.key(s.ID, "queue"), q.key(s.ID, "queue_ip"), q.key(s.ID, "queue_seq")}
	pos, err := queueJoinScript.Exec(ctx, q.s.client, keys, args).AsIntSlice()
	if err != nil {
		return nil, fmt.Errorf("queue join: %w", classify(err))
	}
	if len(pos) != len(reqs) {
		return nil, fmt.Errorf("queue join: %d answers to %d joins", len(pos), len(reqs))
	}
	out := make([]seckill.QueueJoinResult, len(reqs))
	for i, p := range pos {
		if p < 0 {
			out[i].Refused = seckill.ERATELIMITED
		} else {
			out[i].Position = p
		}
	}
	return out, nil
}

// Position returns userID's 1-based place in the sale's waiting room; ok
// is false when they have none.
func (q *Queue) Position(ctx context.Context, saleID, userID string) (pos int64, ok bool, err error) {
	rank, err := q.s.client.Do(ctx, q.s.client.B().Zrank().Key(q.key(saleID, "queue")).Member(userID).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("queue position: %w", classify(err))
	}
	return rank + 1, true, nil
}

// Length returns how many buyers hold a place in the sale's waiting room.
func (q *Queue) Length(ctx context.Context, saleID string) (int64, error) {
	n, err := q.s.client.Do(ctx, q.s.client.B().Zcard().Key(q.key(saleID, "queue")).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("queue length: %w", classify(err))
	}
	return n, nil
}
