package seckill

import "time"

// Before its start a sale's claims are refused "not started" by the stock
// store, which decides the start instant on its own clock so that every
// node agrees. A crowd pressing "buy" early would cost it a call per batch
// for an answer known in advance; so once the stock store has said "not
// started" to a node, the node answers it from memory while StillEarly
// holds, as it answers a sold-out sale (design §7).
const (
	// EarlyMargin is how long before the start a node stops answering
	// from memory: more than any skew between its clock and the stock
	// store's, so that no claim the store would take is refused.
	EarlyMargin = time.Second
	// EarlyLapse is how long a node trusts what it learned: a start moved
	// earlier on another node is seen at most this late, as the sale
	// cache's TTL sees it.
	EarlyLapse = time.Second
)

// StillEarly reports whether a claim at now on a sale starting at startAt
// is answered "not started" from what the stock store said at learnedAt.
func StillEarly(now, startAt, learnedAt time.Time) bool {
	return now.Before(startAt.Add(-EarlyMargin)) && now.Before(learnedAt.Add(EarlyLapse)) && !now.Before(learnedAt)
}
