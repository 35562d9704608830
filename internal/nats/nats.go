// Package nats is the NATS JetStream adapter of the broker port
// (seckill.Broker), on an external server by URL or on one embedded in the
// process (StartEmbedded).
//
// For a stream S:
//
//	stream S       subject S.msgs, file storage, work-queue retention: a
//	               message lives until a consumer acks it; Nats-Msg-Id is
//	               the reservation id, so a re-published event within the
//	               duplicate window is stored once
//	consumer work  durable pull consumer on S: explicit acks; a delivery
//	               not settled within AckWait (a crashed consumer) is
//	               redelivered
//	stream S_dead  subject S.dead, the dead letters, with durable consumer dead
//
// A failed attempt is NAKed with the policy's delay (NakWithDelay), which
// is the back-off. After MaxAttempts the adapter itself publishes a copy to
// S.dead and, once JetStream has stored it, acks the original.
//
// Two consumer settings are left alone on purpose. MaxDeliver is
// unlimited: at MaxDeliver the server merely stops delivering, and the
// message would sit in the stream seen by no one, whereas the adapter's own
// limit cannot strand a message even when the dead-letter publish fails
// (a message delivered more than MaxAttempts times is dead-lettered on
// arrival). BackOff is unset: the server uses it in place of AckWait as the
// deadline of each delivery, so it would also stretch every NakWithDelay by
// BackOff[n]-AckWait (measured: a 400ms retry arriving after 7s), and servers
// before 2.10 refuse it with an unlimited MaxDeliver.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-dev/seckill"
)

// Headers on dead-letter copies.
const (
	hdrAttempts = "Seckill-Attempts"
	hdrReason   = "Seckill-Reason"
)

const (
	workConsumer = "work"
	deadConsumer = "dead"
	// publishChunk bounds the asynchronous publishes awaiting acks from one
	// call, well inside the client's pending limit.
	publishChunk = 2048
	// idlePoll is how long one pull request waits for a first message.
	idlePoll = 5 * time.Second
	// settleTimeout bounds the dead-letter publishes that settle a batch.
	settleTimeout = 30 * time.Second
)

// Option configures a Broker.
type Option func(*config)

type config struct {
	retry          seckill.RetryPolicy
	logger         *slog.Logger
	ackWait        time.Duration
	replicas       int
	publishTimeout time.Duration
}

// WithRetryPolicy sets the attempt limit and back-off (default
// seckill.DefaultRetryPolicy).
func WithRetryPolicy(p seckill.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithLogger sets where consumer errors are logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithAckWait sets how long a delivery may go without word from its
// consumer before JetStream hands it to another (default 30s). A slow
// handler is not at risk: the adapter reports progress every AckWait/3.
func WithAckWait(d time.Duration) Option { return func(c *config) { c.ackWait = d } }

// WithReplicas sets the streams' replica count on a clustered server
// (default 1).
func WithReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// Broker is a seckill.Broker on one JetStream stream. Safe for concurrent
// use.
type Broker struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	cfg     config
	stream  string
	subject string
	dead    string // dead-letter stream
	deadSub string
	work    jetstream.Consumer
	deadC   jetstream.Consumer

	closeOnce sync.Once
	closed    chan struct{}
	life      context.Context // cancelled by Close, to end pending fetches
	endLife   context.CancelFunc
}

var _ seckill.Broker = (*Broker)(nil)

