package nats

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// suiteOptions are what the conformance suite asks of a broker.
func suiteOptions() []Option {
	return []Option{WithRetryPolicy(conformance.BrokerRetry), WithAckWait(conformance.BrokerAckWait)}
}

func TestExternalConformance(t *testing.T) {
	url := servicetest.NATS.URL(t)
	conformance.Broker(t, func(t *testing.T) seckill.Broker { return newExternal(t, url) })
}

func TestEmbeddedConformance(t *testing.T) {
	conformance.Broker(t, func(t *testing.T) seckill.Broker { return newEmbedded(t, t.TempDir()) })
}

// newExternal returns a broker on a fresh stream of the external server,
// deleting its streams when the test ends.
func newExternal(t testing.TB, url string, opts ...Option) *Broker {
	t.Helper()
	stream := servicetest.UniqueName("seckill_test_")
	b, err := New(context.Background(), url, stream, append(suiteOptions(), opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		nc, err := nats.Connect(url)
		if err != nil {
			t.Errorf("cleanup: connect: %v", err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range []string{b.stream, b.dead} {
			if err := js.DeleteStream(ctx, s); err != nil {
				t.Errorf("cleanup: delete stream %s: %v", s, err)
			}
		}
	})
	return b
}

func newEmbedded(t testing.TB, dir string, opts ...Option) *Broker {
	t.Helper()
	b, shutdown, err := StartEmbedded(context.Background(), dir, "seckill", append(suiteOptions(), opts...)...)
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(shutdown)
	return b
}

// collector consumes from b, acking everything, and counts deliveries.
type collector struct {
	mu       sync.Mutex
	attempts map[string][]int
}

func consumeAll(t *testing.T, b *Broker, handle func(context.Context, []seckill.Delivery)) *collector {
	t.Helper()
	c := &collector{attempts: map[string][]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, seckill.ConsumeOptions{}, func(ctx context.Context, batch []seckill.Delivery) {
			c.mu.Lock()
			for _, d := range batch {
				c.attempts[d.Message().ID] = append(c.attempts[d.Message().ID], d.Attempt())
			}
			c.mu.Unlock()
			if handle != nil {
				handle(ctx, batch)
			}
			for _, d := range batch {
				d.Ack()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume = %v; want nil", err)
		}
	})
	return c
}

func (c *collector) get() map[string][]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]int{}
	for k, v := range c.attempts {
		out[k] = append([]int(nil), v...)
	}
	return out
}

func TestEmbeddedKeepsMessagesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	msgs := conformance.BrokerMessages("restart", 10)
	b, shutdown, err := StartEmbedded(ctx, dir, "seckill", suiteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, msgs); err != nil {
		shutdown()
		t.Fatalf("Publish: %v", err)
	}
	shutdown()

	b = newEmbedded(t, dir)
	c := consumeAll(t, b, nil)
	servicetest.WaitFor(t, 30*time.Second, "the stored messages after a restart", func() bool { return len(c.get()) == len(msgs) })
	for _, m := range msgs {
		if got := c.get()[m.ID]; len(got) != 1 {
			t.Errorf("%s: attempts %v; want one delivery", m.ID, got)
		}
	}
}

