package seckill

import (
	"context"
	"encoding/json"
	"time"
)

// AdmissionMode is how a sale decides who may buy (docs/fairness.md).
type AdmissionMode string

const (
	AdmitFirstCome AdmissionMode = "first_come" // the first requests to land take the stock
	AdmitLottery   AdmissionMode = "lottery"    // entries until EntriesCloseAt, then a draw
	AdmitQueue     AdmissionMode = "queue"      // a waiting room lets buyers in at AdmitPerSecond
)

// MaxAdmitPerSecond bounds a queue sale's admission rate.
const MaxAdmitPerSecond = 1_000_000

// Admission is a sale's admission rule. The zero value is first come.
type Admission struct {
	Mode           AdmissionMode `json:"mode"`
	EntriesCloseAt time.Time     `json:"entries_close_at,omitzero"`  // lottery
	AdmitPerSecond int64         `json:"admit_per_second,omitempty"` // queue; with Adaptive, its starting rate
	// Adaptive, if set, lets a queue's rate follow the engine's own
	// reservation latency (NextAdmitRate).
	Adaptive *AdaptiveAdmission `json:"adaptive,omitempty"`
}

// AdaptiveAdmission bounds a queue's adapted rate. Zero fields take their
// defaults: MinPerSecond 1, MaxPerSecond the sale's admit_per_second,
// TargetLatencyMS DefaultTargetLatency.
type AdaptiveAdmission struct {
	MinPerSecond    int64 `json:"min_per_second,omitempty"`
	MaxPerSecond    int64 `json:"max_per_second,omitempty"`
	TargetLatencyMS int64 `json:"target_latency_ms,omitempty"`
}

// DefaultTargetLatency is the mean reservation latency an adaptive queue
// keeps its admitted buyers under unless the sale says otherwise.
const DefaultTargetLatency = 250 * time.Millisecond

// AdmitBounds are an adaptive queue's bounds with every default applied.
type AdmitBounds struct {
	Min, Max int64
	Target   time.Duration
}

// Bounds returns a's adaptive bounds; ok is false when its rate is fixed.
func (a Admission) Bounds() (b AdmitBounds, ok bool) {
	if a.Of() != AdmitQueue || a.Adaptive == nil {
		return b, false
	}
	b = AdmitBounds{Min: a.Adaptive.MinPerSecond, Max: a.Adaptive.MaxPerSecond, Target: time.Duration(a.Adaptive.TargetLatencyMS) * time.Millisecond}
	if b.Min == 0 {
		b.Min = 1
	}
	if b.Max == 0 {
		b.Max = a.AdmitPerSecond
	}
	if b.Target == 0 {
		b.Target = DefaultTargetLatency
	}
	return b, true
}

// NextAdmitRate is an adaptive queue's rate after one step (AIMD, as TCP
// adapts its window): a mean latency above the target halves the rate, one
// at or under it adds a tenth of the bounds' span (at least 1), within the
// bounds. No observation (nobody admitted claimed) keeps the rate: an idle
// engine says nothing about the load more buyers would bring.
func NextAdmitRate(rate int64, mean time.Duration, observed bool, b AdmitBounds) int64 {
	switch {
	case !observed:
	case mean > b.Target:
		rate /= 2
	default:
		rate += max((b.Max-b.Min+9)/10, 1)
	}
	return min(max(rate, b.Min), b.Max)
}

// Of returns the mode, first come when unset.
func (a Admission) Of() AdmissionMode {
	if a.Mode == "" {
		return AdmitFirstCome
	}
	return a.Mode
}

// FirstCome reports whether the sale is first come, first served.
func (a Admission) FirstCome() bool { return a.Of() == AdmitFirstCome }

