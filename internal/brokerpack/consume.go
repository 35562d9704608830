package brokerpack

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill-dev/seckill"
)

// Taken is one broker message a consumer took, as its adapter reads it.
type Taken[M any] struct {
	Raw  M
	ID   string // the broker message's id (a pack's PackID)
	Body []byte
	// Crashes is how many earlier deliveries of it were lost without a
	// decision; they count against every event's attempts.
	Crashes int
}

// Round is one adapter's side of the consumer algorithm both adapters
// share (Work): how it builds the copies a verdict needs (M is the
// adapter's received message, O its outgoing one) and what it does around
// the handler.
type Round[M, O any] struct {
	Namespace string
	Policy    RetryPolicy
	// Logger, Adapter, Where and WhereName name the consumer in the
	// warning about another deployment's message: "nats", "stream", the
	// stream's name.
	Logger                    *slog.Logger
	Adapter, Where, WhereName string
	// PutBackForOwner is the copy that puts another namespace's message
	// back for its owner; Retry the pack that retries run after delay
	// (due: the instant the round was judged, plus delay); Dead the dead
	// letter.
	PutBackForOwner func(t Taken[M]) O
	Retry           func(delay time.Duration, due time.Time, run []PackedMessage) O
	Dead            func(seckill.DeadLetter) O
	// PutBackFirst, if set, stores the copies of other namespaces'
	// messages and settles their originals before the handler runs;
	// otherwise they go out with the round's other copies.
	PutBackFirst func(copies []O, raws []M)
	// Around, if set, runs hand (the handler over the round's n
	// deliveries, taken from mine) and reports whether the round is still
	// the consumer's to settle (false: the broker took it back, as when
	// the channel closed).
	Around func(mine []M, n int, hand func()) bool
}

// Settlement of a round: Acks are settled by an ack alone; Moved are
// acked once Copies (retry packs, dead letters, put-back copies) are
// stored. Abandoned messages are in neither: the broker redelivers them.
type Settled[M, O any] struct {
	Acks, Moved []M
	Copies      []O
}

type unpacked[M any] struct {
	raw     M
	all     []*PackDelivery
	foreign bool
}

// Work runs one round of a consumer: it unpacks taken, leaves another
// namespace's messages for their owner, hands this namespace's events to
// handle in batches of opts.BatchSize, judges each message under the
// policy and returns what to store and ack. ok is false when the round is
// no longer the consumer's to settle (Around said so).
func Work[M, O any](ctx context.Context, taken []Taken[M], opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery), r Round[M, O]) (s Settled[M, O], ok bool) {
	got := make([]unpacked[M], 0, len(taken))
	var handOut []seckill.Delivery
	var foreignCopies []O
	var foreignRaws, mine []M
	for _, t := range taken {
		p, all, hand := Unpack(t.ID, t.Body, t.Crashes, r.Policy)
		if p.Namespace != "" && p.Namespace != r.Namespace {
			r.Logger.Warn(r.Adapter+": message of another deployment's namespace left for its owner; two deployments share this "+r.Where,
				r.Where, r.WhereName, "namespace", p.Namespace, "ours", r.Namespace, "events", len(p.Events))
			if opts.OnForeign != nil {
				opts.OnForeign(p.Namespace, len(p.Events))
			}
			foreignCopies = append(foreignCopies, r.PutBackForOwner(t))
			foreignRaws = append(foreignRaws, t.Raw)
			if r.PutBackFirst == nil {
				got = append(got, unpacked[M]{raw: t.Raw, foreign: true})
			}
			continue
		}
		got = append(got, unpacked[M]{raw: t.Raw, all: all})
		mine = append(mine, t.Raw)
		handOut = append(handOut, hand...)
	}
	if r.PutBackFirst != nil && len(foreignCopies) > 0 {
		r.PutBackFirst(foreignCopies, foreignRaws)
	} else {
		s.Copies = foreignCopies
	}
	hand := func() { HandOut(ctx, handOut, opts.BatchSize, handle) }
	if r.Around == nil {
		hand()
	} else if !r.Around(mine, len(handOut), hand) {
		return s, false
	}
	live := ctx.Err() == nil
	judged := time.Now()
	for _, g := range got {
		if g.foreign {
			s.Moved = append(s.Moved, g.raw)
			continue
		}
		v := Judge(g.all, r.Policy, live)
		if v.Abandon {
			continue // redelivered by the broker, like a crash
		}
		if len(v.Retry) == 0 && len(v.Dead) == 0 {
			s.Acks = append(s.Acks, g.raw)
			continue
		}
		s.Moved = append(s.Moved, g.raw)
		for delay, run := range v.Retry {
			for _, part := range SplitPacks(run) {
				s.Copies = append(s.Copies, r.Retry(delay, judged.Add(delay), part))
			}
		}
		for _, dl := range v.Dead {
			s.Copies = append(s.Copies, r.Dead(dl))
		}
	}
	return s, true
}