// New connects to the NATS server at url, creates or updates the streams
// and consumers for stream, and returns a Broker. The connection redials on
// its own after a loss.
func New(ctx context.Context, url, stream string, opts ...Option) (*Broker, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, cfg.connectOptions(stream)...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	b, err := newBroker(ctx, nc, stream, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

func newConfig(opts []Option) (config, error) {
	cfg := config{
		retry:          seckill.DefaultRetryPolicy(),
		logger:         slog.New(slog.DiscardHandler),
		ackWait:        30 * time.Second,
		replicas:       1,
		publishTimeout: 10 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.retry.Validate(); err != nil {
		return cfg, fmt.Errorf("nats: %w", err)
	}
	if cfg.ackWait < 100*time.Millisecond {
		return cfg, fmt.Errorf("nats: AckWait must be at least 100ms, got %s", cfg.ackWait)
	}
	return cfg, nil
}

// connectOptions keep the connection redialing forever and send its
// trouble to the logger (nats.go would print it to stderr).
func (c config) connectOptions(stream string) []nats.Option {
	return []nats.Option{
		nats.Name("seckill broker " + stream),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.logger.Warn("nats: asynchronous error", "stream", stream, "err", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				c.logger.Warn("nats: disconnected; reconnecting", "stream", stream, "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.logger.Info("nats: reconnected", "stream", stream)
		}),
	}
}

func newBroker(ctx context.Context, nc *nats.Conn, stream string, cfg config) (*Broker, error) {
	// Stream names may not hold '.', '*', '>' or spaces; the subjects
	// derived from it must be single tokens.
	if stream == "" || len(stream) > 200 || strings.ContainsAny(stream, ".*> \t\r\n/\\") {
		return nil, fmt.Errorf("nats: bad stream name %q", stream)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cfg.publishTimeout))
	if err != nil {
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	b := &Broker{
		nc:      nc,
		js:      js,
		cfg:     cfg,
		stream:  stream,
		subject: stream + ".msgs",
		dead:    stream + "_dead",
		deadSub: stream + ".dead",
		closed:  make(chan struct{}),
	}
	b.life, b.endLife = context.WithCancel(context.Background())
	for _, s := range []jetstream.StreamConfig{
		{Name: b.stream, Subjects: []string{b.subject}},
		{Name: b.dead, Subjects: []string{b.deadSub}},
	} {
		s.Retention = jetstream.WorkQueuePolicy
		s.Storage = jetstream.FileStorage
		s.Replicas = cfg.replicas
		if _, err := js.CreateOrUpdateStream(ctx, s); err != nil {
			return nil, fmt.Errorf("nats: stream %s: %w", s.Name, err)
		}
	}
	for _, c := range []struct {
		stream, name string
		dst          *jetstream.Consumer
	}{{b.stream, workConsumer, &b.work}, {b.dead, deadConsumer, &b.deadC}} {
		cons, err := js.CreateOrUpdateConsumer(ctx, c.stream, jetstream.ConsumerConfig{
			Durable:    c.name,
			AckPolicy:  jetstream.AckExplicitPolicy,
			AckWait:    cfg.ackWait,
			MaxDeliver: -1,
		})
		if err != nil {
			return nil, fmt.Errorf("nats: consumer %s on %s: %w", c.name, c.stream, err)
		}
		*c.dst = cons
	}
	return b, nil
}

func (b *Broker) isClosed() bool {
	select {
	case <-b.closed:
		return true
	default:
		return false
	}
}

// Close flushes pending acks and closes the connection. Safe to call twice.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.endLife()
		if b.nc.IsConnected() {
			_ = b.nc.FlushTimeout(time.Second)
		}
		b.nc.Close()
	})
	return nil
}

