package redis

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

var (
	queueJoinLua = lua("sale_ready.lua", "ratelimits.lua", "queue_join.lua")
	// Without rate checks a join is idempotent per buyer (a second join
	// keeps the first place), so a lost reply may be retried.
	queueJoinScript = rueidis.NewLuaScriptRetryable(queueJoinLua)
	// With rate checks it is not retried: that would count them twice.
	queueJoinLimitedScript = rueidis.NewLuaScript(queueJoinLua)
)

// Moving the pace on is not retried: a replay would count the time since
// at the new rate, not the old (a small error, but a needless one).
var queuePaceScript = rueidis.NewLuaScript(lua("sale_ready.lua", "queue_pace.lua"))

// Putting a lost pace back, or raising the arrival counter to a floor,
// may be replayed.
var (
	queuePaceRestoreScript = rueidis.NewLuaScriptRetryable(lua("queue_pace_restore.lua"))
	queueSeqRaiseScript    = rueidis.NewLuaScriptRetryable(lua("queue_seq_raise.lua"))
)

// Queue keeps queue sales' waiting rooms in the sale's hash slot:
// <prefix>:{sale}:queue, :queue_ip and :queue_seq (queue_join.lua), and an
// adaptive queue's pace in :queue_pace (queue_pace.lua).
type Queue struct{ s *conn }

// Queue returns the store's waiting rooms.
func (s *Store) Queue() *Queue { return &Queue{s: s.conn} }

func (q *Queue) key(saleID, what string) string { return q.s.prefix + ":{" + saleID + "}:" + what }

// queueKeys name every key of a waiting room: archiving a sale drops them.
var queueKeys = []string{"queue", "queue_ip", "queue_seq", "queue_pace"}

func (s *conn) queueKeys(saleID string) []string {
	out := make([]string, len(queueKeys))
	for i, k := range queueKeys {
		out[i] = s.prefix + ":{" + saleID + "}:" + k
	}
	return out
}

// JoinBatch gives reqs, all of sale s, their places in one script call.
func (q *Queue) JoinBatch(ctx context.Context, s *seckill.Sale, perIP int64, reqs []seckill.QueueJoin) ([]seckill.QueueJoinResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) > MaxBatch {
		return nil, seckill.Errorf(seckill.EINVALID, "batch of %d joins is over the limit of %d", len(reqs), MaxBatch)
	}
	first := reqs[0].RateChecks
	per := len(first)
	keys := make([]string, 4, 4+per)
	keys[0], keys[1], keys[2], keys[3] = q.key(s.ID, "queue"), q.key(s.ID, "queue_ip"), q.key(s.ID, "queue_seq"), q.s.keys(s.ID)[keyStock]
	for _, c := range first {
		keys = append(keys, q.s.saleRateBase(s.ID, c.Limit))
	}
	args := make([]string, 0, 3+(3+per)*len(reqs))
	args = append(args, strconv.FormatInt(s.StartAt.UnixMilli(), 10), strconv.FormatInt(perIP, 10), strconv.Itoa(per))
	var rnd [8]byte
	for i, r := range reqs {
		if !seckill.ValidUserID(r.UserID) || len(r.IP) > MaxRateKeyBytes {
			return nil, seckill.Errorf(seckill.EINVALID, "join %d: invalid user id or address", i)
		}
		if err := rateShape(i, r.RateChecks, first); err != nil {
			return nil, fmt.Errorf("queue join: %w", err)
		}
		_, _ = rand.Read(rnd[:])
		args = append(args, r.UserID, r.IP, strconv.FormatUint(binary.BigEndian.Uint64(rnd[:])>>24, 10))
		for _, c := range r.RateChecks {
			args = append(args, c.Key)
		}
	}
	script := queueJoinScript
	if per > 0 {
		script = queueJoinLimitedScript
	}
	msg, err := script.Exec(ctx, q.s.client, keys, args).ToMessage()
	if err != nil {
		return nil, fmt.Errorf("queue join: %w", classify(err))
	}
	out := make([]seckill.QueueJoinResult, len(reqs))
	if code, err := msg.AsInt64(); err == nil && code == 7 {
		for i := range out {
			out[i].Refused = seckill.ETRYLATER
		}
		return out, nil
	}
	answers, err := msg.ToArray()
	if err != nil {
		return nil, fmt.Errorf("queue join: %w", err)
	}
	if len(answers) != len(reqs) {
		return nil, fmt.Errorf("queue join: %d answers to %d joins", len(answers), len(reqs))
	}
	for i, m := range answers {
		if m.IsArray() {
			by, retry, err := rateRefusal(m, per)
			if err != nil {
				return nil, fmt.Errorf("queue join %d: %w", i, err)
			}
			out[i] = seckill.QueueJoinResult{RateLimited: true, RateLimitedBy: by, RetryAfter: retry}
			continue
		}
		if p, err := m.AsInt64(); err == nil && p < 0 {
			out[i].Refused = seckill.ERATELIMITED
			continue
		}
		a, err := m.ToString()
		if err != nil {
			return nil, fmt.Errorf("queue join %d: %w", i, err)
		}
		pos, score, err := parsePlace(a)
		if err != nil {
			return nil, fmt.Errorf("queue join %d: %w", i, err)
		}
		out[i].Position, out[i].Place = pos, seckill.QueuePlace{UserID: reqs[i].UserID, Score: score, IP: reqs[i].IP}
	}
	return out, nil
}

