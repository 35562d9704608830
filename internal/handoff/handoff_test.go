package handoff

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/nats"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConformance: the handoff in front of embedded JetStream is a broker
// like any other. Most subtests publish before anyone consumes, so they
// go through the durable side; the tests below cover the handoff itself.
func TestConformance(t *testing.T) {
	conformance.Broker(t, func(t *testing.T) seckill.Broker {
		d, shutdown, err := nats.StartEmbedded(context.Background(), t.TempDir(), "seckill",
			nats.WithRetryPolicy(conformance.BrokerRetry), nats.WithAckWait(conformance.BrokerAckWait))
		if err != nil {
			t.Fatalf("StartEmbedded: %v", err)
		}
		t.Cleanup(shutdown)
		b, err := New(d, Config{Retry: conformance.BrokerRetry, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}

// fakeDurable records what reaches the durable side. Its Consume delivers
// nothing.
type fakeDurable struct {
	mu         sync.Mutex
	published  []seckill.Message
	requeued   []brokerpack.PackedMessage
	notBefore  []time.Time
	dead       []seckill.DeadLetter
	failStores error
	closed     chan struct{}
	closeOnce  sync.Once
}

func newFake() *fakeDurable { return &fakeDurable{closed: make(chan struct{})} }

func (f *fakeDurable) Publish(_ context.Context, msgs []seckill.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, msgs...)
	return nil
}

func (f *fakeDurable) Requeue(_ context.Context, events []brokerpack.PackedMessage, notBefore time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failStores != nil {
		return f.failStores
	}
	f.requeued = append(f.requeued, events...)
	f.notBefore = append(f.notBefore, notBefore)
	return nil
}

func (f *fakeDurable) DeadLetter(_ context.Context, letters []seckill.DeadLetter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failStores != nil {
		return f.failStores
	}
	f.dead = append(f.dead, letters...)
	return nil
}

func (f *fakeDurable) Consume(ctx context.Context, _ seckill.ConsumeOptions, _ func(context.Context, []seckill.Delivery)) error {
	select {
	case <-ctx.Done():
		return nil
	case <-f.closed:
		return seckill.ErrClosed
	}
}

func (f *fakeDurable) ConsumeDeadLetters(ctx context.Context, _ seckill.ConsumeOptions, _ func(context.Context, []seckill.DeadLetter) error) error {
	return f.Consume(ctx, seckill.ConsumeOptions{}, nil)
}

func (f *fakeDurable) Close() error {
	f.closeOnce.Do(func() { close(f.closed) })
	return nil
}

// stored is what reached the durable side: published, requeued, dead.
func (f *fakeDurable) stored() (int, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.published), len(f.requeued), len(f.dead)
}

func msgs(n int) []seckill.Message {
	out := make([]seckill.Message, n)
	for i := range out {
		out[i] = seckill.Message{ID: fmt.Sprintf("m%d", i), Body: []byte(fmt.Sprintf("body %d", i))}
	}
	return out
}

// consume runs b.Consume with handle until the test ends.
func consume(t *testing.T, b *Broker, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, opts, handle) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Consume = %v; want nil", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func newHandoff(t *testing.T, d Durable, cfg Config) *Broker {
	t.Helper()
	if cfg.Retry.MaxAttempts == 0 {
		cfg.Retry = conformance.BrokerRetry
	}
	b, err := New(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// publishAsync runs Publish in the background and returns its result
// channel.
func publishAsync(b *Broker, m []seckill.Message) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Publish(context.Background(), m) }()
	return done
}

// TestPublishReturnsOnceSettled: a Publish taken by a consumer returns only
// after the handler returned with every event acked, and nothing reaches
// the durable broker.
func TestPublishReturnsOnceSettled(t *testing.T) {
	f := newFake()
	b := newHandoff(t, f, Config{Wait: time.Minute})
	inHandler := make(chan struct{})
	release := make(chan struct{})
	var published <-chan error
	var sizes []int
	consume(t, b, seckill.ConsumeOptions{BatchSize: 4}, func(_ context.Context, batch []seckill.Delivery) {
		sizes = append(sizes, len(batch))
		if len(sizes) == 1 {
			close(inHandler)
			<-release
			select {
			case err := <-published:
				t.Errorf("Publish returned %v while its handler still held the batch", err)
			default:
			}
		}
		for _, d := range batch {
			if d.Attempt() != 1 {
				t.Errorf("%s: Attempt %d; want 1", d.Message().ID, d.Attempt())
			}
			d.Ack()
		}
	})
	published = publishAsync(b, msgs(10))
	<-inHandler
	close(release)
	if err := <-published; err != nil {
		t.Fatalf("Publish = %v", err)
	}
	if fmt.Sprint(sizes) != "[4 4 2]" {
		t.Errorf("handler batches %v; want [4 4 2] (BatchSize 4)", sizes)
	}
	if p, r, d := f.stored(); p+r+d != 0 {
		t.Errorf("durable broker got %d published, %d requeued, %d dead; want nothing", p, r, d)
	}
}

// TestRetryAndDeadLetterGoDurable: events the handler retries are stored
// as retry copies (attempt 2, after the back-off) and, at the attempt
// limit, as dead letters, before Publish returns.
func TestRetryAndDeadLetterGoDurable(t *testing.T) {
	for _, tt := range []struct {
		name        string
		maxAttempts int
		wantR       int
		wantD       int
	}{
		{"retry", 5, 2, 0},
		{"dead letter", 1, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			policy := brokerpack.RetryPolicy{MaxAttempts: tt.maxAttempts, Backoff: 300 * time.Millisecond, MaxBackoff: time.Second}
			b := newHandoff(t, f, Config{Retry: policy, Wait: time.Minute})
			consume(t, b, seckill.ConsumeOptions{}, func(_ context.Context, batch []seckill.Delivery) {
				for i, d := range batch {
					if i == 0 {
						d.Ack()
					} else {
						d.Retry(errors.New("insert failed"))
					}
				}
			})
			before := time.Now()
			if err := b.Publish(context.Background(), msgs(3)); err != nil {
				t.Fatalf("Publish = %v", err)
			}
			p, r, d := f.stored()
			if p != 0 || r != tt.wantR || d != tt.wantD {
				t.Fatalf("durable got %d published, %d requeued, %d dead; want 0, %d, %d", p, r, d, tt.wantR, tt.wantD)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, e := range f.requeued {
				if e.Attempt != 2 {
					t.Errorf("%s requeued as attempt %d; want 2", e.ID, e.Attempt)
				}
			}
			for _, nb := range f.notBefore {
				if nb.Before(before.Add(policy.Backoff)) {
					t.Errorf("retry held back until %s; want at least the back-off %s after the publish", nb.Sub(before), policy.Backoff)
				}
			}
			for _, dl := range f.dead {
				if dl.Attempts != 1 || dl.Reason != "insert failed" {
					t.Errorf("dead letter %s: attempts %d, reason %q; want 1, the handler's error", dl.Message.ID, dl.Attempts, dl.Reason)
				}
			}
		})
	}
}

// TestStoreFailureFailsPublish: when the retry copies cannot be stored,
// Publish fails, so the relay keeps the entries and publishes them again.
func TestStoreFailureFailsPublish(t *testing.T) {
	f := newFake()
	f.failStores = errors.New("disk full")
	b := newHandoff(t, f, Config{Wait: time.Minute})
	consume(t, b, seckill.ConsumeOptions{}, func(_ context.Context, batch []seckill.Delivery) {
		for _, d := range batch {
			d.Retry(errors.New("insert failed"))
		}
	})
	if err := b.Publish(context.Background(), msgs(2)); err == nil {
		t.Fatal("Publish = nil though the retry copies were not stored")
	}
}

// TestConsumerStoppingRequeues: a consumer stopped while holding a batch
// leaves it to the durable broker, as a crash would (attempt 2), and
// Publish succeeds.
func TestConsumerStoppingRequeues(t *testing.T) {
	f := newFake()
	b := newHandoff(t, f, Config{Wait: time.Minute})
	holding := make(chan struct{})
	stop := consume(t, b, seckill.ConsumeOptions{}, func(ctx context.Context, _ []seckill.Delivery) {
		close(holding)
		<-ctx.Done()
	})
	published := publishAsync(b, msgs(3))
	<-holding
	stop()
	if err := <-published; err != nil {
		t.Fatalf("Publish = %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requeued) != 3 || len(f.published) != 0 {
		t.Fatalf("durable got %d requeued, %d published; want all 3 requeued", len(f.requeued), len(f.published))
	}
	for _, e := range f.requeued {
		if e.Attempt != 2 {
			t.Errorf("%s requeued as attempt %d; want 2", e.ID, e.Attempt)
		}
	}
}

// TestNoConsumerPublishesDurably: with no consumer to take it within Wait,
// the batch is stored on the durable broker.
func TestNoConsumerPublishesDurably(t *testing.T) {
	f := newFake()
	b := newHandoff(t, f, Config{Wait: 20 * time.Millisecond})
	if err := b.Publish(context.Background(), msgs(3)); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	if p, r, d := f.stored(); p != 3 || r+d != 0 {
		t.Errorf("durable got %d published, %d requeued, %d dead; want 3 published", p, r, d)
	}
}

// TestHeldTooLongPublishesDurably: a batch whose consumer holds it past
// Hold (a database outage waited out) is stored whole on the durable
// broker, and the consumer's late verdict stores nothing more.
func TestHeldTooLongPublishesDurably(t *testing.T) {
	f := newFake()
	b := newHandoff(t, f, Config{Wait: time.Minute, Hold: 50 * time.Millisecond})
	release := make(chan struct{})
	returned := make(chan struct{})
	consume(t, b, seckill.ConsumeOptions{}, func(_ context.Context, batch []seckill.Delivery) {
		defer close(returned)
		<-release
		for _, d := range batch {
			d.Retry(errors.New("late"))
		}
	})
	if err := b.Publish(context.Background(), msgs(2)); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	if p, _, _ := f.stored(); p != 2 {
		t.Fatalf("durable got %d published; want the 2 held events", p)
	}
	close(release)
	<-returned
	// The verdict is settled on the consumer's goroutine after the
	// handler returns: once that goroutine takes another offer, it is.
	servicetest.WaitFor(t, 5*time.Second, "the consumer to be free again", func() bool {
		select {
		case b.offers <- &offer{done: make(chan error, 1)}:
			return true
		default:
			return false
		}
	})
	if p, r, d := f.stored(); p != 2 || r+d != 0 {
		t.Errorf("durable got %d published, %d requeued, %d dead after the late verdict; want only the 2 published", p, r, d)
	}
}

// TestClose: Consume ends with ErrClosed, Publish fails after Close.
func TestClose(t *testing.T) {
	f := newFake()
	b := newHandoff(t, f, Config{})
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(context.Background(), seckill.ConsumeOptions{}, func(context.Context, []seckill.Delivery) {})
	}()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, seckill.ErrClosed) {
		t.Errorf("Consume at Close = %v; want ErrClosed", err)
	}
	if err := b.Publish(context.Background(), msgs(1)); !errors.Is(err, seckill.ErrClosed) {
		t.Errorf("Publish after Close = %v; want ErrClosed", err)
	}
}