// Publish stores msgs on the stream, sending them all before awaiting the
// acks (one round), and returns nil only when JetStream has acknowledged
// every one. The reservation id is the Nats-Msg-Id.
func (b *Broker) Publish(ctx context.Context, msgs []seckill.Message) error {
	if b.isClosed() {
		return fmt.Errorf("nats: publish: %w", seckill.ErrClosed)
	}
	for len(msgs) > 0 {
		n := min(len(msgs), publishChunk)
		out := make([]*nats.Msg, n)
		for i, m := range msgs[:n] {
			out[i] = &nats.Msg{Subject: b.subject, Data: m.Body, Header: nats.Header{jetstream.MsgIDHeader: []string{m.ID}}}
		}
		if err := b.send(ctx, b.stream, out); err != nil {
			return fmt.Errorf("nats: publish: %w", err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// send publishes out asynchronously and waits for every ack. Each message
// names the stream it expects, so one that no stream (or the wrong one)
// captures fails instead of vanishing.
func (b *Broker) send(ctx context.Context, stream string, out []*nats.Msg) error {
	futures := make([]jetstream.PubAckFuture, 0, len(out))
	for _, m := range out {
		f, err := b.js.PublishMsgAsync(m, jetstream.WithExpectStream(stream))
		if err != nil {
			return fmt.Errorf("send message %d of %d: %w", len(futures)+1, len(out), err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("message %d of %d not stored: %w", i+1, len(out), err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for acks: %w", ctx.Err())
		}
	}
	return nil
}

// Consume implements seckill.Broker.
func (b *Broker) Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.Delivery)) error {
	return b.consumeLoop(ctx, b.work, opts.WithDefaults(), func(ctx context.Context, msgs []jetstream.Msg) {
		b.handleWork(ctx, msgs, handle)
	})
}

// ConsumeDeadLetters implements seckill.Broker.
func (b *Broker) ConsumeDeadLetters(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.DeadLetter) error) error {
	return b.consumeLoop(ctx, b.deadC, opts.WithDefaults(), func(ctx context.Context, msgs []jetstream.Msg) {
		b.handleDead(ctx, msgs, handle)
	})
}

func (b *Broker) consumeLoop(ctx context.Context, cons jetstream.Consumer, opts seckill.ConsumeOptions, process func(context.Context, []jetstream.Msg)) error {
	// Fetches end when ctx does or the broker closes; handlers see ctx.
	fetchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.life, cancel)()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if b.isClosed() {
			return seckill.ErrClosed
		}
		batch, err := fetchBatch(fetchCtx, cons, opts)
		if b.isClosed() && ctx.Err() == nil {
			return seckill.ErrClosed
		}
		if ctx.Err() != nil {
			// Fetched but never handed out: let another consumer have
			// them now rather than after AckWait.
			for _, m := range batch {
				_ = m.Nak()
			}
			return nil
		}
		if err != nil {
			for _, m := range batch {
				_ = m.Nak()
			}
			if b.isClosed() {
				return seckill.ErrClosed
			}
			b.cfg.logger.Warn("nats: fetch failed; retrying", "stream", b.stream, "err", err)
			select {
			case <-time.After(250 * time.Millisecond):
			case <-ctx.Done():
			case <-b.closed:
			}
			continue
		}
		if len(batch) > 0 {
			process(ctx, batch)
		}
	}
}

// fetchBatch waits (a while) for a first message, then gathers up to
// opts.BatchSize with one more pull request that lasts opts.Linger.
func fetchBatch(ctx context.Context, cons jetstream.Consumer, opts seckill.ConsumeOptions) ([]jetstream.Msg, error) {
	fctx, cancel := context.WithTimeout(ctx, idlePoll)
	defer cancel()
	first, err := cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return nil, err
	}
	var batch []jetstream.Msg
	for m := range first.Messages() {
		batch = append(batch, m)
	}
	if err := first.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return batch, err
	}
	if len(batch) == 0 || opts.BatchSize <= 1 || ctx.Err() != nil {
		return batch, nil
	}
	rest, err := cons.Fetch(opts.BatchSize-len(batch), jetstream.FetchMaxWait(opts.Linger))
	if err != nil {
		return batch, nil // the first message is worth handling anyway
	}
	for m := range rest.Messages() {
		batch = append(batch, m)
	}
	return batch, nil
}