// validate checks a against the sale s it belongs to.
func (a Admission) validate(s *Sale) error {
	switch a.Of() {
	case AdmitFirstCome:
		if !a.EntriesCloseAt.IsZero() || a.AdmitPerSecond != 0 || a.Adaptive != nil {
			return Errorf(EINVALID, "admission: first_come takes no entries_close_at, admit_per_second or adaptive")
		}
		return nil
	case AdmitLottery:
		switch {
		case a.AdmitPerSecond != 0 || a.Adaptive != nil:
			return Errorf(EINVALID, "admission: a lottery takes no admit_per_second or adaptive")
		case a.EntriesCloseAt.IsZero():
			return Errorf(EINVALID, "admission: a lottery needs entries_close_at (RFC 3339)")
		case !a.EntriesCloseAt.After(s.StartAt) || !a.EntriesCloseAt.Before(s.EndAt):
			return Errorf(EINVALID, "admission: entries_close_at must be after start_at and before end_at")
		}
	case AdmitQueue:
		switch {
		case !a.EntriesCloseAt.IsZero():
			return Errorf(EINVALID, "admission: a queue takes no entries_close_at")
		case a.AdmitPerSecond < 1 || a.AdmitPerSecond > MaxAdmitPerSecond:
			return Errorf(EINVALID, "admission: admit_per_second must be between 1 and %d", MaxAdmitPerSecond)
		}
		if b, ok := a.Bounds(); ok {
			switch {
			case b.Min < 1 || b.Max > MaxAdmitPerSecond || b.Min > a.AdmitPerSecond || a.AdmitPerSecond > b.Max:
				return Errorf(EINVALID, "admission: adaptive needs 1 <= min_per_second <= admit_per_second <= max_per_second <= %d", MaxAdmitPerSecond)
			case b.Target < time.Millisecond || b.Target > time.Minute:
				return Errorf(EINVALID, "admission: adaptive target_latency_ms must be between 1 and 60000")
			}
		}
	default:
		return Errorf(EINVALID, "admission: mode must be first_come, lottery or queue")
	}
	if s.Buckets > 1 {
		return Errorf(EINVALID, "admission: a %s sale keeps its stock in one bucket", a.Mode)
	}
	return nil
}

// MarshalJSON shows the zero Admission as {"mode":"first_come"}.
func (a Admission) MarshalJSON() ([]byte, error) {
	type plain Admission
	p := plain(a)
	p.Mode = a.Of()
	return json.Marshal(p)
}

// UnmarshalJSON reads {"mode":"first_come"} as the zero Admission.
func (a *Admission) UnmarshalJSON(b []byte) error {
	type plain Admission
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = Admission(p)
	if *a == (Admission{Mode: AdmitFirstCome}) {
		*a = Admission{}
	}
	return nil
}

// --- Lottery entry window ---

