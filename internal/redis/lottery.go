package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

var (
	enterLua = lua("sale_ready.lua", "ratelimits.lua", "lottery_enter.lua")
	// Without rate checks an entry is idempotent per buyer (a second
	// entry gets the first back), so a lost reply may be retried.
	enterScript = rueidis.NewLuaScriptRetryable(enterLua)
	// With rate checks it is not retried: that would count them twice.
	enterLimitedScript = rueidis.NewLuaScript(enterLua)
)

// Lottery keeps a lottery sale's entries and results in the sale's hash
// slot: <prefix>:{sale}:entries (user -> "<entry id> <qty>"),
// <prefix>:{sale}:lottery ({closed}) and <prefix>:{sale}:won (user ->
// reservation id). The draw itself reserves through StockStore.ReserveAdmitted.
type Lottery struct{ s *conn }

// Lottery returns the store's lottery keeper.
func (s *Store) Lottery() *Lottery { return &Lottery{s: s.conn} }

func (l *Lottery) key(saleID, what string) string {
	return l.s.prefix + ":{" + saleID + "}:" + what
}

// lotteryKeys name every key of a lottery, in archive.lua's order:
// archiving a sale drops them once the database holds a copy of the
// entries and who won.
var lotteryKeys = []string{"entries", "won", "lottery"}

// EnterBatch records reqs, all of sale s, in one script call: results[i]
// answers reqs[i].
func (l *Lottery) EnterBatch(ctx context.Context, s *seckill.Sale, reqs []seckill.EntryRequest) ([]seckill.EntryResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if len(reqs) > MaxBatch {
		return nil, seckill.Errorf(seckill.EINVALID, "batch of %d entries is over the limit of %d", len(reqs), MaxBatch)
	}
	first := reqs[0].RateChecks
	per := len(first)
	keys := make([]string, 3, 3+per)
	keys[0], keys[1], keys[2] = l.key(s.ID, "entries"), l.key(s.ID, "lottery"), l.s.keys(s.ID)[keyStock]
	for _, c := range first {
		keys = append(keys, l.s.saleRateBase(s.ID, c.Limit))
	}
	args := make([]string, 0, 3+(3+per)*len(reqs))
	args = append(args, strconv.FormatInt(s.StartAt.UnixMilli(), 10), strconv.FormatInt(s.Admission.EntriesCloseAt.UnixMilli(), 10), strconv.Itoa(per))
	for i, r := range reqs {
		if !seckill.ValidEntryID(r.EntryID) || !seckill.ValidUserID(r.UserID) || r.Qty < 1 || r.Qty > seckill.MaxPurchaseLimit {
			return nil, seckill.Errorf(seckill.EINVALID, "entry %d: invalid entry id, user id or qty", i)
		}
		if err := rateShape(i, r.RateChecks, first); err != nil {
			return nil, fmt.Errorf("enter: %w", err)
		}
		args = append(args, r.EntryID, r.UserID, strconv.FormatInt(r.Qty, 10))
		for _, c := range r.RateChecks {
			args = append(args, c.Key)
		}
	}
	script := enterScript
	if per > 0 {
		script = enterLimitedScript
	}
	msg, err := script.Exec(ctx, l.s.client, keys, args).ToMessage()
	if err != nil {
		return nil, fmt.Errorf("enter: %w", classify(err))
	}
	results := make([]seckill.EntryResult, len(reqs))
	if code, err := msg.AsInt64(); err == nil {
		refused := seckill.EENDED
		switch code {
		case 5:
			refused = seckill.ENOTSTARTED
		case 7:
			refused = seckill.ETRYLATER
		}
		for i := range results {
			results[i].Refused = refused
		}
		return results, nil
	}
	answers, err := msg.ToArray()
	if err != nil || len(answers) != len(reqs) {
		return nil, fmt.Errorf("enter: unexpected answer from the entry script (%d of %d): %v", len(answers), len(reqs), err)
	}
	for i, m := range answers {
		if m.IsArray() {
			by, retry, err := rateRefusal(m, per)
			if err != nil {
				return nil, fmt.Errorf("enter: entry %d: %w", i, err)
			}
			results[i] = seckill.EntryResult{Refused: seckill.ERATELIMITED, RateLimitedBy: by, RetryAfter: retry}
			continue
		}
		a, err := m.ToString()
		if err != nil {
			return nil, fmt.Errorf("enter: entry %d: %w", i, err)
		}
		isNew, rest, _ := strings.Cut(a, " ")
		e, err := parseEntry(reqs[i].UserID, rest)
		if err != nil {
			return nil, fmt.Errorf("enter: %w", err)
		}
		results[i] = seckill.EntryResult{Entry: e, New: isNew == "1"}
	}
	return results, nil
}

