// Package rabbitmq is the RabbitMQ adapter of the broker port
// (seckill.Broker).
//
// Topology, all durable quorum queues on the default exchange, for a queue Q:
//
//	Q               the work queue; persistent messages, publisher confirms
//	Q.retry.<ms>ms  one per back-off delay: x-message-ttl=<ms>, dead-letters
//	                back into Q, which is how a retry waits without a timer
//	                in any process
//	Q.dead          messages that failed RetryPolicy.MaxAttempts times
//
// A Publish of N events sends one message, a pack (brokerpack.EncodePack),
// which the consumer unpacks into N deliveries settled one by one. Each
// event's attempt count travels inside the pack, plus the quorum queue's
// x-delivery-count for deliveries of the pack lost to consumer crashes.
// Once the handler is done with a batch, the copies it needs (one retry
// pack per back-off delay, one dead letter per event that spent its
// attempts) are published in one confirm round, and then the batch is
// acked, with one multiple-ack when nothing in it is left to the broker.
//
// Every pack carries the namespace of the deployment that published it. A
// consumer of another namespace puts it back untouched through the longest
// retry queue (so two deployments on one queue do not spin) and acks its
// own delivery: the owner's attempt counts are not spent by strangers. The adapter redials on its own after a lost connection; publishes
// during the outage fail at once rather than wait or lie.
package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Headers the adapter sets on the copies it republishes.
const (
	hdrAttempt = "x-seckill-attempt" // attempt number the copy starts at
	hdrReason  = "x-seckill-reason"  // last failure, on dead letters
)

// maxIdleChannels bounds the pool of confirm-mode channels kept for reuse.
const maxIdleChannels = 8

// errNotConnected is returned by Publish while the adapter is redialing.
var errNotConnected = errors.New("not connected to rabbitmq (reconnecting)")

// Option configures a Broker.
type Option func(*config)

type config struct {
	retry        brokerpack.RetryPolicy
	logger       *slog.Logger
	reconnectMin time.Duration
	reconnectMax time.Duration
	dialTimeout  time.Duration
	heartbeat    time.Duration
	namespace    string
}

