package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// BrokerRetry is the retry policy newBroker must give the brokers it builds
// for the Broker suite: back-off 100ms, 200ms, 400ms, 400ms, then the dead
// letter. The suite's timing checks derive from it.
var BrokerRetry = brokerpack.RetryPolicy{
	MaxAttempts: 5,
	Backoff:     100 * time.Millisecond,
	MaxBackoff:  400 * time.Millisecond,
}

// BrokerAckWait is the longest a broker under test may take to hand an
// abandoned (crashed) delivery to another consumer. RabbitMQ does it as
// soon as the channel closes; NATS adapters must set their AckWait to it.
const BrokerAckWait = time.Second

// brokerPatience bounds every wait for something that should happen.
const brokerPatience = 30 * time.Second

// Broker exercises a seckill.Broker. newBroker is called once per subtest
// and must return a broker on a queue or stream of its own, built with
// BrokerRetry and BrokerAckWait, that it closes and deletes in t.Cleanup.
// Subtests run in parallel.
func Broker(t *testing.T, newBroker func(t *testing.T) seckill.Broker) {
	t.Helper()

	// One Publish of a large batch: every message is confirmed and
	// arrives intact. How much cheaper a batch is than one-message
	// publishes (one confirm round per call) is measured by the adapters'
	// BenchmarkPublish, not asserted here: timings on a shared machine
	// would make this test flaky.
	t.Run("BatchPublish", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		all := BrokerMessages("batch", 1000)
		publish(t, b, all)

		rec := newBrokerRecorder()
		stop := runConsumer(t, b, seckill.ConsumeOptions{BatchSize: 500}, rec.ackAll)
		servicetest.WaitFor(t, brokerPatience, "every published message to arrive", func() bool { return rec.seenAll(all) })
		stop()
		rec.wantIntact(t, all)
	})

	t.Run("PublishNothing", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		if err := b.Publish(context.Background(), nil); err != nil {
			t.Fatalf("Publish(nil) = %v; want nil", err)
		}
	})

	t.Run("PublishConsumeBatches", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		msgs := BrokerMessages("pc", 250)
		publish(t, b, msgs)
		rec := newBrokerRecorder()
		stop := runConsumer(t, b, seckill.ConsumeOptions{BatchSize: 100, Linger: 50 * time.Millisecond}, rec.ackAll)
		dead := newBrokerRecorder()
		stopDead := runDeadConsumer(t, b, seckill.ConsumeOptions{}, dead.takeDead)
		servicetest.WaitFor(t, brokerPatience, "every message to arrive", func() bool { return rec.seenAll(msgs) })
		// Long enough for anything unacked or wrongly retried to return.
		time.Sleep(2*BrokerAckWait + BrokerRetry.MaxBackoff)
		stop()
		stopDead()

		rec.wantIntact(t, msgs)
		rec.wantDeliveries(t, msgs, 1)
		largest := 0
		for _, n := range rec.batchSizes() {
			if n > 100 {
				t.Errorf("handler got a batch of %d; want at most BatchSize 100", n)
			}
			largest = max(largest, n)
		}
		if largest < 2 {
			t.Errorf("largest batch = %d with 250 messages waiting; want batches, not single messages", largest)
		}
		if n := dead.count(); n != 0 {
			t.Errorf("%d dead letters after every message was acked; want 0", n)
		}
	})

	t.Run("RedeliveryAfterCrash", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		msgs := BrokerMessages("crash", 3)
		publish(t, b, msgs)
		first := newBrokerRecorder()
		got := make(chan struct{}, 1)
		stopFirst := runConsumer(t, b, seckill.ConsumeOptions{Linger: 200 * time.Millisecond}, func(ctx context.Context, batch []seckill.Delivery) {
			first.record(batch)
			select {
			case got <- struct{}{}:
			default:
			}
			<-ctx.Done() // dies holding the batch, settling nothing
		})
		select {
		case <-got:
		case <-time.After(brokerPatience):
			t.Fatal("first consumer got nothing")
		}
		stopFirst()

		second := newBrokerRecorder()
		stopSecond := runConsumer(t, b, seckill.ConsumeOptions{}, second.ackAll)
		servicetest.WaitFor(t, brokerPatience, "the abandoned messages to come back", func() bool { return second.seenAll(msgs) })
		stopSecond()
		second.wantIntact(t, msgs)
		for id, firstTries := range first.attemptsByID() {
			if firstTries[0] != 1 {
				t.Errorf("%s: first delivery has Attempt %d; want 1", id, firstTries[0])
			}
			if again := second.attemptsByID()[id]; len(again) == 0 || again[0] < 2 {
				t.Errorf("%s: after the crash, attempts %v; want a delivery with Attempt >= 2", id, again)
			}
		}
	})

	t.Run("EachDeliverySettlesOnItsOwn", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		msgs := BrokerMessages("mixed", 9)
		index := map[string]int{}
		for i, m := range msgs {
			index[m.ID] = i
		}
		publish(t, b, msgs)
		rec := newBrokerRecorder()
		stop := runConsumer(t, b, seckill.ConsumeOptions{Linger: 100 * time.Millisecond}, func(ctx context.Context, batch []seckill.Delivery) {
			rec.record(batch)
			for _, d := range batch {
				switch {
				case d.Attempt() > 1 || index[d.Message().ID]%3 == 0:
					d.Ack()
				case index[d.Message().ID]%3 == 1:
					d.Retry(errors.New("write failed"))
				default:
					// Left unsettled while the consumer lives: retried.
				}
			}
		})
		servicetest.WaitFor(t, brokerPatience, "the retried messages to come back", func() bool {
			byID := rec.attemptsByID()
			for _, m := range msgs {
				if index[m.ID]%3 != 0 && len(byID[m.ID]) < 2 {
					return false
				}
			}
			return true
		})
		time.Sleep(2*BrokerAckWait + BrokerRetry.MaxBackoff)
		stop()
		rec.wantIntact(t, msgs)
		for id, attempts := range rec.attemptsByID() {
			want := "[1 2]"
			if index[id]%3 == 0 {
				want = "[1]"
			}
			if got := fmt.Sprint(attempts); got != want {
				t.Errorf("message %d: attempts %s; want %s", index[id], got, want)
			}
		}
	})

	t.Run("BackoffAttemptLimitAndDeadLetter", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		msgs := BrokerMessages("poison", 2)
		publish(t, b, msgs)
		rec := newBrokerRecorder()
		stop := runConsumer(t, b, seckill.ConsumeOptions{}, func(ctx context.Context, batch []seckill.Delivery) {
			rec.record(batch)
			for _, d := range batch {
				d.Retry(fmt.Errorf("boom on attempt %d", d.Attempt()))
			}
		})
		dead := newBrokerRecorder()
		stopDead := runDeadConsumer(t, b, seckill.ConsumeOptions{}, dead.takeDead)
		servicetest.WaitFor(t, brokerPatience, "both messages to be dead-lettered", func() bool { return dead.count() >= len(msgs) })
		// A sixth delivery, if any, would come within this.
		time.Sleep(2*BrokerAckWait + BrokerRetry.MaxBackoff)
		stop()
		stopDead()

		want := fmt.Sprint(seqInts(1, BrokerRetry.MaxAttempts))
		for _, m := range msgs {
			tries := rec.triesOf(m.ID)
			if got := fmt.Sprint(attemptsOf(tries)); got != want {
				t.Fatalf("%s: attempts %s; want %s, then the dead letter", m.ID, got, want)
			}
			for k := 1; k < len(tries); k++ {
				gap, floor := tries[k].at.Sub(tries[k-1].at), BrokerRetry.Delay(k)
				if gap < floor-5*time.Millisecond || gap > floor+5*time.Second {
					t.Errorf("%s: attempt %d came %s after attempt %d; want about %s (back-off)", m.ID, k+1, gap, k, floor)
				}
			}
		}
		letters := dead.letters()
		if len(letters) != len(msgs) {
			t.Fatalf("%d dead letters; want %d, one per message", len(letters), len(msgs))
		}
		for _, m := range msgs {
			dl, ok := letters[m.ID]
			switch {
			case !ok:
				t.Errorf("%s: no dead letter", m.ID)
			case !bytes.Equal(dl.Message.Body, m.Body):
				t.Errorf("%s: dead letter body %q; want %q", m.ID, dl.Message.Body, m.Body)
			case dl.Attempts != BrokerRetry.MaxAttempts:
				t.Errorf("%s: dead letter Attempts = %d; want %d", m.ID, dl.Attempts, BrokerRetry.MaxAttempts)
			case !strings.Contains(dl.Reason, fmt.Sprintf("boom on attempt %d", BrokerRetry.MaxAttempts)):
				t.Errorf("%s: dead letter Reason = %q; want the last attempt's error", m.ID, dl.Reason)
			}
		}
	})

	t.Run("DeadLetterHandlerFailureRetries", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		msgs := BrokerMessages("deadretry", 1)
		publish(t, b, msgs)
		stop := runConsumer(t, b, seckill.ConsumeOptions{}, func(ctx context.Context, batch []seckill.Delivery) {
			for _, d := range batch {
				d.Retry(errors.New("database down"))
			}
		})
		var mu sync.Mutex
		var calls []seckill.DeadLetter
		stopDead := runDeadConsumer(t, b, seckill.ConsumeOptions{}, func(ctx context.Context, batch []seckill.DeadLetter) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, batch...)
			if len(calls) == 1 {
				return errors.New("failed_orders insert failed")
			}
			return nil
		})
		n := func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }
		servicetest.WaitFor(t, brokerPatience, "the dead letter to come back after its handler failed", func() bool { return n() >= 2 })
		time.Sleep(2*BrokerAckWait + BrokerRetry.MaxBackoff)
		stop()
		stopDead()
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 2 {
			t.Fatalf("dead-letter handler saw %d letters; want 2 (failed once, then accepted)", len(calls))
		}
		for _, dl := range calls {
			if dl.Message.ID != msgs[0].ID || !bytes.Equal(dl.Message.Body, msgs[0].Body) {
				t.Errorf("dead letter %q %q; want %q %q", dl.Message.ID, dl.Message.Body, msgs[0].ID, msgs[0].Body)
			}
			if dl.Attempts != BrokerRetry.MaxAttempts || !strings.Contains(dl.Reason, "database down") {
				t.Errorf("dead letter Attempts=%d Reason=%q; want %d and the last error", dl.Attempts, dl.Reason, BrokerRetry.MaxAttempts)
			}
		}
	})

	t.Run("CompetingConsumersShareTheWork", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		rec := newBrokerRecorder()
		opts := seckill.ConsumeOptions{BatchSize: 10, Linger: 10 * time.Millisecond}
		stopA := runConsumer(t, b, opts, rec.ackAll)
		stopB := runConsumer(t, b, opts, rec.ackAll)
		msgs := BrokerMessages("compete", 200)
		publish(t, b, msgs)
		servicetest.WaitFor(t, brokerPatience, "every message to arrive", func() bool { return rec.seenAll(msgs) })
		time.Sleep(2 * BrokerAckWait)
		stopA()
		stopB()
		rec.wantIntact(t, msgs)
		rec.wantDeliveries(t, msgs, 1)
	})

	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		ctx, b := context.Background(), newBroker(t)
		running := make(chan error, 1)
		go func() {
			running <- b.Consume(ctx, seckill.ConsumeOptions{}, func(context.Context, []seckill.Delivery) {})
		}()
		time.Sleep(100 * time.Millisecond) // let it subscribe and wait
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		select {
		case err := <-running:
			if !errors.Is(err, seckill.ErrClosed) {
				t.Errorf("Consume running at Close returned %v; want ErrClosed", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("Consume still running 3s after Close")
		}
		if err := b.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := b.Publish(ctx, BrokerMessages("closed", 1)); err == nil {
			t.Error("Publish after Close = nil; want an error")
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := b.Consume(cctx, seckill.ConsumeOptions{}, func(context.Context, []seckill.Delivery) {}); !errors.Is(err, seckill.ErrClosed) {
			t.Errorf("Consume after Close = %v; want ErrClosed", err)
		}
		if err := b.ConsumeDeadLetters(cctx, seckill.ConsumeOptions{}, func(context.Context, []seckill.DeadLetter) error { return nil }); !errors.Is(err, seckill.ErrClosed) {
			t.Errorf("ConsumeDeadLetters after Close = %v; want ErrClosed", err)
		}
	})
}

