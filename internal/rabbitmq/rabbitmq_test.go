package rabbitmq

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBrokerConformance(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	conformance.Broker(t, func(t *testing.T) seckill.Broker {
		return newTestBroker(t, amqpURL, amqpURL)
	})
}

// newTestBroker returns a broker on a fresh queue, reached through dialURL
// (the server itself, or a proxy in front of it), with the conformance
// suite's retry policy. Its queues are deleted, through adminURL, when the
// test ends.
func newTestBroker(t testing.TB, dialURL, adminURL string, opts ...Option) *Broker {
	t.Helper()
	queue := servicetest.UniqueName("seckill_test_")
	opts = append([]Option{WithRetryPolicy(conformance.BrokerRetry)}, opts...)
	b, err := New(context.Background(), dialURL, queue, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		deleteQueues(t, adminURL, b)
	})
	return b
}

// dialChannel opens a channel on a connection of its own to url; closing
// the connection closes the channel too.
func dialChannel(url string) (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return nil, nil, fmt.Errorf("dial: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("channel: %w", err)
	}
	return conn, ch, nil
}

func deleteQueues(t testing.TB, adminURL string, b *Broker) {
	t.Helper()
	conn, ch, err := dialChannel(adminURL)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	defer conn.Close()
	for _, q := range b.topology() {
		if _, err := ch.QueueDelete(q.name, false, false, false); err != nil {
			t.Errorf("cleanup: delete queue %s: %v", q.name, err)
			return
		}
	}
}

