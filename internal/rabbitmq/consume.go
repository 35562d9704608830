package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
)

// workPrefetch is how many unacked packs of the work queue one
// subscription holds: each may carry a whole relay batch, and a crash
// strands (and counts a delivery against) no more than these.
const workPrefetch = 8

// settleTimeout bounds the publishes that settle a batch (retry and
// dead-letter copies). They run even after the consume context is
// cancelled: the handler's decisions are worth keeping.
const settleTimeout = 30 * time.Second

// Consume implements seckill.Broker.
func (b *Broker) Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.Delivery)) error {
	opts = opts.WithDefaults()
	return b.consumeLoop(ctx, b.queue, opts, func(ctx context.Context, ch *amqp.Channel, raw []amqp.Delivery) {
		b.handleWork(ctx, ch, raw, opts, handle)
	})
}

// ConsumeDeadLetters implements seckill.Broker.
func (b *Broker) ConsumeDeadLetters(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.DeadLetter) error) error {
	return b.consumeLoop(ctx, b.dead, opts.WithDefaults(), func(ctx context.Context, ch *amqp.Channel, raw []amqp.Delivery) {
		b.handleDead(ctx, ch, raw, handle)
	})
}

// consumeLoop subscribes to queue and feeds batches to process until ctx
// ends or the broker closes, subscribing again after every lost channel or
// connection.
func (b *Broker) consumeLoop(ctx context.Context, queue string, opts seckill.ConsumeOptions, process func(context.Context, *amqp.Channel, []amqp.Delivery)) error {
	for {
		conn, err := b.waitConn(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		err = b.consumeOn(ctx, conn, queue, opts, process)
		if ctx.Err() != nil {
			return nil
		}
		if b.isClosed() {
			return seckill.ErrClosed
		}
		b.cfg.logger.Warn("rabbitmq consumer interrupted; subscribing again", "queue", queue, "err", err)
		// Not a hot loop when the channel fails for a reason a redial
		// does not fix (say, the queue was deleted).
		select {
		case <-time.After(b.cfg.reconnectMin):
		case <-ctx.Done():
			return nil
		case <-b.done:
			return seckill.ErrClosed
		}
	}
}

// consumeOn runs one subscription. Closing the channel on the way out hands
// every unsettled delivery back to the queue, which is exactly a crash.
func (b *Broker) consumeOn(ctx context.Context, conn *amqp.Connection, queue string, opts seckill.ConsumeOptions, process func(context.Context, *amqp.Channel, []amqp.Delivery)) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	// One batch in flight per subscription: a crash then strands (and
	// counts a delivery against) no more messages than the handler held.
	prefetch := min(opts.BatchSize, 65535)
	if queue == b.queue {
		prefetch = min(prefetch, workPrefetch)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("consume %s: %w", queue, err)
	}
	for {
		batch, open := collect(ctx, deliveries, opts)
		if !open {
			return errors.New("delivery channel closed")
		}
		if ctx.Err() != nil {
			return nil // batch (if any) is abandoned to the channel close
		}
		process(ctx, ch, batch)
	}
}

// collect waits for a first delivery, then takes what else has arrived,
// up to opts.BatchSize events (counting a pack's events), waiting up to
// opts.Linger for more (by default not at all). open is false when the
// channel died; its deliveries are already back in the queue.
func collect(ctx context.Context, deliveries <-chan amqp.Delivery, opts seckill.ConsumeOptions) (batch []amqp.Delivery, open bool) {
	events := 0
	select {
	case d, ok := <-deliveries:
		if !ok {
			return nil, false
		}
		batch = append(batch, d)
		events += brokerpack.PackLen(d.Body)
	case <-ctx.Done():
		return nil, true
	}
	var linger <-chan time.Time
	if opts.Linger > 0 {
		t := time.NewTimer(opts.Linger)
		defer t.Stop()
		linger = t.C
	}
	for events < opts.BatchSize {
		if linger == nil {
			select {
			case d, ok := <-deliveries:
				if !ok {
					return nil, false
				}
				batch = append(batch, d)
				events += brokerpack.PackLen(d.Body)
				continue
			default:
				return batch, true
			}
		}
		select {
		case d, ok := <-deliveries:
			if !ok {
				return nil, false
			}
			batch = append(batch, d)
			events += brokerpack.PackLen(d.Body)
		case <-linger:
			return batch, true
		case <-ctx.Done():
			return batch, true
		}
	}
	return batch, true
}

