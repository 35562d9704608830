package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
)

// settleTimeout bounds the publishes that settle a batch (retry and
// dead-letter copies). They run even after the consume context is
// cancelled: the handler's decisions are worth keeping.
const settleTimeout = 30 * time.Second

// Consume implements seckill.Broker.
func (b *Broker) Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.Delivery)) error {
	return b.consumeLoop(ctx, b.queue, opts.WithDefaults(), func(ctx context.Context, ch *amqp.Channel, raw []amqp.Delivery) {
		b.handleWork(ctx, ch, raw, handle)
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
	if err := ch.Qos(min(opts.BatchSize, 65535), 0, false); err != nil {
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

// collect waits for a first delivery, then gathers more for up to
// opts.Linger or until the batch is full. open is false when the channel
// died; its deliveries are already back in the queue.
func collect(ctx context.Context, deliveries <-chan amqp.Delivery, opts seckill.ConsumeOptions) (batch []amqp.Delivery, open bool) {
	select {
	case d, ok := <-deliveries:
		if !ok {
			return nil, false
		}
		batch = append(batch, d)
	case <-ctx.Done():
		return nil, true
	}
	linger := time.NewTimer(opts.Linger)
	defer linger.Stop()
	for len(batch) < opts.BatchSize {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return nil, false
			}
			batch = append(batch, d)
		case <-linger.C:
			return batch, true
		case <-ctx.Done():
			return batch, true
		}
	}
	return batch, true
}

// delivery implements seckill.Delivery; the embedded Settlement holds
// the handler's decision.
type delivery struct {
	seckill.Settlement
	msg     seckill.Message
	attempt int
	tag     uint64
}

func (d *delivery) Message() seckill.Message { return d.msg }
func (d *delivery) Attempt() int             { return d.attempt }

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

// handleWork runs the handler on a batch of the work queue and settles it:
// acks, retry copies into the delay queue for the next attempt, and
// dead-letter copies once MaxAttempts is spent. Copies are published (one
// confirm round) before their originals are acked, so a crash in between
// duplicates a message but never loses one.
func (b *Broker) handleWork(ctx context.Context, ch *amqp.Channel, raw []amqp.Delivery, handle func(context.Context, []seckill.Delivery)) {
	policy := b.cfg.retry
	all := make([]*delivery, len(raw))
	var batch []seckill.Delivery
	for i, r := range raw {
		d := &delivery{msg: seckill.Message{ID: r.MessageId, Body: r.Body}, attempt: attemptOf(r), tag: r.DeliveryTag}
		all[i] = d
		if d.attempt > policy.MaxAttempts {
			// Earlier deliveries were lost without a decision (a consumer
			// crashing on this message?): it has had its chances.
			d.Decide(seckill.Retried, fmt.Sprintf("delivered %d times without being settled", d.attempt-1))
			d.attempt--
			continue
		}
		batch = append(batch, d)
	}
	if len(batch) > 0 {
		handle(ctx, batch)
	}
	if ch.IsClosed() {
		// The connection died under the handler: the broker has taken
		// the whole batch back already, so copies would be duplicates.
		return
	}
	live := ctx.Err() == nil

	var acks, moved []*delivery
	var out []outgoing
	for _, d := range all {
		state, reason := d.Freeze()
		switch state {
		case seckill.Acked:
			acks = append(acks, d)
			continue
		case seckill.Unsettled:
			if !live {
				continue // abandoned: back to the queue when the channel closes
			}
			reason = "handler returned without settling the delivery"
		}
		moved = append(moved, d)
		if d.attempt >= policy.MaxAttempts {
			out = append(out, outgoing{b.dead, amqp.Publishing{
				MessageId:    d.msg.ID,
				DeliveryMode: amqp.Persistent,
				Timestamp:    time.Now(),
				Headers:      amqp.Table{hdrAttempt: int32(d.attempt), hdrReason: reason},
				Body:         d.msg.Body,
			}})
			continue
		}
		out = append(out, outgoing{b.retryQueue(policy.Delay(d.attempt)), amqp.Publishing{
			MessageId:    d.msg.ID,
			DeliveryMode: amqp.Persistent,
			Timestamp:    time.Now(),
			Headers:      amqp.Table{hdrAttempt: int32(d.attempt + 1), hdrReason: reason},
			Body:         d.msg.Body,
		}})
	}

	if len(out) > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		err := b.send(sctx, out)
		cancel()
		if err != nil {
			b.cfg.logger.Error("rabbitmq: cannot move failed deliveries to retry or dead-letter queue; requeueing them",
				"queue", b.queue, "count", len(moved), "err", err)
			b.requeueLater(ctx, ch, moved)
			moved = nil
		}
	}
	for _, d := range append(acks, moved...) {
		if err := ch.Ack(d.tag, false); err != nil {
			// The channel is gone; the broker redelivers what it did
			// not see acked. At least once, as promised.
			b.cfg.logger.Warn("rabbitmq: ack failed", "queue", b.queue, "err", err)
			return
		}
	}
}

// requeueLater nacks ds back onto their queue after a pause, so that a
// persistent failure to settle is not a hot loop.
func (b *Broker) requeueLater(ctx context.Context, ch *amqp.Channel, ds []*delivery) {
	select {
	case <-time.After(b.cfg.retry.Backoff):
	case <-ctx.Done():
		return // the channel close requeues them
	case <-b.done:
		return
	}
	for _, d := range ds {
		if err := ch.Nack(d.tag, false, true); err != nil {
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
		if err := b.send(sctx, out); err != nil {
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