// brokerMessages returns n reservation events as messages, with ids and
// bodies unique to this call.
// publish publishes msgs on b, failing the test on an error.
func publish(t *testing.T, b seckill.Broker, msgs []seckill.Message) {
	t.Helper()
	if err := b.Publish(context.Background(), msgs); err != nil {
		t.Fatalf("Publish %d: %v", len(msgs), err)
	}
}

// BrokerMessages returns n reservation events of a sale "brk_"+tag, each
// under a fresh reservation id, as the relay publishes them.
func BrokerMessages(tag string, n int) []seckill.Message {
	now := time.Now().UTC().Truncate(time.Millisecond)
	msgs := make([]seckill.Message, n)
	for i := range msgs {
		ev := seckill.ReservationEvent{
			ReservationID: seckill.NewReservationID("brk_"+tag, now),
			SaleID:        "brk_" + tag,
			UserID:        fmt.Sprintf("user-%d", i),
			Qty:           int64(i%3 + 1),
			ReservedAt:    now,
		}
		m, err := brokerpack.EventMessage(ev)
		if err != nil {
			panic(err) // a plain struct always encodes
		}
		msgs[i] = m
	}
	return msgs
}

// runConsumer runs b.Consume until the returned stop is called (or the test
// ends). stop cancels the consumer and fails the test unless Consume
// returns nil promptly.
func runConsumer(t *testing.T, b seckill.Broker, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery)) (stop func()) {
	t.Helper()
	return runUntilStopped(t, "Consume", func(ctx context.Context) error { return b.Consume(ctx, opts, handle) })
}