// keepAlive tells JetStream that msgs are still being worked on, every
// AckWait/3, until the returned stop is called: a slow database must not
// make the batch look abandoned.
func (b *Broker) keepAlive(msgs []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(b.cfg.ackWait / 3)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				for _, m := range msgs {
					_ = m.InProgress()
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// delivery implements seckill.Delivery; the embedded Settlement holds
// the handler's decision.
type delivery struct {
	seckill.Settlement
	msg     seckill.Message
	attempt int
	raw     jetstream.Msg
}

func (d *delivery) Message() seckill.Message { return d.msg }
func (d *delivery) Attempt() int             { return d.attempt }

// handleWork runs the handler on a batch and settles it: acks, NAKs with
// the back-off delay, and dead-letter copies (stored before their
// originals are acked) once MaxAttempts is spent.
func (b *Broker) handleWork(ctx context.Context, msgs []jetstream.Msg, handle func(context.Context, []seckill.Delivery)) {
	policy := b.cfg.retry
	all := make([]*delivery, len(msgs))
	var batch []seckill.Delivery
	for i, m := range msgs {
		attempt := 1
		if md, err := m.Metadata(); err == nil {
			attempt = int(md.NumDelivered)
		}
		d := &delivery{msg: seckill.Message{ID: m.Headers().Get(jetstream.MsgIDHeader), Body: m.Data()}, attempt: attempt, raw: m}
		all[i] = d
		if attempt > policy.MaxAttempts {
			// Earlier deliveries were lost without a decision (a consumer
			// crashing on this message?): it has had its chances.
			d.Decide(seckill.Retried, fmt.Sprintf("delivered %d times without being settled", attempt-1))
			d.attempt--
			continue
		}
		batch = append(batch, d)
	}
	if len(batch) > 0 {
		stop := b.keepAlive(msgs)
		handle(ctx, batch)
		stop()
	}
	live := ctx.Err() == nil

	var dead []*delivery
	var out []*nats.Msg
	for _, d := range all {
		state, reason := d.Freeze()
		switch state {
		case seckill.Acked:
			_ = d.raw.Ack()
			continue
		case seckill.Unsettled:
			if !live {
				continue // abandoned: redelivered after AckWait, like a crash
			}
			reason = "handler returned without settling the delivery"
		}
		if d.attempt < policy.MaxAttempts {
			_ = d.raw.NakWithDelay(policy.Delay(d.attempt))
			continue
		}
		dead = append(dead, d)
		out = append(out, &nats.Msg{Subject: b.deadSub, Data: d.msg.Body, Header: nats.Header{
			jetstream.MsgIDHeader: []string{d.msg.ID},
			hdrAttempts:           []string{strconv.Itoa(d.attempt)},
			hdrReason:             []string{headerSafe(reason)},
		}})
	}
	if len(out) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := b.send(sctx, b.dead, out); err != nil {
		// Comes back as attempt MaxAttempts+1, which dead-letters it
		// without bothering the handler again.
		b.cfg.logger.Error("nats: cannot store dead letters; will retry", "stream", b.dead, "count", len(dead), "err", err)
		for _, d := range dead {
			_ = d.raw.NakWithDelay(policy.Backoff)
		}
		return
	}
	for _, d := range dead {
		_ = d.raw.Ack()
	}
}

// headerSafe makes s fit in a NATS header value: one line, bounded.
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 2048 {
		s = s[:2048]
	}
	return s
}

// handleDead hands dead letters to handle: acked on success, NAKed with a
// back-off on failure.
func (b *Broker) handleDead(ctx context.Context, msgs []jetstream.Msg, handle func(context.Context, []seckill.DeadLetter) error) {
	letters := make([]seckill.DeadLetter, len(msgs))
	for i, m := range msgs {
		h := m.Headers()
		attempts, _ := strconv.Atoi(h.Get(hdrAttempts))
		letters[i] = seckill.DeadLetter{
			Message:  seckill.Message{ID: h.Get(jetstream.MsgIDHeader), Body: m.Data()},
			Attempts: attempts,
			Reason:   h.Get(hdrReason),
		}
	}
	stop := b.keepAlive(msgs)
	err := handle(ctx, letters)
	stop()
	if err == nil {
		for _, m := range msgs {
			_ = m.Ack()
		}
		return
	}
	if ctx.Err() != nil {
		return // abandoned, like a crash
	}
	b.cfg.logger.Warn("nats: dead-letter handler failed; retrying later", "stream", b.dead, "count", len(msgs), "err", err)
	for _, m := range msgs {
		_ = m.NakWithDelay(b.cfg.retry.Delay(b.cfg.retry.MaxAttempts))
	}
}
