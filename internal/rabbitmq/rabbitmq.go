// Package rabbitmq is the RabbitMQ adapter of the broker port
// (seckill.Broker), and the sink that publishes order events to a shop's
// exchange (EventSink, eventsink.go). Both run on a link (link.go): one
// connection that redials on its own.
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
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
)

// Headers the adapter sets on the copies it republishes.
const (
	hdrAttempt = "x-seckill-attempt" // attempt number the copy starts at
	hdrReason  = "x-seckill-reason"  // last failure, on dead letters
)

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

// configOf is the defaults with opts applied.
func configOf(opts []Option) (config, error) {
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
		return config{}, fmt.Errorf("rabbitmq: heartbeat must be at least 1s, got %s", cfg.heartbeat)
	}
	return cfg, nil
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
	*link
	queue string
	dead  string
}

var _ seckill.Broker = (*Broker)(nil)

// New connects to url, declares the queues for queue (idempotently) and
// returns a Broker that stays connected until Close.
func New(ctx context.Context, url, queue string, opts ...Option) (*Broker, error) {
	cfg, err := configOf(opts)
	if err != nil {
		return nil, err
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
	b := &Broker{link: newLink(url, cfg, "broker "+queue, "queue", queue), queue: queue, dead: queue + ".dead"}
	if err := b.start(ctx, b.declare); err != nil {
		return nil, err
	}
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
	if err := b.send(ctx, "", out); err != nil {
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

// declare declares the broker's queues (idempotently) on a new
// connection.
func (b *Broker) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	for _, q := range b.topology() {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, q.args); err != nil {
			return fmt.Errorf("declare queue %s: %w", q.name, err)
		}
	}
	return nil
}
