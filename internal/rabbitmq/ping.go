package rabbitmq

import (
	"context"
	"fmt"

	"github.com/seckill-dev/seckill"
)

var errBrokerDown = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "The message broker is unavailable; retry later."}

// Ping reports whether the broker has a live connection, waiting for one
// until ctx ends; for readiness checks. A broker outage does not fail
// claims (they wait in the outbox), but a node that cannot publish should
// be drained like one that cannot reach Redis.
func (b *Broker) Ping(ctx context.Context) error {
	if _, err := b.waitConn(ctx); err != nil {
		return fmt.Errorf("rabbitmq: ping: %w: %w", errBrokerDown, err)
	}
	return nil
}