// TestPublishToMissingQueueFails: a message the broker cannot route is
// confirmed all the same; only the mandatory flag's basic.return tells,
// and Publish must not report success.
func TestPublishToMissingQueueFails(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	b := newTestBroker(t, amqpURL, amqpURL)
	ctx := context.Background()
	if err := b.Publish(ctx, conformance.BrokerMessages("routed", 3)); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	conn, ch, err := dialChannel(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ch.QueueDelete(b.queue, false, false, false); err != nil {
		t.Fatal(err)
	}
	err = b.Publish(ctx, conformance.BrokerMessages("lost", 5))
	if err == nil {
		t.Fatal("Publish to a deleted queue = nil; want an error")
	}
	t.Logf("Publish to a deleted queue: %v", err)
}

// TestConnectionCutMidSale cuts every connection through a proxy while a
// publisher and a consumer run, keeps the proxy refusing for a while, then
// lets it accept again. Publishes during the outage must fail (fast), every
// publish that returned nil must be delivered, and both sides must resume.
func TestConnectionCutMidSale(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	u, err := url.Parse(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	p := servicetest.StartProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = p.Addr()
	b := newTestBroker(t, viaProxy.String(), amqpURL, WithReconnectBackoff(50*time.Millisecond, 200*time.Millisecond))

	var mu sync.Mutex
	delivered := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	consumed := make(chan error, 1)
	go func() {
		consumed <- b.Consume(ctx, seckill.ConsumeOptions{BatchSize: 50}, func(_ context.Context, batch []seckill.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range batch {
				delivered[d.Message().ID] = true
				d.Ack()
			}
		})
	}()

	// The publisher records which publishes claimed success.
	var confirmed []string
	var failures, okAfterRestore int
	var restored bool
	pubDone := make(chan struct{})
	stopPub := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				return
			default:
			}
			msgs := conformance.BrokerMessages(fmt.Sprintf("cut%d", i), 20)
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			err := b.Publish(pctx, msgs)
			pcancel()
			mu.Lock()
			if err == nil {
				for _, m := range msgs {
					confirmed = append(confirmed, m.ID)
				}
				if restored {
					okAfterRestore++
				}
			} else {
				failures++
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	count := func(f func() int) int { mu.Lock(); defer mu.Unlock(); return f() }

	servicetest.WaitFor(t, 30*time.Second, "publishes before the cut", func() bool { return count(func() int { return len(confirmed) }) >= 200 })
	p.Cut()
	outageStart := time.Now()
	// During the outage, a publish fails, and fails fast.
	for time.Since(outageStart) < time.Second {
		start := time.Now()
		err := b.Publish(context.Background(), conformance.BrokerMessages("outage", 1))
		if err == nil {
			t.Fatal("Publish during the outage = nil; want an error")
		}
		servicetest.WantWithin(t, "Publish's failure during the outage", time.Since(start), 2*time.Second)
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	restored = true
	mu.Unlock()
	p.Restore()
	servicetest.WaitFor(t, 30*time.Second, "publishes to succeed after the restore", func() bool { return count(func() int { return okAfterRestore }) >= 10 })
	close(stopPub)
	<-pubDone

	mu.Lock()
	t.Logf("%d messages confirmed, %d publishes failed during the outage", len(confirmed), failures)
	want := append([]string(nil), confirmed...)
	mu.Unlock()
	if failures == 0 {
		t.Error("no publish failed while the connection was cut")
	}
	servicetest.WaitFor(t, 30*time.Second, "every confirmed message to be consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range want {
			if !delivered[id] {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-consumed; err != nil {
		t.Errorf("Consume = %v; want nil after cancel", err)
	}
}

// BenchmarkPublish compares a publisher confirm per message with one
// confirm round per batch of 100, on persistent messages to a quorum queue.
func BenchmarkPublish(b *testing.B) {
	amqpURL := servicetest.RabbitMQ.URL(b)
	conformance.BrokerPublish(b, "Confirm", func(b *testing.B) seckill.Broker { return newTestBroker(b, amqpURL, amqpURL) })
}

func TestNamespaces(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	conformance.BrokerNamespaces(t, func(t *testing.T) (seckill.Broker, seckill.Broker) {
		mine := newTestBroker(t, amqpURL, amqpURL, WithNamespace("ns_mine"))
		theirs, err := New(context.Background(), amqpURL, mine.queue, WithRetryPolicy(conformance.BrokerRetry), WithNamespace("ns_theirs"))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = theirs.Close() })
		return mine, theirs
	})
}

// TestOneMessagePerPublish: a Publish of a batch puts one message (a pack)
// on the queue, not one per event.
func TestOneMessagePerPublish(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	b := newTestBroker(t, amqpURL, amqpURL)
	if err := b.Publish(context.Background(), conformance.BrokerMessages("pack", 300)); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	conn, ch, err := dialChannel(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(b.queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"})
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 1 {
		t.Errorf("queue holds %d messages after one Publish of 300 events; want 1", q.Messages)
	}
}

// TestBacklog: three Publishes wait as three messages until a consumer
// acks them, then none.
func TestBacklog(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	b := newTestBroker(t, amqpURL, amqpURL)
	ctx := context.Background()
	if n, err := b.Backlog(ctx); err != nil || n != 0 {
		t.Fatalf("Backlog of a new queue = %d, %v; want 0", n, err)
	}
	for i := range 3 {
		if err := b.Publish(ctx, conformance.BrokerMessages(fmt.Sprint("backlog", i), 10)); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	// Quorum queues report a confirmed message at once.
	if n, err := b.Backlog(ctx); err != nil || n != 3 {
		t.Fatalf("Backlog after 3 publishes = %d, %v; want 3", n, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var (
		mu   sync.Mutex
		seen int
	)
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(cctx, seckill.ConsumeOptions{}, func(_ context.Context, batch []seckill.Delivery) {
			for _, d := range batch {
				d.Ack()
			}
			mu.Lock()
			seen += len(batch)
			mu.Unlock()
		})
	}()
	servicetest.WaitFor(t, 30*time.Second, "the 30 events", func() bool { mu.Lock(); defer mu.Unlock(); return seen == 30 })
	servicetest.WaitFor(t, 30*time.Second, "an empty backlog", func() bool {
		n, err := b.Backlog(ctx)
		return err == nil && n == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v", err)
	}
}