// EntryWindow decides whether a lottery entry made at now is accepted:
// nil, or ENOTSTARTED before the start, EENDED once entries closed.
func EntryWindow(s *Sale, now time.Time) error {
	switch {
	case s.Admission.Of() != AdmitLottery:
		return Errorf(EADMISSION, "this sale is %s: it takes no entries", s.Admission.Of())
	case now.Before(s.StartAt):
		return Errorf(ENOTSTARTED, "entries open at %s", s.StartAt.UTC().Format(time.RFC3339))
	case !now.Before(s.Admission.EntriesCloseAt):
		return Errorf(EENDED, "entries closed at %s", s.Admission.EntriesCloseAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// EntryKnownUntil is how long a node may answer a repeated entry into
// lottery s from memory: an entry never changes, and EntryWindow refuses
// every entry after close.
func EntryKnownUntil(s *Sale) time.Time { return s.Admission.EntriesCloseAt }

// DrawDue reports whether a lottery sale's draw should run at now.
func DrawDue(s *Sale, now time.Time) bool {
	return s.Admission.Of() == AdmitLottery && !now.Before(s.Admission.EntriesCloseAt)
}

// DrawWaiting is how long a lottery sale's draw has been due at now
// without finishing: 0 before entries close, and once drawn.
func DrawWaiting(s *Sale, drawn bool, now time.Time) time.Duration {
	if drawn || !DrawDue(s, now) {
		return 0
	}
	return now.Sub(s.Admission.EntriesCloseAt)
}

// --- Queue decisions ---

// DefaultQueueOpensBefore is how long before the start a queue sale's
// waiting room opens.
const DefaultQueueOpensBefore = 15 * time.Minute

// QueueWindow decides whether a buyer may join the waiting room at now: it
// opens opensBefore the start and closes when the sale ends.
func QueueWindow(s *Sale, now time.Time, opensBefore time.Duration) error {
	switch {
	case s.Admission.Of() != AdmitQueue:
		return Errorf(EADMISSION, "this sale is %s: it has no queue", s.Admission.Of())
	case now.Before(s.StartAt.Add(-opensBefore)):
		return Errorf(ENOTSTARTED, "the queue opens at %s", s.StartAt.Add(-opensBefore).UTC().Format(time.RFC3339))
	case !now.Before(s.EndAt):
		return Errorf(EENDED, "the sale has ended")
	}
	return nil
}

// PreheatLead is how long before its start sale s is loaded into the
// stock store, given the preheat lead and how long before the start a
// queue sale's room opens: a queue sale is loaded by the time its room
// opens, since a join needs it loaded (its places are put back from the
// database only into a loaded sale).
func PreheatLead(s *Sale, lead, queueOpensBefore time.Duration) time.Duration {
	if s.Admission.Of() == AdmitQueue {
		return max(lead, queueOpensBefore)
	}
	return lead
}

// QueueSettleMargin covers the node's and the stock store's clocks
// disagreeing about a queue sale's start.
const QueueSettleMargin = 5 * time.Second

// QueuePlaceSettled reports whether a place in queue sale s, read at now,
// is final: after the start newcomers queue behind and nobody leaves.
func QueuePlaceSettled(s *Sale, now time.Time, margin time.Duration) bool {
	return s.Admission.Of() == AdmitQueue && !now.Before(s.StartAt.Add(margin))
}

// QueueAdmitted is how many positions are admitted by now: the first at the
// start, then rate a second.
func QueueAdmitted(start, now time.Time, rate int64) int64 {
	if now.Before(start) || rate < 1 {
		return 0
	}
	d := now.Sub(start)
	return d.Nanoseconds()/int64(time.Second)*rate + (d.Nanoseconds()%int64(time.Second))*rate/int64(time.Second) + 1
}

// QueueStanding is what a buyer in the waiting room is told.
type QueueStanding struct {
	Position   int64 // 1-based
	Ahead      int64 // positions in front not yet admitted
	ETASeconds int64 // until admission; 0 once admitted
	Admitted   bool
}

// QueueStandingAt decides where position stands at now, admission
// running at rate from start.
func QueueStandingAt(position int64, start, now time.Time, rate int64) QueueStanding {
	return QueuePace{Start: start, Rate: rate}.StandingAt(position, now)
}

// QueuePace is how far a queue sale's admission has got. A fixed rate
// runs from the start (At zero); an adapted one moves on from Admitted
// positions at At, at Rate a second since.
type QueuePace struct {
	Start    time.Time // position 1 is admitted at this instant
	Admitted float64   // positions admitted by At (adapted pace only)
	At       time.Time // zero: Rate has held since Start
	Rate     int64     // positions a second
}

// FixedQueuePace is the pace of s at its admit_per_second.
func FixedQueuePace(s *Sale) QueuePace {
	return QueuePace{Start: s.StartAt, Rate: s.Admission.AdmitPerSecond}
}

// AdmittedAt is the number of positions (1-based, in order) admitted by
// now: none before the start.
func (p QueuePace) AdmittedAt(now time.Time) int64 {
	switch {
	case now.Before(p.Start):
		return 0
	case p.At.IsZero():
		return QueueAdmitted(p.Start, now, p.Rate)
	case now.Before(p.At): // another node's clock ran ahead: hold
		return int64(p.Admitted)
	}
	return int64(p.Admitted + float64(p.Rate)*now.Sub(p.At).Seconds())
}

// StandingAt decides where position stands at now.
func (p QueuePace) StandingAt(position int64, now time.Time) QueueStanding {
	n := p.AdmittedAt(now)
	st := QueueStanding{Position: position, Admitted: position <= n}
	if st.Admitted {
		return st
	}
	st.Ahead = position - 1 - n
	if p.Rate > 0 {
		wait := time.Duration(position-n) * time.Second / time.Duration(p.Rate)
		if now.Before(p.Start) {
			wait += p.Start.Sub(now)
		}
		st.ETASeconds = int64((wait + time.Second - 1) / time.Second)
	}
	return st
}

// QueueScoreBase: early joiners get random scores below it (random order),
// later ones QueueScoreBase plus their arrival number, behind them.
const QueueScoreBase = 1 << 40

// QueueJoin is one buyer's request for a place in the waiting room.
type QueueJoin struct {
	UserID string
	IP     string // "" when unknown: no per-address cap
	// RateChecks are decided in the join's own stock-store call, as a
	// claim's are (ReserveRequest.RateChecks): refused by one, the join
	// gets no place and counts against none.
	RateChecks []RateCheck
}

// QueueJoinResult answers a QueueJoin.
type QueueJoinResult struct {
	Refused  string     // ERATELIMITED: the address holds its most places; ETRYLATER: the sale is not loaded or heals
	Position int64      // 1-based, as of the join
	Place    QueuePlace // the place given, or the buyer's earlier one
	// RateLimited: one of the RateChecks refused the join, the one at
	// RateLimitedBy, for RetryAfter.
	RateLimited   bool
	RateLimitedBy int
	RetryAfter    time.Duration
}

// Queuer gives places in waiting rooms (internal/combiner, internal/repeats in front).
type Queuer interface {
	Join(ctx context.Context, s *Sale, perIP int64, req QueueJoin) (QueueJoinResult, error)
}
