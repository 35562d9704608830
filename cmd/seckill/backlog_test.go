package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

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