// TestDuplicatePublishStoredOnce: the relay may publish an event again
// after a crash between confirm and XACK; Nats-Msg-Id makes JetStream keep
// one copy.
func TestDuplicatePublishStoredOnce(t *testing.T) {
	b := newEmbedded(t, t.TempDir())
	ctx := context.Background()
	msgs := conformance.BrokerMessages("dup", 5)
	for range 2 {
		if err := b.Publish(ctx, msgs); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	c := consumeAll(t, b, nil)
	// A sentinel published last comes after any second copy in the stream:
	// once it is handled, every copy stored has been delivered.
	awaitSentinel(t, b, c, "dup")
	for _, m := range msgs {
		if attempts := c.get()[m.ID]; len(attempts) != 1 {
			t.Errorf("%s delivered %d times; want once", m.ID, len(attempts))
		}
	}
}

// awaitSentinel publishes one last message and waits until c has seen it.
// The consumer handles batches one at a time, in stream order, redeliveries
// first: whatever was to be delivered before it has been.
func awaitSentinel(t *testing.T, b *Broker, c *collector, tag string) {
	t.Helper()
	sentinel := conformance.BrokerMessages(tag+"_sentinel", 1)
	if err := b.Publish(context.Background(), sentinel); err != nil {
		t.Fatalf("Publish the sentinel: %v", err)
	}
	servicetest.WaitFor(t, 30*time.Second, "the sentinel", func() bool { return len(c.get()[sentinel[0].ID]) > 0 })
}

// TestSlowHandlerKeepsItsBatch: a handler that takes several AckWaits
// (a slow database) must not see its batch redelivered meanwhile.
func TestSlowHandlerKeepsItsBatch(t *testing.T) {
	ackWait := 300 * time.Millisecond
	b := newEmbedded(t, t.TempDir(), WithAckWait(ackWait))
	msgs := conformance.BrokerMessages("slow", 3)
	if err := b.Publish(context.Background(), msgs); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	var once sync.Once
	slowDone := make(chan struct{})
	c := consumeAll(t, b, func(ctx context.Context, batch []seckill.Delivery) {
		once.Do(func() {
			time.Sleep(4 * ackWait) // the slow database
			close(slowDone)
		})
	})
	servicetest.WaitFor(t, 30*time.Second, "the messages", func() bool { return len(c.get()) == 3 })
	<-slowDone
	awaitSentinel(t, b, c, "slow")
	for _, m := range msgs {
		if attempts := c.get()[m.ID]; len(attempts) != 1 {
			t.Errorf("%s delivered with attempts %v; want once", m.ID, attempts)
		}
	}
}

// TestPublishFailsWhileServerDown: with the server gone, Publish must
// return an error, never nil.
func TestPublishFailsWhileServerDown(t *testing.T) {
	ns, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	cfg, err := newConfig(suiteOptions())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL(), append(cfg.connectOptions("seckill"), nats.InProcessServer(ns))...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newBroker(context.Background(), nc, "seckill", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Publish(context.Background(), conformance.BrokerMessages("up", 3)); err != nil {
		t.Fatalf("Publish while up: %v", err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := b.Publish(ctx, conformance.BrokerMessages("down", 3)); err == nil {
		t.Fatal("Publish with the server down = nil; want an error")
	}
}

// BenchmarkPublish compares an acknowledged publish per message with one
// round of acks per batch of 100, on the external server and the embedded
// one.
func BenchmarkPublish(b *testing.B) {
	b.Run("External", func(b *testing.B) {
		url := servicetest.NATS.URL(b)
		conformance.BrokerPublish(b, "Ack", func(b *testing.B) seckill.Broker { return newExternal(b, url) })
	})
	b.Run("Embedded", func(b *testing.B) {
		conformance.BrokerPublish(b, "Ack", func(b *testing.B) seckill.Broker { return newEmbedded(b, b.TempDir()) })
	})
}

func TestNamespaces(t *testing.T) {
	url := servicetest.NATS.URL(t)
	conformance.BrokerNamespaces(t, func(t *testing.T) (seckill.Broker, seckill.Broker) {
		mine := newExternal(t, url, WithNamespace("ns_mine"))
		theirs, err := New(context.Background(), url, mine.stream, append(suiteOptions(), WithNamespace("ns_theirs"))...)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = theirs.Close() })
		return mine, theirs
	})
}

// TestOneMessagePerPublish: a Publish of a batch stores one stream message
// (a pack), not one per event.
func TestOneMessagePerPublish(t *testing.T) {
	b := newEmbedded(t, t.TempDir())
	ctx := context.Background()
	if err := b.Publish(ctx, conformance.BrokerMessages("pack", 300)); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	info, err := b.js.Stream(ctx, b.stream)
	if err != nil {
		t.Fatal(err)
	}
	st, err := info.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State.Msgs != 1 {
		t.Errorf("stream holds %d messages after one Publish of 300 events; want 1", st.State.Msgs)
	}
	c := consumeAll(t, b, nil)
	servicetest.WaitFor(t, 30*time.Second, "the 300 events", func() bool { return len(c.get()) == 300 })
}

// TestBacklog: three Publishes wait as three messages until a consumer
// acks them, then none.
func TestBacklog(t *testing.T) {
	b := newEmbedded(t, t.TempDir())
	ctx := context.Background()
	if n, err := b.Backlog(ctx); err != nil || n != 0 {
		t.Fatalf("Backlog of a new stream = %d, %v; want 0", n, err)
	}
	for i := range 3 {
		if err := b.Publish(ctx, conformance.BrokerMessages(fmt.Sprint("backlog", i), 10)); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	// The consumer counts a stored message a moment after the publish's
	// ack: wait for the count to settle.
	var n int64
	servicetest.WaitFor(t, 30*time.Second, "the backlog to count the 3 publishes", func() bool {
		var err error
		n, err = b.Backlog(ctx)
		return err == nil && n >= 3
	})
	if n != 3 {
		t.Fatalf("Backlog after 3 publishes = %d; want 3", n)
	}
	c := consumeAll(t, b, nil)
	servicetest.WaitFor(t, 30*time.Second, "the 30 events", func() bool { return len(c.get()) == 30 })
	servicetest.WaitFor(t, 30*time.Second, "an empty backlog", func() bool {
		n, err := b.Backlog(ctx)
		return err == nil && n == 0
	})
}
