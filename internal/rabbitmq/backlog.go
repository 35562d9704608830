package rabbitmq

import (
	"context"
	"errors"
	"fmt"
)

// Backlog is the number of messages waiting in the broker for the order
// writer: ready on the work queue plus held in the retry queues (their
// back-off), read with passive declares. Deliveries a consumer holds
// unacknowledged are not counted (at most a prefetch per consumer); nor
// are dead letters. Each message is a pack, one relay batch of events.
// For a metrics sampler: it opens a channel per call.
func (b *Broker) Backlog(ctx context.Context) (int64, error) {
	b.mu.Lock()
	conn := b.conn
	b.mu.Unlock()
	if conn == nil {
		return 0, fmt.Errorf("rabbitmq: backlog: %w", errBrokerDown)
	}
	type result struct {
		n   int64
		err error
	}
	// The client's calls take no context: a half-open connection would
	// hold them until the heartbeat notices, so wait here only as long as
	// ctx allows.
	done := make(chan result, 1)
	go func() {
		ch, err := conn.Channel()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer ch.Close()
		var n int64
		for _, q := range b.topology() {
			if q.name == b.dead {
				continue
			}
			st, err := ch.QueueDeclarePassive(q.name, true, false, false, false, q.args)
			if err != nil {
				done <- result{err: fmt.Errorf("queue %s: %w", q.name, err)}
				return
			}
			n += int64(st.Messages)
		}
		done <- result{n: n}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return 0, fmt.Errorf("rabbitmq: backlog: %w", r.err)
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("rabbitmq: backlog: %w", errors.Join(errBrokerDown, ctx.Err()))
	}
}
