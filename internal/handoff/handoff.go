// Package handoff is the broker (seckill.Broker) of a process that runs
// both the relay and the order writer, as the embedded default does: a
// Publish hands its batch straight to a consumer of this process and
// returns once that consumer has settled every event, which for the order
// writer means its transaction committed. The relay deletes outbox entries
// only after Publish returns nil, so an entry leaves the outbox only once
// the database has its order: a crash in between leaves it in the outbox,
// to be published again (the writer deduplicates on the reservation id).
//
// What the handler does not settle at once goes to the durable broker the
// handoff wraps (the embedded JetStream), exactly as that broker would have
// stored it: retry copies held back by the retry policy's delay, dead
// letters, and the batch of a consumer that stopped holding it. So does a
// batch that no consumer of this process takes within Config.Wait (none is
// running, or all are busy: the writer cannot keep up), and one whose
// consumer has held it for Config.Hold (a database outage the writer is
// waiting out) — the handoff then degrades to the broker it wraps, and a
// late verdict of the handed batch is dropped (its events were stored
// whole; the writer deduplicates). Every Consume also consumes the durable
// broker, so what went there comes back: dead letters, namespaces and
// redelivery are that broker's.
//
// The win is what a broker round trip costs in one process: the store
// and delete of every batch in JetStream's files, the client's acks, and
// the encoding, none of which a claim needs when the writer is a function
// call away.
package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Durable is the broker a handoff falls back on: a seckill.Broker that can
// also store events carrying the attempts they had, held back until a
// time, and dead letters (internal/nats has both).
type Durable interface {
	seckill.Broker
	// Requeue stores events to be consumed no sooner than notBefore, each
	// counting as the attempt its Attempt says.
	Requeue(ctx context.Context, events []brokerpack.PackedMessage, notBefore time.Time) error
	// DeadLetter stores letters for ConsumeDeadLetters.
	DeadLetter(ctx context.Context, letters []seckill.DeadLetter) error
}

// Config tunes a Broker. Zero values take the defaults.
type Config struct {
	// Retry is the policy of the durable broker, which the handoff applies
	// to the first attempt it hands out itself. Default
	// brokerpack.DefaultRetryPolicy.
	Retry brokerpack.RetryPolicy
	// Wait is how long a Publish waits for a consumer of this process to
	// take its batch before storing it on the durable broker. Default 1s.
	Wait time.Duration
	// Hold is how long a Publish waits for the consumer that took its
	// batch to settle it before storing it on the durable broker as well.
	// Default 10s.
	Hold time.Duration
	// Logger is told when a batch goes to the durable broker for want of
	// a consumer.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Retry.MaxAttempts == 0 {
		c.Retry = brokerpack.DefaultRetryPolicy()
	}
	if c.Wait <= 0 {
		c.Wait = time.Second
	}
	if c.Hold <= 0 {
		c.Hold = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// settleTimeout bounds the durable stores that settle one batch.
const settleTimeout = 30 * time.Second

// Broker is a handoff in front of a durable broker. Safe for concurrent
// use.
type Broker struct {
	durable Durable
	cfg     Config

	offers    chan *offer // unbuffered: a send succeeds when a consumer takes it
	closed    chan struct{}
	closeOnce sync.Once
}

var _ seckill.Broker = (*Broker)(nil)

// offer is one Publish's batch in the hands of a consumer.
type offer struct {
	msgs []seckill.Message
	// done receives the consumer's verdict once: nil when every event is
	// settled (acked, or its retry copy or dead letter stored),
	// errAbandoned when the consumer stopped holding it, or the error of
	// storing the copies.
	done chan error
	// orphaned is set by a Publish that stopped waiting and stored the
	// batch whole: the consumer then stores no copies.
	orphaned atomic.Bool
}

var (
	errAbandoned = errors.New("handoff: the consumer stopped before settling the batch")
	errNotTaken  = errors.New("handoff: the consumer stopped before handing the batch out")
)

// New returns a handoff in front of durable. Closing it closes durable.
func New(durable Durable, cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Retry.Validate(); err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	return &Broker{durable: durable, cfg: cfg, offers: make(chan *offer), closed: make(chan struct{})}, nil
}

func (b *Broker) isClosed() bool { return startstop.Closed(b.closed) }

// Publish hands msgs to a consumer of this process and returns once it has
// settled them, or stores them on the durable broker (see the package
// comment for when).
func (b *Broker) Publish(ctx context.Context, msgs []seckill.Message) error {
	if b.isClosed() {
		return fmt.Errorf("handoff: publish: %w", seckill.ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	o := &offer{msgs: msgs, done: make(chan error, 1)}
	wait := time.NewTimer(b.cfg.Wait)
	defer wait.Stop()
	select {
	case b.offers <- o:
	case <-wait.C:
		b.cfg.Logger.Debug("handoff: no consumer free; storing the batch on the durable broker", "events", len(msgs))
		return b.durable.Publish(ctx, msgs)
	case <-ctx.Done():
		return fmt.Errorf("handoff: publish: %w", ctx.Err())
	case <-b.closed:
		return fmt.Errorf("handoff: publish: %w", seckill.ErrClosed)
	}
	hold := time.NewTimer(b.cfg.Hold)
	defer hold.Stop()
	select {
	case err := <-o.done:
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errNotTaken):
			return b.durable.Publish(ctx, msgs)
		case errors.Is(err, errAbandoned):
			// As a broker counts a crash: the next delivery is attempt 2.
			return b.durable.Requeue(ctx, brokerpack.Packed(msgs, 2), time.Time{})
		default:
			return fmt.Errorf("handoff: settle: %w", err)
		}
	case <-hold.C:
		b.cfg.Logger.Warn("handoff: a consumer has held a batch too long; storing it on the durable broker too", "events", len(msgs), "held", b.cfg.Hold)
	case <-ctx.Done():
	}
	o.orphaned.Store(true)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("handoff: publish: %w", err)
	}
	return b.durable.Publish(ctx, msgs)
}