// TestRetriesThroughJetStream: with the consumer already waiting, a batch
// goes by hand; its retries come back through JetStream with their
// attempts counted, and the last one ends as a dead letter.
func TestRetriesThroughJetStream(t *testing.T) {
	d, shutdown, err := nats.StartEmbedded(context.Background(), t.TempDir(), "seckill",
		nats.WithRetryPolicy(conformance.BrokerRetry), nats.WithAckWait(conformance.BrokerAckWait))
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(shutdown)
	b := newHandoff(t, d, Config{Wait: time.Minute})
	var mu sync.Mutex
	attempts := map[string][]int{}
	consume(t, b, seckill.ConsumeOptions{}, func(_ context.Context, batch []seckill.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range batch {
			attempts[d.Message().ID] = append(attempts[d.Message().ID], d.Attempt())
			d.Retry(fmt.Errorf("boom %d", d.Attempt()))
		}
	})
	deadCh := make(chan seckill.DeadLetter, 10)
	ctx, cancel := context.WithCancel(context.Background())
	deadDone := make(chan error, 1)
	go func() {
		deadDone <- b.ConsumeDeadLetters(ctx, seckill.ConsumeOptions{}, func(_ context.Context, batch []seckill.DeadLetter) error {
			for _, dl := range batch {
				deadCh <- dl
			}
			return nil
		})
	}()
	defer func() { cancel(); <-deadDone }()
	m := msgs(2)
	if err := b.Publish(context.Background(), m); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	for range m {
		select {
		case dl := <-deadCh:
			if dl.Attempts != conformance.BrokerRetry.MaxAttempts || dl.Reason != fmt.Sprintf("boom %d", dl.Attempts) {
				t.Errorf("dead letter %s: attempts %d, reason %q", dl.Message.ID, dl.Attempts, dl.Reason)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no dead letter within 30s")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, msg := range m {
		if got := fmt.Sprint(attempts[msg.ID]); got != "[1 2 3 4 5]" {
			t.Errorf("%s: attempts %s; want [1 2 3 4 5]", msg.ID, got)
		}
	}
}