// parsePlace reads queue_join.lua's "<position> <score>".
func parsePlace(a string) (pos, score int64, err error) {
	ps, ss, _ := strings.Cut(a, " ")
	pos, err = strconv.ParseInt(ps, 10, 64)
	if err == nil {
		score, err = parseScore(ss)
	}
	if err != nil || pos < 1 {
		return 0, 0, fmt.Errorf("malformed place %q", a)
	}
	return pos, score, nil
}

// parseScore reads a sorted set's score that holds an integer (as Redis
// writes a double: "1099511627777", or with an exponent).
func parseScore(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	n, whole := wholeScore(f)
	if err != nil || !whole {
		return 0, fmt.Errorf("score %q is not a whole number", s)
	}
	return n, nil
}

// wholeScore is a place's score as the integer it holds: false when it is
// negative, past what a double holds exactly, or not whole.
func wholeScore(f float64) (int64, bool) {
	if f < 0 || f > 1<<53 || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

// PutPlaces gives buyers their places in the sale's waiting room,
// whatever it held: the database's, which win (waitroom.Book).
func (q *Queue) PutPlaces(ctx context.Context, saleID string, places []seckill.QueuePlace) error {
	for b := 0; b < len(places); b += MaxBatch {
		cmd := q.s.client.B().Zadd().Key(q.key(saleID, "queue")).ScoreMember()
		for _, p := range places[b:min(b+MaxBatch, len(places))] {
			cmd = cmd.ScoreMember(float64(p.Score), p.UserID)
		}
		if err := q.s.client.Do(ctx, cmd.Build()).Error(); err != nil {
			return fmt.Errorf("put places: %w", classify(err))
		}
	}
	return nil
}

// Places returns every place of the sale's waiting room, in order; the
// room does not know the address of each (IP "").
func (q *Queue) Places(ctx context.Context, saleID string) ([]seckill.QueuePlace, error) {
	scores, err := q.s.client.Do(ctx, q.s.client.B().Zrange().Key(q.key(saleID, "queue")).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("places: %w", classify(err))
	}
	out := make([]seckill.QueuePlace, len(scores))
	for i, z := range scores {
		score, whole := wholeScore(z.Score)
		if !whole {
			return nil, fmt.Errorf("places: the score of %q is not a whole number", z.Member)
		}
		out[i] = seckill.QueuePlace{UserID: z.Member, Score: score}
	}
	return out, nil
}

// RestoreRoom rebuilds the sale's waiting room from places, every place it
// has (a heal's, while the sale refuses joins): each place, the places
// each address holds, and the last arrival number (seckill.RoomCounts),
// never below the room's own.
func (q *Queue) RestoreRoom(ctx context.Context, saleID string, places []seckill.QueuePlace) error {
	if err := q.PutPlaces(ctx, saleID, places); err != nil {
		return fmt.Errorf("restore room: %w", err)
	}
	perIP, arrivals := seckill.RoomCounts(places)
	c := q.s.client
	cmds := rueidis.Commands{c.B().Del().Key(q.key(saleID, "queue_ip")).Build()}
	if len(perIP) > 0 {
		set := c.B().Hset().Key(q.key(saleID, "queue_ip")).FieldValue()
		for ip, n := range perIP {
			set = set.FieldValue(ip, strconv.FormatInt(n, 10))
		}
		cmds = append(cmds, set.Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("restore room: %w", classify(err))
		}
	}
	if arrivals > 0 {
		if err := queueSeqRaiseScript.Exec(ctx, c, []string{q.key(saleID, "queue_seq")}, []string{strconv.FormatInt(arrivals, 10)}).Error(); err != nil {
			return fmt.Errorf("restore room: %w", classify(err))
		}
	}
	return nil
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

// AdvancePace moves the adaptive queue sale s's admission on to now (Redis
// TIME) at the rate the last call set, and sets rate from now on. Before
// the start it changes nothing and returns the starting pace; while the
// sale is not loaded or heals it changes nothing and returns ErrHealing.
func (q *Queue) AdvancePace(ctx context.Context, s *seckill.Sale, rate int64) (seckill.QueuePace, error) {
	if rate < 1 || rate > seckill.MaxAdmitPerSecond {
		return seckill.QueuePace{}, seckill.Errorf(seckill.EINVALID, "admission rate %d out of range", rate)
	}
	args := []string{strconv.FormatInt(s.StartAt.UnixMilli(), 10), strconv.FormatInt(s.Admission.AdmitPerSecond, 10), strconv.FormatInt(rate, 10)}
	msg, err := queuePaceScript.Exec(ctx, q.s.client, []string{q.key(s.ID, "queue_pace"), q.s.keys(s.ID)[keyStock]}, args).ToMessage()
	if err != nil {
		return seckill.QueuePace{}, fmt.Errorf("queue pace: %w", classify(err))
	}
	if code, err := msg.AsInt64(); err == nil && code == 7 {
		return seckill.QueuePace{}, ErrHealing
	}
	vals, err := msg.AsStrSlice()
	if err != nil {
		return seckill.QueuePace{}, fmt.Errorf("queue pace: %w", err)
	}
	if len(vals) != 3 {
		return seckill.QueuePace{}, fmt.Errorf("queue pace: %d values from the pace script", len(vals))
	}
	return parsePace(s, vals[0], vals[1], vals[2])
}

// RestorePace puts back the adaptive queue sale's pace as the database
// keeps it, unless the room has one (a heal's, while the pace is not
// moved: AdvancePace refuses a healing sale).
func (q *Queue) RestorePace(ctx context.Context, saleID string, p seckill.QueuePace) error {
	args := []string{strconv.FormatFloat(p.Admitted, 'f', 6, 64), strconv.FormatInt(p.At.UnixMilli(), 10), strconv.FormatInt(p.Rate, 10)}
	if err := queuePaceRestoreScript.Exec(ctx, q.s.client, []string{q.key(saleID, "queue_pace")}, args).Error(); err != nil {
		return fmt.Errorf("restore pace: %w", classify(err))
	}
	return nil
}

// Pace reads the adaptive queue sale s's pace as the nodes last moved it;
// before any node has, the sale's starting rate from its start.
func (q *Queue) Pace(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error) {
	vals, err := q.s.client.Do(ctx, q.s.client.B().Hmget().Key(q.key(s.ID, "queue_pace")).Field("admitted", "at", "rate").Build()).ToArray()
	if err != nil {
		return seckill.QueuePace{}, fmt.Errorf("queue pace: %w", classify(err))
	}
	var str [3]string
	for i, v := range vals {
		if i < 3 {
			str[i], _ = v.ToString()
		}
	}
	if str[0] == "" {
		return seckill.FixedQueuePace(s), nil
	}
	return parsePace(s, str[0], str[1], str[2])
}

func parsePace(s *seckill.Sale, admitted, at, rate string) (seckill.QueuePace, error) {
	a, err1 := strconv.ParseFloat(admitted, 64)
	ms, err2 := strconv.ParseInt(at, 10, 64)
	r, err3 := strconv.ParseInt(rate, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return seckill.QueuePace{}, fmt.Errorf("queue pace: malformed %q %q %q", admitted, at, rate)
	}
	if a == 0 { // before the start
		return seckill.FixedQueuePace(s), nil
	}
	return seckill.QueuePace{Start: s.StartAt, Admitted: a, At: time.UnixMilli(ms), Rate: r}, nil
}