// attemptOf is the copy's starting attempt (our header; 1 for a fresh
// publish) plus the deliveries of this copy that were lost to crashes, which
// the quorum queue counts in x-delivery-count.
func attemptOf(d amqp.Delivery) int {
	n := 1
	if v, ok := intHeader(d.Headers, hdrAttempt); ok && v >= 1 {
		n = v
	}
	if c, ok := intHeader(d.Headers, "x-delivery-count"); ok && c > 0 {
		n += c
	} else if d.Redelivered {
		n++
	}
	return n
}

func intHeader(h amqp.Table, key string) (int, bool) {
	switch v := h[key].(type) {
	case int:
		return v, true
	case int8:
		return int(v), true
	case int16:
		return int(v), true
	case int32:
		return int(v), true
	case int64:
		return int(v), true
	case uint8:
		return int(v), true
	case uint16:
		return int(v), true
	case uint32:
		return int(v), true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// handleWork unpacks a batch of the work queue, hands the events of this
// namespace's packs to the handler, and settles it: retry packs into the
// delay queues, dead letters once MaxAttempts is spent, copies of other
// namespaces' packs put back. Copies are published (one confirm round)
// before their originals are acked, so a crash in between duplicates a
// message but never loses one.
func (b *Broker) handleWork(ctx context.Context, ch *amqp.Channel, raw []amqp.Delivery, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery)) {
	taken := make([]brokerpack.Taken[amqp.Delivery], len(raw))
	for i, r := range raw {
		taken[i] = brokerpack.Taken[amqp.Delivery]{Raw: r, ID: r.MessageId, Body: r.Body, Crashes: attemptOf(r) - 1}
	}
	s, ok := brokerpack.Work(ctx, taken, opts, handle, brokerpack.Round[amqp.Delivery, outgoing]{
		Namespace: b.cfg.namespace, Policy: b.cfg.retry,
		Logger: b.cfg.logger, Adapter: "rabbitmq", Where: "queue", WhereName: b.queue,
		PutBackForOwner: func(t brokerpack.Taken[amqp.Delivery]) outgoing {
			return outgoing{b.putBackQueue(), amqp.Publishing{
				MessageId:    t.Raw.MessageId,
				DeliveryMode: amqp.Persistent,
				Timestamp:    t.Raw.Timestamp,
				Headers:      ownHeaders(t.Raw.Headers),
				Body:         t.Raw.Body,
			}}
		},
		// The connection died under the handler: the broker has taken
		// the whole batch back already, so copies would be duplicates.
		Around: func(_ []amqp.Delivery, _ int, hand func()) bool { hand(); return !ch.IsClosed() },
		Retry: func(delay time.Duration, _ time.Time, run []brokerpack.PackedMessage) outgoing {
			return b.pack(b.retryQueue(delay), run)
		},
		Dead: func(dl seckill.DeadLetter) outgoing {
			return outgoing{b.dead, amqp.Publishing{
				MessageId:    dl.Message.ID,
				DeliveryMode: amqp.Persistent,
				Timestamp:    time.Now(),
				Headers:      amqp.Table{hdrAttempt: int32(dl.Attempts), hdrReason: dl.Reason},
				Body:         dl.Message.Body,
			}}
		},
	})
	if !ok {
		return
	}
	moved := tags(s.Moved)
	if len(s.Copies) > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		err := b.send(sctx, "", s.Copies)
		cancel()
		if err != nil {
			b.cfg.logger.Error("rabbitmq: cannot move failed deliveries to retry or dead-letter queue; requeueing them",
				"queue", b.queue, "count", len(moved), "err", err)
			b.requeueLater(ctx, ch, moved)
			moved = nil
		}
	}
	b.ack(ch, append(tags(s.Acks), moved...), len(raw))
}

// tags are the delivery tags of ds.
func tags(ds []amqp.Delivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.DeliveryTag
	}
	return out
}

// ack acks the settled deliveries of a batch of total: one multiple ack
// when nothing of the batch is left to the broker (the channel holds no
// other unacked delivery), else one each.
func (b *Broker) ack(ch *amqp.Channel, settled []uint64, total int) {
	if len(settled) == total && len(settled) > 0 {
		last := settled[0]
		for _, t := range settled {
			last = max(last, t)
		}
		if err := ch.Ack(last, true); err != nil {
			b.cfg.logger.Warn("rabbitmq: ack failed", "queue", b.queue, "err", err)
		}
		return
	}
	for _, t := range settled {
		if err := ch.Ack(t, false); err != nil {
			// The channel is gone; the broker redelivers what it did
			// not see acked. At least once, as promised.
			b.cfg.logger.Warn("rabbitmq: ack failed", "queue", b.queue, "err", err)
			return
		}
	}
}