// WithNamespace sets the deployment's namespace, stamped on every pack
// published; packs of another namespace are left for their owner (default
// "default").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithRetryPolicy sets the attempt limit and back-off (default
// brokerpack.DefaultRetryPolicy). Each distinct delay gets its own retry queue.
func WithRetryPolicy(p brokerpack.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithLogger sets where connection losses and settle failures are logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithReconnectBackoff sets the wait between redial attempts after a lost
// connection: it starts at lo and doubles up to hi (default 100ms, 5s).
func WithReconnectBackoff(lo, hi time.Duration) Option {
	return func(c *config) { c.reconnectMin, c.reconnectMax = lo, hi }
}

// WithHeartbeat sets the AMQP heartbeat interval (default 5s, at least
// 1s). A consumer whose process dies without closing its socket (a host
// lost, a network cut) is noticed after about two missed heartbeats, and
// only then are its unacknowledged deliveries handed to another consumer;
// a killed process's socket closes at once and they come back at once.
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// Broker is a seckill.Broker on one RabbitMQ queue. Safe for concurrent use.
type Broker struct {
	url   string
	queue string
	dead  string
	cfg   config

	mu     sync.Mutex
	conn   *amqp.Connection // nil while redialing
	up     chan struct{}    // closed while conn is usable
	idle   []*pubChannel    // confirm-mode channels of conn, free for reuse
	closed bool

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

var _ seckill.Broker = (*Broker)(nil)

// New connects to url, declares the queues for queue (idempotently) and
// returns a Broker that stays connected until Close.
func New(ctx context.Context, url, queue string, opts ...Option) (*Broker, error) {
	cfg := config{
		retry:        brokerpack.DefaultRetryPolicy(),
		logger:       slog.New(slog.DiscardHandler),
		reconnectMin: 100 * time.Millisecond,
		reconnectMax: 5 * time.Second,
		dialTimeout:  5 * time.Second,
		heartbeat:    5 * time.Second,
		namespace:    "default",
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.heartbeat < time.Second {
		return nil, fmt.Errorf("rabbitmq: heartbeat must be at least 1s, got %s", cfg.heartbeat)
	}
	if err := cfg.retry.Validate(); err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	if cfg.namespace == "" || len(cfg.namespace) > 100 {
		return nil, fmt.Errorf("rabbitmq: namespace must be 1-100 bytes, got %q", cfg.namespace)
	}
	// 255 is AMQP's limit on queue names; leave room for the suffixes.
	if queue == "" || len(queue) > 200 {
		return nil, fmt.Errorf("rabbitmq: queue name must be 1-200 bytes, got %q", queue)
	}
	b := &Broker{
		url:   url,
		queue: queue,
		dead:  queue + ".dead",
		cfg:   cfg,
		up:    make(chan struct{}),
		done:  make(chan struct{}),
	}
	conn, err := b.dial(ctx)
	if err != nil {
		return nil, err
	}
	b.setUp(conn)
	b.wg.Add(1)
	go b.supervise(conn)
	return b, nil
}

// retryQueue names the queue that holds a message for d before handing it
// back to the work queue.
func (b *Broker) retryQueue(d time.Duration) string {
	return fmt.Sprintf("%s.retry.%dms", b.queue, d.Milliseconds())
}

type queueSpec struct {
	name string
	args amqp.Table
}

// topology lists every queue the broker uses. Quorum queues are replicated
// and fsync before confirming. Dead-lettering is at-least-once (which needs
// reject-publish overflow), so a message moving from a retry queue back to
// the work queue cannot be lost on the way.
func (b *Broker) topology() []queueSpec {
	quorum := func(extra amqp.Table) amqp.Table {
		t := amqp.Table{"x-queue-type": "quorum"}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	specs := []queueSpec{
		// The work queue dead-letters only if the server does it on its
		// own (RabbitMQ 4's default delivery limit): into Q.dead rather
		// than dropping the message.
		{b.queue, quorum(amqp.Table{
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": b.dead,
			"x-dead-letter-strategy":    "at-least-once",
			"x-overflow":                "reject-publish",
		})},
		{b.dead, quorum(nil)},
	}
	seen := map[string]bool{}
	for attempt := 1; attempt < b.cfg.retry.MaxAttempts; attempt++ {
		d := b.cfg.retry.Delay(attempt)
		name := b.retryQueue(d)
		if seen[name] {
			continue
		}
		seen[name] = true
		specs = append(specs, queueSpec{name, quorum(amqp.Table{
			"x-message-ttl":             d.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": b.queue,
			"x-dead-letter-strategy":    "at-least-once",
			"x-overflow":                "reject-publish",
		})})
	}
	return specs
}

// dial opens a connection and declares the topology on it.
func (b *Broker) dial(ctx context.Context) (*amqp.Connection, error) {
	dialer := &net.Dialer{Timeout: b.cfg.dialTimeout}
	conn, err := amqp.DialConfig(b.url, amqp.Config{
		Heartbeat:  b.cfg.heartbeat,
		Locale:     "en_US",
		Properties: amqp.Table{"connection_name": "seckill broker " + b.queue},
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// A deadline for the handshake; amqp091 clears it once open.
			return c, c.SetDeadline(time.Now().Add(b.cfg.dialTimeout))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: dial: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rabbitmq: open channel: %w", err)
	}
	defer ch.Close()
	for _, q := range b.topology() {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
			conn.Close()
			return nil, fmt.Errorf("rabbitmq: declare queue %s: %w", q.name, err)
		}
	}
	return conn, nil
}

// supervise waits for conn to die and redials until it succeeds or the
// broker is closed. It owns the connection's lifetime.
func (b *Broker) supervise(conn *amqp.Connection) {
	defer b.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		lost := conn.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case err := <-lost:
			b.setDown(conn)
			if b.isClosed() {
				return
			}
			b.cfg.logger.Warn("rabbitmq connection lost; reconnecting", "queue", b.queue, "err", err)
		case <-b.done:
			return
		}
		delay := b.cfg.reconnectMin
		for {
			select {
			case <-time.After(delay):
			case <-b.done:
				return
			}
			c, err := b.dial(ctx)
			if err == nil {
				conn = c
				break
			}
			b.cfg.logger.Warn("rabbitmq reconnect failed", "queue", b.queue, "err", err, "retry_in", delay)
			delay = min(delay*2, b.cfg.reconnectMax)
		}
		if !b.setUp(conn) {
			conn.Close()
			return
		}
		b.cfg.logger.Info("rabbitmq reconnected", "queue", b.queue)
	}
}

// setUp installs a fresh connection; false when the broker closed meanwhile.
func (b *Broker) setUp(conn *amqp.Connection) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conn = conn
	close(b.up)
	return true
}

// setDown forgets a dead connection and its pooled channels.
func (b *Broker) setDown(conn *amqp.Connection) {
	b.mu.Lock()
	if b.conn != conn {
		b.mu.Unlock()
		return
	}
	b.conn = nil
	b.up = make(chan struct{})
	idle := b.idle
	b.idle = nil
	b.mu.Unlock()
	for _, pc := range idle {
		pc.discard()
	}
}

// waitConn returns the live connection, waiting through an outage. It
// returns ctx.Err() or seckill.ErrClosed when waiting is over.
func (b *Broker) waitConn(ctx context.Context) (*amqp.Connection, error) {
	for {
		b.mu.Lock()
		conn, up, closed := b.conn, b.up, b.closed
		b.mu.Unlock()
		switch {
		case closed:
			return nil, seckill.ErrClosed
		case conn != nil && !conn.IsClosed():
			return conn, nil
		}
		select {
		case <-up:
		case <-b.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *Broker) isClosed() bool { return startstop.Closed(b.done) }

// Close closes the connection and stops reconnecting. Consumers return
// seckill.ErrClosed. Safe to call twice.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	conn, idle := b.conn, b.idle
	b.conn, b.idle = nil, nil
	close(b.done)
	b.mu.Unlock()

	for _, pc := range idle {
		pc.discard()
	}
	var err error
	if conn != nil && !conn.IsClosed() {
		if err = conn.Close(); errors.Is(err, amqp.ErrClosed) {
			err = nil
		}
	}
	b.wg.Wait()
	if err != nil {
		return fmt.Errorf("rabbitmq: close: %w", err)
	}
	return nil
}

// pubChannel is a confirm-mode channel used by one publish at a time, so
// the returns and confirms it sees belong to that publish alone.
type pubChannel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
}

// discard closes the channel without making the caller wait for the
// server's close-ok (a dead peer may take a heartbeat timeout to notice).
// The connection's reader goroutine may still be blocked handing it a
// basic.return, so returns are drained until the channel is gone.
func (pc *pubChannel) discard() {
	go func() {
		for range pc.returns {
		}
	}()
	go func() { _ = pc.ch.Close() }()
}

func (b *Broker) acquire() (*pubChannel, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, seckill.ErrClosed
	}
	conn := b.conn
	if conn == nil || conn.IsClosed() {
		b.mu.Unlock()
		return nil, errNotConnected
	}
	if n := len(b.idle); n > 0 {
		pc := b.idle[n-1]
		b.idle = b.idle[:n-1]
		b.mu.Unlock()
		return pc, nil
	}
	b.mu.Unlock()

	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("enable confirms: %w", err)
	}
	// The buffer lets the reader goroutine hand over a few returns while
	// the publisher is still sending; beyond it the reader waits for the
	// publisher, which reads returns while it waits for confirms.
	returns := ch.NotifyReturn(make(chan amqp.Return, 64))
	return &pubChannel{conn: conn, ch: ch, returns: returns}, nil
}

