package nats

import (
	"context"
	"fmt"

	"github.com/seckill-dev/seckill"
)

var errBrokerDown = &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "The message broker is unavailable; retry later."}

// Ping reports whether the connection to NATS is up, for readiness checks
// (see rabbitmq.Broker.Ping). The client reconnects by itself; Ping only
// looks.
func (b *Broker) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nats: ping: %w", err)
	}
	if !b.nc.IsConnected() {
		return fmt.Errorf("nats: ping: %w: connection %s", errBrokerDown, b.nc.Status())
	}
	return nil
}
