package rabbitmq

import (
	"context"
	"errors"
	"fmt"
)

// Delete removes the broker's queues (work, retry and dead letters) and
// every message in them: for tearing down a test or a retired deployment,
// never for a live one.
func (b *Broker) Delete(ctx context.Context) error {
	b.mu.Lock()
	conn := b.conn
	b.mu.Unlock()
	if conn == nil {
		return errors.New("rabbitmq: delete: not connected")
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: delete: %w", err)
	}
	defer ch.Close()
	for _, q := range b.topology() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := ch.QueueDelete(q.name, false, false, false); err != nil {
			return fmt.Errorf("rabbitmq: delete queue %s: %w", q.name, err)
		}
	}
	return nil
}
