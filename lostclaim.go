package seckill

import "time"

// ClaimFacts is what is known of a claim neither store has, read in order:
// the outbox, the broker, then the database again (RecordFailedOrder
// refuses a claim that landed meanwhile).
type ClaimFacts struct {
	Age          time.Duration // since its id was issued
	OutboxEmpty  bool
	OutboxOldest time.Duration // the oldest entry's age, unless empty
	Backlog      int64         // events the broker holds unsettled; -1 unknown
}

// ClaimPolicy bounds the judgement of JudgeClaim.
type ClaimPolicy struct {
	// MinAge: younger, its reserve call may still run (and clocks differ).
	MinAge time.Duration
	// MaxAge: older, it is lost whatever the broker says.
	MaxAge time.Duration
}

// ClaimVerdict is JudgeClaim's answer.
type ClaimVerdict int

const (
	ClaimMayLand ClaimVerdict = iota // it stays pending
	ClaimLost                        // a failed order (ReasonLostInStockStore)
)

func (v ClaimVerdict) String() string {
	if v == ClaimLost {
		return "lost"
	}
	return "may land"
}

// JudgeClaim decides whether a claim no store has can still land. Its event
// entered the outbox within MinAge of its id and leaves it only for the
// broker, so with no outbox entry that old and no backlog, it cannot.
func JudgeClaim(f ClaimFacts, p ClaimPolicy) ClaimVerdict {
	switch {
	case f.Age >= p.MaxAge:
		return ClaimLost
	case f.Age < p.MinAge:
		return ClaimMayLand
	case !f.OutboxEmpty && f.OutboxOldest+p.MinAge >= f.Age:
		return ClaimMayLand // an entry old enough to be its entry waits
	case f.Backlog != 0:
		return ClaimMayLand // unknown, or events in the broker
	}
	return ClaimLost
}
