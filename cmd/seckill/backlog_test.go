package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

type fakeBacklog struct {
	mu    sync.Mutex
	n     int64
	err   error
	calls int
}

func (f *fakeBacklog) Backlog(context.Context) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.n, f.err
}

// TestBacklogSampler: the gauge shows the last sample while it is fresh,
// and disappears rather than lie once the broker stops answering.
func TestBacklogSampler(t *testing.T) {
	var (
		mu  sync.Mutex
		now = time.Unix(1_700_000_000, 0)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	b := &fakeBacklog{n: 7}
	s := newBacklogSampler(b, time.Hour, slog.New(slog.DiscardHandler), clock)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)

	if got, ok := gauge(t, reg); ok {
		t.Fatalf("before any sample: gauge %v; want none", got)
	}
	s.sample(context.Background())
	if got, ok := gauge(t, reg); !ok || got != 7 {
		t.Errorf("gauge %v (exported %v), want 7", got, ok)
	}
	if v, ok := s.last(); !ok || v != 7 {
		t.Errorf("last() = %d, %v; want 7, true", v, ok)
	}

	b.mu.Lock()
	b.err = errors.New("broker down")
	b.mu.Unlock()
	s.sample(context.Background())
	if v, ok := s.last(); !ok || v != 7 {
		t.Errorf("one failed sample: last() = %d, %v; want the previous 7 while fresh", v, ok)
	}
	advance(3*time.Hour + time.Second)
	if got, ok := gauge(t, reg); ok {
		t.Errorf("after three intervals without an answer: gauge %v; want none", got)
	}

	// Start samples at once; Stop twice is fine.
	s2 := newBacklogSampler(&fakeBacklog{n: 2}, time.Hour, slog.New(slog.DiscardHandler), time.Now)
	s2.Start(context.Background())
	servicetest.WaitFor(t, 10*time.Second, "the first sample", func() bool { _, ok := s2.last(); return ok })
	for range 2 {
		if err := s2.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// gauge is the value of seckill_broker_backlog_messages in reg, if any.
func gauge(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "seckill_broker_backlog_messages" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// heldWriter keeps the order writer from consuming until released, so
// messages wait in the broker.
type heldWriter struct {
	seckill.Broker
	open chan struct{}
	once sync.Once
}

func (h *heldWriter) Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery)) error {
	select {
	case <-h.open:
	case <-ctx.Done():
		return nil
	}
	return h.Broker.Consume(ctx, opts, handle)
}

func (h *heldWriter) release() { h.once.Do(func() { close(h.open) }) }

// wrapRole is a hook that has wrap wrap the broker of role ("relay" or
// "writer") and leaves the other role's as it is.
func wrapRole(role string, wrap func(seckill.Broker) seckill.Broker) func(*Main) {
	return func(m *Main) {
		m.wrapBroker = func(r string, b seckill.Broker) seckill.Broker {
			if r != role {
				return b
			}
			return wrap(b)
		}
	}
}

// backlogGauge reads seckill_broker_backlog_messages from /metrics; false
// while it is not exported.
func (e *engine) backlogGauge() (float64, bool) {
	e.t.Helper()
	resp, err := e.client.Get(e.base + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "seckill_broker_backlog_messages "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestBrokerBacklogMetric: on RabbitMQ and on NATS, claims the writer has
// not consumed yet show in seckill_broker_backlog_messages, and the gauge
// falls back to 0 once the writer has them.
func TestBrokerBacklogMetric(t *testing.T) {
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) {
			if strings.Contains(st.name, "handoff") {
				// The relay hands its batches to the writer in-process and
				// waits for them to commit: nothing queues in the broker
				// for the gauge to show.
				t.Skip("the handoff stack keeps no backlog in the broker")
			}
			held := &heldWriter{open: make(chan struct{})}
			e := startEngine(t, func(c *Config) {
				st.config(t)(c)
				c.BrokerBacklogInterval = 100 * time.Millisecond
			}, wrapRole("writer", func(b seckill.Broker) seckill.Broker { held.Broker = b; return held }))
			t.Cleanup(held.release)
			sale := e.liveSale(5, 5)
			for i := range 3 {
				if r := e.reserve(sale, e.token(fmt.Sprint("backlog-", i)), 1, ""); r.status != 202 {
					t.Fatalf("reserve: %d %v", r.status, r.body)
				}
			}
			var last float64
			servicetest.WaitFor(t, 30*time.Second, "a backlog in the gauge", func() bool {
				last, _ = e.backlogGauge()
				return last >= 1
			})
			t.Logf("backlog while the writer is held: %v messages for 3 claims", last)
			if last > 3 {
				t.Errorf("backlog %v messages for 3 claims", last)
			}
			held.release()
			servicetest.WaitFor(t, 30*time.Second, "the backlog drained", func() bool {
				v, ok := e.backlogGauge()
				return ok && v == 0
			})
			servicetest.WaitFor(t, 30*time.Second, "the 3 orders", func() bool {
				return e.dbSale(sale)["unsold"] == float64(2)
			})
		})
	}
}
