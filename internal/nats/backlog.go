package nats

import (
	"context"
	"fmt"
)

// Backlog is the number of messages waiting in the broker for the order
// writer: those the work consumer has not been handed yet plus those
// handed out and not acknowledged (in a consumer's hands, or held back
// for their retry delay), from one consumer-info request. Dead letters are
// not counted. Each message is a pack, one relay batch of events. For a
// metrics sampler.
func (b *Broker) Backlog(ctx context.Context) (int64, error) {
	info, err := b.work.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("nats: backlog: %w", err)
	}
	return int64(info.NumPending) + int64(info.NumAckPending), nil
}