// ownHeaders is h without the headers the broker sets on a delivery, which
// must not follow a copy: they would count against its attempts.
func ownHeaders(h amqp.Table) amqp.Table {
	out := amqp.Table{}
	for k, v := range h {
		if k != "x-delivery-count" && k != "x-death" && !strings.HasPrefix(k, "x-first-death") && !strings.HasPrefix(k, "x-last-death") {
			out[k] = v
		}
	}
	return out
}

// putBackQueue is where another namespace's pack goes to wait before it
// is offered again: the longest retry queue, or the work queue itself when
// the policy has no retries.
func (b *Broker) putBackQueue() string {
	if b.cfg.retry.MaxAttempts < 2 {
		return b.queue
	}
	return b.retryQueue(b.cfg.retry.Delay(b.cfg.retry.MaxAttempts - 1))
}

// requeueLater nacks ds back onto their queue after a pause, so that a
// persistent failure to settle is not a hot loop.
func (b *Broker) requeueLater(ctx context.Context, ch *amqp.Channel, tags []uint64) {
	select {
	case <-time.After(b.cfg.retry.Backoff):
	case <-ctx.Done():
		return // the channel close requeues them
	case <-b.done:
		return
	}
	for _, t := range tags {
		if err := ch.Nack(t, false, true); err != nil {
			return
		}
	}
}

// handleDead hands dead letters to handle. On success they are acked; on
// failure they are published again at the tail of the dead-letter queue
// after a back-off (rather than nacked: a requeue counts against a quorum
// queue's delivery limit, and RabbitMQ 4 drops messages past its default).
func (b *Broker) handleDead(ctx context.Context, ch *amqp.Channel, raw []amqp.Delivery, handle func(context.Context, []seckill.DeadLetter) error) {
	letters := make([]seckill.DeadLetter, len(raw))
	for i, r := range raw {
		attempts, _ := intHeader(r.Headers, hdrAttempt)
		reason, _ := r.Headers[hdrReason].(string)
		if reason == "" {
			reason = "dead-lettered by the broker"
			if deaths, ok := r.Headers["x-death"].([]any); ok && len(deaths) > 0 {
				if t, ok := deaths[0].(amqp.Table); ok {
					reason = fmt.Sprintf("dead-lettered by the broker from %v: %v", t["queue"], t["reason"])
				}
			}
		}
		letters[i] = seckill.DeadLetter{
			Message:  seckill.Message{ID: r.MessageId, Body: r.Body},
			Attempts: attempts,
			Reason:   reason,
		}
	}
	if err := handle(ctx, letters); err != nil {
		if ctx.Err() != nil {
			return // abandoned to the channel close
		}
		b.cfg.logger.Warn("rabbitmq: dead-letter handler failed; retrying later", "queue", b.dead, "count", len(raw), "err", err)
		select {
		case <-time.After(b.cfg.retry.Delay(b.cfg.retry.MaxAttempts)):
		case <-ctx.Done():
			return
		case <-b.done:
			return
		}
		out := make([]outgoing, len(raw))
		for i, r := range raw {
			out[i] = outgoing{b.dead, amqp.Publishing{
				MessageId:    r.MessageId,
				DeliveryMode: amqp.Persistent,
				Timestamp:    time.Now(),
				Headers:      amqp.Table{hdrAttempt: int32(letters[i].Attempts), hdrReason: letters[i].Reason},
				Body:         r.Body,
			}}
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		if err := b.send(sctx, "", out); err != nil {
			b.cfg.logger.Warn("rabbitmq: cannot requeue dead letters; nacking them", "queue", b.dead, "err", err)
			for _, r := range raw {
				_ = ch.Nack(r.DeliveryTag, false, true)
			}
			return
		}
	}
	for _, r := range raw {
		if err := ch.Ack(r.DeliveryTag, false); err != nil {
			b.cfg.logger.Warn("rabbitmq: ack failed", "queue", b.dead, "err", err)
			return
		}
	}
}
