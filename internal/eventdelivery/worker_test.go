package eventdelivery

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeOutbox hands out its events once and records what the worker says.
type fakeOutbox struct {
	mu        sync.Mutex
	claimable []*seckill.EventDelivery
	delivered []int64
	failed    map[int64]failure
}

type failure struct {
	next time.Time
	dead bool
	err  string
}

func (f *fakeOutbox) Claim(_ context.Context, _ string, _ time.Time, _ time.Duration, limit int) ([]*seckill.EventDelivery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(limit, len(f.claimable))
	out := f.claimable[:n]
	f.claimable = f.claimable[n:]
	return out, nil
}

func (f *fakeOutbox) Delivered(_ context.Context, seqs []int64, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered = append(f.delivered, seqs...)
	return nil
}

func (f *fakeOutbox) Failed(_ context.Context, seq int64, _, lastErr string, next time.Time, dead bool, _ time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		f.failed = map[int64]failure{}
	}
	f.failed[seq] = failure{next, dead, lastErr}
	return true, nil
}

// sinkFunc is a Sink.
type sinkFunc func(ctx context.Context, e seckill.OrderEvent) error

func (s sinkFunc) Deliver(ctx context.Context, e seckill.OrderEvent) error { return s(ctx, e) }

// TestPassRecordsEachOutcome: a delivered event is recorded delivered; a
// failed one gets its next attempt from the policy, or is dead-lettered,
// alerted and counted past the retry window; an empty currency takes the
// configured one; no delivery outlives the lease.
func TestPassRecordsEachOutcome(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	ev := func(seq int64, id string, from time.Time, attempts int) *seckill.EventDelivery {
		return &seckill.EventDelivery{Seq: seq, Attempts: attempts, RetryFrom: from,
			Event: seckill.OrderEvent{ID: id, Type: seckill.EventOrderCreated, At: from}}
	}
	out := &fakeOutbox{claimable: []*seckill.EventDelivery{
		ev(1, "ok", now.Add(-time.Second), 1),
		ev(2, "fails", now.Add(-time.Minute), 3),
		ev(3, "dies", now.Add(-24*time.Hour), 9),
	}}
	var (
		mu        sync.Mutex
		currency  = map[string]string{}
		deadlines []time.Time
	)
	sink := sinkFunc(func(ctx context.Context, e seckill.OrderEvent) error {
		mu.Lock()
		defer mu.Unlock()
		currency[e.ID] = e.Currency
		d, _ := ctx.Deadline()
		deadlines = append(deadlines, d)
		if e.ID == "ok" {
			return nil
		}
		return errors.New("receiver answered 500")
	})
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	policy := Policy{FirstBackoff: time.Second, MaxBackoff: time.Minute, RetryFor: 24 * time.Hour}
	w, err := New(Config{Outbox: out, Sink: sink, Owner: "n1", Policy: policy, Lease: 20 * time.Second, Timeout: 10 * time.Second,
		Currency: "EUR", Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Now: func() time.Time { return now }, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.Pass(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("Pass = %d, %v; want 3", n, err)
	}
	if len(out.delivered) != 1 || out.delivered[0] != 1 {
		t.Errorf("delivered %v, want [1]", out.delivered)
	}
	if f := out.failed[2]; f.dead || !f.next.Equal(now.Add(4*time.Second)) || !strings.Contains(f.err, "500") {
		t.Errorf("event 2 after its third failure: %+v, want next in 4s", f)
	}
	if f := out.failed[3]; !f.dead {
		t.Errorf("event 3 past its window: %+v, want dead", f)
	}
	for id, c := range currency {
		if c != "EUR" {
			t.Errorf("event %s went with currency %q, want the default EUR", id, c)
		}
	}
	for _, d := range deadlines {
		if d.After(now.Add(19 * time.Second)) {
			t.Errorf("a delivery's deadline %v outlives the lease (claimed %v for 20s)", d, now)
		}
	}
	if got := counterValue(t, reg, "seckill_order_event_dead_letters_total"); got != 1 {
		t.Errorf("dead letters counted %v, want 1", got)
	}
	if got := counterValue(t, reg, "seckill_order_event_attempts_total", "failed"); got != 2 {
		t.Errorf("failed attempts %v, want 2", got)
	}
	if !strings.Contains(logs.String(), "ALERT order event dead-lettered") || !strings.Contains(logs.String(), "event=dies") {
		t.Errorf("no ALERT line for the dead letter in:\n%s", logs.String())
	}
	if strings.Count(logs.String(), "ALERT") != 1 {
		t.Errorf("want exactly one ALERT line:\n%s", logs.String())
	}
}

// TestWorkerStopsTwice: Start, then Stop twice, with nothing to deliver.
func TestWorkerStopsTwice(t *testing.T) {
	w, err := New(Config{Outbox: &fakeOutbox{}, Sink: sinkFunc(func(context.Context, seckill.OrderEvent) error { return nil }), Owner: "n1", Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(t.Context())
	w.Wake()
	for range 2 {
		if err := w.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNewRefusesALeaseShorterThanADelivery(t *testing.T) {
	_, err := New(Config{Outbox: &fakeOutbox{}, Sink: sinkFunc(nil), Owner: "n1", Lease: 5 * time.Second, Timeout: 10 * time.Second})
	if err == nil {
		t.Error("a 5s lease with 10s deliveries was accepted")
	}
}

// counterValue is the value of counter name in reg, of the series whose
// label values begin with labels.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i, l := range labels {
				if i >= len(m.GetLabel()) || m.GetLabel()[i].GetValue() != l {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}