func runDeadConsumer(t *testing.T, b seckill.Broker, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.DeadLetter) error) (stop func()) {
	t.Helper()
	return runUntilStopped(t, "ConsumeDeadLetters", func(ctx context.Context) error { return b.ConsumeDeadLetters(ctx, opts, handle) })
}

func runUntilStopped(t *testing.T, name string, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s returned %v after its context was cancelled; want nil", name, err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("%s still running 10s after its context was cancelled", name)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func seqInts(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// brokerTry is one delivery as a handler saw it.
type brokerTry struct {
	attempt int
	at      time.Time
	body    []byte
}

func attemptsOf(tries []brokerTry) []int {
	out := make([]int, len(tries))
	for i, tr := range tries {
		out[i] = tr.attempt
	}
	return out
}

// brokerRecorder remembers what handlers were given.
type brokerRecorder struct {
	mu      sync.Mutex
	tries   map[string][]brokerTry
	batches []int
	dead    map[string]seckill.DeadLetter
	nDead   int
}

func newBrokerRecorder() *brokerRecorder {
	return &brokerRecorder{tries: map[string][]brokerTry{}, dead: map[string]seckill.DeadLetter{}}
}

func (r *brokerRecorder) record(batch []seckill.Delivery) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, len(batch))
	for _, d := range batch {
		m := d.Message()
		r.tries[m.ID] = append(r.tries[m.ID], brokerTry{d.Attempt(), now, bytes.Clone(m.Body)})
	}
}

