package brokerpack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// copyOf is what the test adapter stores: which kind of copy, of what.
type copyOf struct {
	kind string // "owner", "retry", "dead"
	ids  []string
	due  time.Duration
}

func testRound(putBackFirst *[]string) Round[string, copyOf] {
	r := Round[string, copyOf]{
		Namespace: "ours", Policy: RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Minute},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Adapter: "test", Where: "queue", WhereName: "q",
		PutBackForOwner: func(t Taken[string]) copyOf { return copyOf{kind: "owner", ids: []string{t.ID}} },
		Retry: func(delay time.Duration, _ time.Time, run []PackedMessage) copyOf {
			c := copyOf{kind: "retry", due: delay}
			for _, m := range run {
				c.ids = append(c.ids, m.ID)
			}
			return c
		},
		Dead: func(dl seckill.DeadLetter) copyOf { return copyOf{kind: "dead", ids: []string{dl.Message.ID}} },
	}
	if putBackFirst != nil {
		r.PutBackFirst = func(copies []copyOf, raws []string) { *putBackFirst = append(*putBackFirst, raws...) }
	}
	return r
}

func pack(ns string, attempt int, ids ...string) Taken[string] {
	msgs := make([]seckill.Message, len(ids))
	for i, id := range ids {
		msgs[i] = seckill.Message{ID: id, Body: []byte(id)}
	}
	return Taken[string]{Raw: "raw-" + ids[0], ID: "p-" + ids[0], Body: EncodePack(ns, Packed(msgs, attempt))}
}

// TestWorkSettlesEachPackByItsEvents: a pack whose events were all acked
// is acked; one with a failed event is moved (its retry copy stored
// first), one whose event had its last attempt is moved with a dead
// letter, and another namespace's pack is moved with a copy for its owner,
// never handed to the handler.
func TestWorkSettlesEachPackByItsEvents(t *testing.T) {
	taken := []Taken[string]{pack("ours", 1, "a1", "a2"), pack("ours", 1, "b1", "b2"), pack("ours", 3, "c1"), pack("theirs", 1, "d1")}
	var handed []string
	handle := func(_ context.Context, ds []seckill.Delivery) {
		for _, d := range ds {
			handed = append(handed, d.Message().ID)
			if d.Message().ID == "a1" || d.Message().ID == "a2" || d.Message().ID == "b1" {
				d.Ack()
			} else {
				d.Retry(errors.New("boom"))
			}
		}
	}
	var foreign []string
	s, ok := Work(context.Background(), taken, seckill.ConsumeOptions{BatchSize: 2}, handle, testRound(nil))
	if !ok || !slices.Equal(handed, []string{"a1", "a2", "b1", "b2", "c1"}) {
		t.Fatalf("ok %v, handed %v; want every event of our namespace", ok, handed)
	}
	if !slices.Equal(s.Acks, []string{"raw-a1"}) || !slices.Equal(s.Moved, []string{"raw-b1", "raw-c1", "raw-d1"}) {
		t.Errorf("acks %v, moved %v", s.Acks, s.Moved)
	}
	want := []copyOf{{kind: "owner", ids: []string{"p-d1"}}, {kind: "retry", ids: []string{"b2"}, due: time.Second}, {kind: "dead", ids: []string{"c1"}}}
	if !slices.EqualFunc(s.Copies, want, func(a, b copyOf) bool { return a.kind == b.kind && slices.Equal(a.ids, b.ids) && a.due == b.due }) {
		t.Errorf("copies %+v, want %+v", s.Copies, want)
	}

	// PutBackFirst: the foreign pack is settled before the handler, and is
	// not the round's to move.
	s, _ = Work(context.Background(), taken[3:], seckill.ConsumeOptions{}, handle, testRound(&foreign))
	if !slices.Equal(foreign, []string{"raw-d1"}) || len(s.Moved) != 0 || len(s.Copies) != 0 {
		t.Errorf("put back first: %v; round moved %v, copies %v", foreign, s.Moved, s.Copies)
	}
}

// TestWorkAbandonsOnCancel: a handler stopped by its context without
// settling abandons the pack to the broker's redelivery; Around's false
// leaves the whole round to the broker.
func TestWorkAbandonsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, ok := Work(ctx, []Taken[string]{pack("ours", 1, "a1")}, seckill.ConsumeOptions{}, func(context.Context, []seckill.Delivery) { cancel() }, testRound(nil))
	if !ok || len(s.Acks)+len(s.Moved)+len(s.Copies) != 0 {
		t.Errorf("cancelled unsettled: ok %v, %+v; want nothing settled", ok, s)
	}
	r := testRound(nil)
	r.Around = func(_ []string, n int, hand func()) bool { hand(); return n != 1 }
	ack := func(_ context.Context, ds []seckill.Delivery) {
		for _, d := range ds {
			d.Ack()
		}
	}
	if _, ok := Work(context.Background(), []Taken[string]{pack("ours", 1, "a1")}, seckill.ConsumeOptions{}, ack, r); ok {
		t.Error("Around said the round was lost, Work said ok")
	}
}
