package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Delete removes the broker's streams (work and dead letters) and every
// message in them: for tearing down a test or a retired deployment, never
// for a live one. Streams already gone are not an error.
func (b *Broker) Delete(ctx context.Context) error {
	for _, s := range []string{b.stream, b.dead} {
		if err := b.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("nats: delete stream %s: %w", s, err)
		}
	}
	return nil
}