func (b *Broker) release(pc *pubChannel, healthy bool) {
	b.mu.Lock()
	if healthy && !b.closed && pc.conn == b.conn && !pc.ch.IsClosed() && len(b.idle) < maxIdleChannels {
		b.idle = append(b.idle, pc)
		pc = nil
	}
	b.mu.Unlock()
	if pc != nil {
		pc.discard()
	}
}

// outgoing is one message for one queue.
type outgoing struct {
	queue string
	msg   amqp.Publishing
}

// Publish sends msgs to the work queue as persistent packs (one message
// per brokerpack.MaxPackEvents) and waits for the broker's confirms once for
// the whole slice. It returns nil only if every pack was confirmed and
// routed to the queue.
func (b *Broker) Publish(ctx context.Context, msgs []seckill.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	packed := make([]brokerpack.PackedMessage, len(msgs))
	for i, m := range msgs {
		packed[i] = brokerpack.PackedMessage{Message: m, Attempt: 1}
	}
	var out []outgoing
	for _, run := range brokerpack.SplitPacks(packed) {
		out = append(out, b.pack(b.queue, run))
	}
	if err := b.send(ctx, out); err != nil {
		return fmt.Errorf("rabbitmq: publish: %w", err)
	}
	return nil
}

// pack is one pack of run for queue.
func (b *Broker) pack(queue string, run []brokerpack.PackedMessage) outgoing {
	return outgoing{queue, amqp.Publishing{
		MessageId:    brokerpack.PackID(run),
		DeliveryMode: amqp.Persistent,
		Timestamp:    time.Now(),
		Body:         brokerpack.EncodePack(b.cfg.namespace, run),
	}}
}