func (r *brokerRecorder) ackAll(_ context.Context, batch []seckill.Delivery) {
	r.record(batch)
	for _, d := range batch {
		d.Ack()
	}
}

func (r *brokerRecorder) takeDead(_ context.Context, batch []seckill.DeadLetter) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, dl := range batch {
		r.dead[dl.Message.ID] = dl
		r.nDead++
	}
	return nil
}

func (r *brokerRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nDead
}

func (r *brokerRecorder) letters() map[string]seckill.DeadLetter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]seckill.DeadLetter, len(r.dead))
	for k, v := range r.dead {
		out[k] = v
	}
	return out
}

func (r *brokerRecorder) seenAll(msgs []seckill.Message) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		if len(r.tries[m.ID]) == 0 {
			return false
		}
	}
	return true
}

func (r *brokerRecorder) triesOf(id string) []brokerTry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]brokerTry(nil), r.tries[id]...)
}

func (r *brokerRecorder) attemptsByID() map[string][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int, len(r.tries))
	for id, tries := range r.tries {
		out[id] = attemptsOf(tries)
	}
	return out
}

func (r *brokerRecorder) batchSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...)
}

// wantIntact checks that every delivery carried a published id and its
// body unchanged.
func (r *brokerRecorder) wantIntact(t *testing.T, msgs []seckill.Message) {
	t.Helper()
	bodies := make(map[string][]byte, len(msgs))
	for _, m := range msgs {
		bodies[m.ID] = m.Body
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for id, tries := range r.tries {
		want, ok := bodies[id]
		for _, tr := range tries {
			if (!ok || !bytes.Equal(tr.body, want)) && bad < 5 {
				t.Errorf("delivery %q: body %q; want %q", id, tr.body, want)
				bad++
			}
		}
	}
}

// wantDeliveries checks that each message was delivered exactly n times.
func (r *brokerRecorder) wantDeliveries(t *testing.T, msgs []seckill.Message, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for _, m := range msgs {
		if got := len(r.tries[m.ID]); got != n && bad < 5 {
			t.Errorf("%s delivered %d times; want %d", m.ID, got, n)
			bad++
		}
	}
}

// BrokerNamespaces exercises two deployments on one queue or stream:
// newPair returns two brokers on the same (fresh) queue, built like the
// Broker suite's, mine with namespace "ns_mine" and theirs with "ns_theirs".
// A consumer leaves the other namespace's messages alone, reports them to
// OnForeign, and never fails them: their owner receives each one, intact,
// at attempt 1.
func BrokerNamespaces(t *testing.T, newPair func(t *testing.T) (mine, theirs seckill.Broker)) {
	t.Helper()
	ctx := context.Background()
	mine, theirs := newPair(t)
	ours, others := BrokerMessages("ns_mine", 5), BrokerMessages("ns_theirs", 7)
	if err := theirs.Publish(ctx, others); err != nil {
		t.Fatalf("Publish theirs: %v", err)
	}
	if err := mine.Publish(ctx, ours); err != nil {
		t.Fatalf("Publish mine: %v", err)
	}

	var mu sync.Mutex
	foreign := map[string]int{}
	recMine := newBrokerRecorder()
	stopMine := runConsumer(t, mine, seckill.ConsumeOptions{OnForeign: func(ns string, events int) {
		mu.Lock()
		defer mu.Unlock()
		foreign[ns] += events
	}}, recMine.ackAll)
	servicetest.WaitFor(t, brokerPatience, "our messages to arrive and theirs to be seen and left", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return recMine.seenAll(ours) && foreign["ns_theirs"] >= len(others)
	})
	stopMine()
	recMine.wantIntact(t, ours)
	recMine.wantDeliveries(t, ours, 1)
	if n := len(recMine.attemptsByID()); n != len(ours) {
		t.Errorf("our handler saw %d messages; want only our %d", n, len(ours))
	}

	recTheirs := newBrokerRecorder()
	stopTheirs := runConsumer(t, theirs, seckill.ConsumeOptions{}, recTheirs.ackAll)
	servicetest.WaitFor(t, brokerPatience, "their messages to reach their owner", func() bool { return recTheirs.seenAll(others) })
	stopTheirs()
	recTheirs.wantIntact(t, others)
	for id, attempts := range recTheirs.attemptsByID() {
		if attempts[0] != 1 {
			t.Errorf("%s: their owner got it at attempt %v; want 1 (left alone, not failed)", id, attempts)
		}
	}
	for id := range recTheirs.attemptsByID() {
		if len(recMine.triesOf(id)) > 0 {
			t.Errorf("%s: our handler saw a message of theirs", id)
		}
	}
}