// Consume hands handle the batches published in this process and those of
// the durable broker, one batch at a time, until ctx ends (nil) or the
// broker is closed (ErrClosed).
func (b *Broker) Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.Delivery)) error {
	if b.isClosed() {
		return seckill.ErrClosed
	}
	opts = opts.WithDefaults()
	var one sync.Mutex
	serial := func(ctx context.Context, batch []seckill.Delivery) {
		one.Lock()
		defer one.Unlock()
		handle(ctx, batch)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	durable := make(chan error, 1)
	go func() { durable <- b.durable.Consume(ctx, opts, serial) }()
	for {
		select {
		case o := <-b.offers:
			one.Lock()
			b.serve(ctx, o, opts, handle)
			one.Unlock()
		case <-ctx.Done():
			<-durable
			return nil
		case <-b.closed:
			cancel()
			<-durable
			return seckill.ErrClosed
		case err := <-durable:
			if ctx.Err() != nil {
				return nil
			}
			return err // closed, or failed: the caller decides
		}
	}
}

// serve hands o's events to handle and settles o.
func (b *Broker) serve(ctx context.Context, o *offer, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery)) {
	if ctx.Err() != nil {
		o.done <- errNotTaken // taken as the consumer stopped: no attempt made
		return
	}
	all := make([]*brokerpack.PackDelivery, len(o.msgs))
	out := make([]seckill.Delivery, len(o.msgs))
	for i, m := range o.msgs {
		all[i] = &brokerpack.PackDelivery{Msg: m, N: 1}
		out[i] = all[i]
	}
	brokerpack.HandOut(ctx, out, opts.BatchSize, handle)
	v := brokerpack.Judge(all, b.cfg.Retry, ctx.Err() == nil)
	switch {
	case v.Abandon:
		o.done <- errAbandoned
		return
	case o.orphaned.Load():
		o.done <- nil // stored whole by its Publish; nobody listens
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	now := time.Now()
	for delay, run := range v.Retry {
		if err := b.durable.Requeue(sctx, run, now.Add(delay)); err != nil {
			o.done <- err
			return
		}
	}
	if len(v.Dead) > 0 {
		if err := b.durable.DeadLetter(sctx, v.Dead); err != nil {
			o.done <- err
			return
		}
	}
	o.done <- nil
}

// ConsumeDeadLetters is the durable broker's.
func (b *Broker) ConsumeDeadLetters(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.DeadLetter) error) error {
	if b.isClosed() {
		return seckill.ErrClosed
	}
	return b.durable.ConsumeDeadLetters(ctx, opts, handle)
}

// Ping checks the durable broker, if it can be checked.
func (b *Broker) Ping(ctx context.Context) error {
	if p, ok := b.durable.(interface{ Ping(context.Context) error }); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Backlog is what waits in the durable broker, if it can tell. A batch in
// a consumer's hands is not counted: until committed, it is still in the
// relay's outbox.
func (b *Broker) Backlog(ctx context.Context) (int64, error) {
	if d, ok := b.durable.(interface {
		Backlog(context.Context) (int64, error)
	}); ok {
		return d.Backlog(ctx)
	}
	return 0, nil
}

// Close stops the handoff and closes the durable broker. Safe to call
// twice.
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.closed)
		err = b.durable.Close()
	})
	return err
}