// send publishes out on one confirm-mode channel and waits for every
// confirm. Messages are mandatory: one the broker cannot route (its queue
// deleted) comes back as basic.return before its ack and fails the call.
func (b *Broker) send(ctx context.Context, out []outgoing) (err error) {
	pc, err := b.acquire()
	if err != nil {
		return err
	}
	healthy := false
	defer func() { b.release(pc, healthy) }()

	confirms := make([]*amqp.DeferredConfirmation, 0, len(out))
	for _, o := range out {
		dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, "", o.queue, true, false, o.msg)
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		confirms = append(confirms, dc)
	}

	returned := 0
	var firstReturn amqp.Return
	noteReturn := func(r amqp.Return) {
		if returned == 0 {
			firstReturn = r
		}
		returned++
	}
	for i, dc := range confirms {
	wait:
		for {
			select {
			case <-dc.Done():
				if !dc.Acked() {
					return fmt.Errorf("message %d of %d not confirmed (nacked or connection lost)", i+1, len(confirms))
				}
				break wait
			case r, open := <-pc.returns:
				if !open {
					return fmt.Errorf("channel closed before message %d of %d was confirmed", i+1, len(confirms))
				}
				noteReturn(r)
			case <-ctx.Done():
				return fmt.Errorf("waiting for confirms: %w", ctx.Err())
			}
		}
	}
	// Every return precedes its message's ack on the wire, and the reader
	// goroutine delivers it before it processes that ack: whatever is not
	// consumed yet is in the buffer now.
	drainReturns(pc.returns, noteReturn)
	if returned > 0 {
		return fmt.Errorf("%d of %d messages unroutable, first %q to queue %q: %d %s",
			returned, len(out), firstReturn.MessageId, firstReturn.RoutingKey, firstReturn.ReplyCode, firstReturn.ReplyText)
	}
	healthy = true
	return nil
}

// drainReturns hands note every return already buffered in returns and
// stops when none is left. A channel closed by a connection lost after its
// confirms arrived has nothing more to give: receiving from it again would
// yield zero returns for ever, and the publisher would spin in this loop,
// its relay wedged with the outbox never drained.
func drainReturns(returns <-chan amqp.Return, note func(amqp.Return)) {
	for {
		select {
		case r, open := <-returns:
			if !open {
				return
			}
			note(r)
		default:
			return
		}
	}
}