// parseEntry reads "<entry id> <qty>".
func parseEntry(userID, v string) (seckill.LotteryEntry, error) {
	id, qtys, _ := strings.Cut(v, " ")
	qty, err := strconv.ParseInt(qtys, 10, 64)
	if err != nil || !seckill.ValidEntryID(id) {
		return seckill.LotteryEntry{}, fmt.Errorf("malformed entry %q", v)
	}
	return seckill.LotteryEntry{ID: id, UserID: userID, Qty: qty}, nil
}

// Entry returns userID's entry in the sale; ok is false when they have
// none.
func (l *Lottery) Entry(ctx context.Context, saleID, userID string) (e seckill.LotteryEntry, ok bool, err error) {
	v, err := l.s.client.Do(ctx, l.s.client.B().Hget().Key(l.key(saleID, "entries")).Field(userID).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return e, false, nil
	} else if err != nil {
		return e, false, fmt.Errorf("entry: %w", classify(err))
	}
	e, err = parseEntry(userID, v)
	return e, err == nil, err
}

// PutEntries sets the entries of their buyers in the sale, whatever the
// store held: the database's, which win (lottery.Book).
func (l *Lottery) PutEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry) error {
	for b := 0; b < len(entries); b += MaxBatch {
		cmd := l.s.client.B().Hset().Key(l.key(saleID, "entries")).FieldValue()
		for _, e := range entries[b:min(b+MaxBatch, len(entries))] {
			cmd = cmd.FieldValue(e.UserID, e.ID+" "+strconv.FormatInt(e.Qty, 10))
		}
		if err := l.s.client.Do(ctx, cmd.Build()).Error(); err != nil {
			return fmt.Errorf("put entries: %w", classify(err))
		}
	}
	return nil
}

// CloseEntries refuses every later entry of the sale, whatever the clocks
// say: the draw calls it before it reads the entries.
func (l *Lottery) CloseEntries(ctx context.Context, saleID string) error {
	err := l.s.client.Do(ctx, l.s.client.B().Hset().Key(l.key(saleID, "lottery")).FieldValue().FieldValue("closed", "1").Build()).Error()
	if err != nil {
		return fmt.Errorf("close entries: %w", classify(err))
	}
	return nil
}

// Entries returns every entry of the sale, in no order.
func (l *Lottery) Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error) {
	m, err := l.s.client.Do(ctx, l.s.client.B().Hgetall().Key(l.key(saleID, "entries")).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("entries: %w", classify(err))
	}
	out := make([]seckill.LotteryEntry, 0, len(m))
	for user, v := range m {
		e, err := parseEntry(user, v)
		if err != nil {
			return nil, fmt.Errorf("entries: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// EntrantCount returns how many buyers have entered the sale: one read,
// whatever the number of entries (the control room reads it every sample).
func (l *Lottery) EntrantCount(ctx context.Context, saleID string) (int64, error) {
	n, err := l.s.client.Do(ctx, l.s.client.B().Hlen().Key(l.key(saleID, "entries")).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("entrant count: %w", classify(err))
	}
	return n, nil
}

// EntryCounts returns how many entries the sale holds and how many of
// their buyers the draw gave a reservation: two HLENs in one round trip,
// so the archiver can tell whether the database's copy is short without
// reading the entries.
func (l *Lottery) EntryCounts(ctx context.Context, saleID string) (entries, winners int64, err error) {
	c := l.s.client
	replies := c.DoMulti(ctx, c.B().Hlen().Key(l.key(saleID, "entries")).Build(), c.B().Hlen().Key(l.key(saleID, "won")).Build())
	if entries, err = replies[0].AsInt64(); err == nil {
		winners, err = replies[1].AsInt64()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("entry counts: %w", classify(err))
	}
	return entries, winners, nil
}

// RecordWon records that the draw gave each user (key) a reservation
// (value).
func (l *Lottery) RecordWon(ctx context.Context, saleID string, won map[string]string) error {
	if len(won) == 0 {
		return nil
	}
	cmd := l.s.client.B().Hset().Key(l.key(saleID, "won")).FieldValue()
	for u, id := range won {
		cmd = cmd.FieldValue(u, id)
	}
	if err := l.s.client.Do(ctx, cmd.Build()).Error(); err != nil {
		return fmt.Errorf("record won: %w", classify(err))
	}
	return nil
}

// Won returns the reservation the draw gave userID, if it gave one.
func (l *Lottery) Won(ctx context.Context, saleID, userID string) (reservationID string, ok bool, err error) {
	v, err := l.s.client.Do(ctx, l.s.client.B().Hget().Key(l.key(saleID, "won")).Field(userID).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("won: %w", classify(err))
	}
	return v, true, nil
}

// AllWon returns every user the draw gave a reservation, with it.
func (l *Lottery) AllWon(ctx context.Context, saleID string) (map[string]string, error) {
	m, err := l.s.client.Do(ctx, l.s.client.B().Hgetall().Key(l.key(saleID, "won")).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("won: %w", classify(err))
	}
	return m, nil
}
