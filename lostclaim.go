package seckill

import "time"

// ClaimFacts is what is known, at one moment, of a claim that neither the
// database nor the stock store has: whether something still in flight
// could carry its event to the database. They are read in this order,
// each after the one before: the outbox, the broker, then the database
// once more (RecordFailedOrder refuses a claim that landed meanwhile).
type ClaimFacts struct {
	// Age is how long ago the claim's id was issued.
	Age time.Duration
	// OutboxEmpty says the sale's outbox holds nothing; otherwise
	// OutboxOldest is the age of its oldest entry.
	OutboxEmpty  bool
	OutboxOldest time.Duration
	// Backlog is the events the broker holds unsettled (published, not
	// yet written or refused by the order writer, retries included); -1
	// when it could not tell.
	Backlog int64
}

// ClaimPolicy bounds the judgement of JudgeClaim.
type ClaimPolicy struct {
	// MinAge is how long after its id was issued a claim is never judged
	// lost: its reserve call may still be running (the request budget),
	// and the clocks of the nodes and Redis may differ a little.
	MinAge time.Duration
	// MaxAge is how long after its id was issued a claim is lost whatever
	// else is known: a broker that cannot tell its backlog, or a backlog
	// that never drains, holds no claim longer.
	MaxAge time.Duration
}

// ClaimVerdict is JudgeClaim's answer.
type ClaimVerdict int

const (
	// ClaimMayLand: its event may still reach the database; it stays
	// pending.
	ClaimMayLand ClaimVerdict = iota
	// ClaimLost: nothing that could carry its event is left; it becomes a
	// failed order (ReasonLostInStockStore).
	ClaimLost
)

func (v ClaimVerdict) String() string {
	if v == ClaimLost {
		return "lost"
	}
	return "may land"
}

// JudgeClaim decides whether a claim no store has can still land. Its
// event, if the stock store ever wrote it, went into the sale's outbox
// within MinAge of the id being issued, and leaves the outbox only once
// the broker holds it (or the writer committed it): so when no outbox
// entry is that old and the broker holds nothing unsettled, it can no
// longer land.
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
