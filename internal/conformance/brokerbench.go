package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/seckill-dev/seckill"
)

// BrokerPublish is the publish benchmark every broker runs: one Publish
// per message against one per batch of 100, so that what a batch saves
// (one confirm round per call instead of one per message) is measured the
// same way everywhere. round names what a Publish waits for (RabbitMQ's
// "Confirm", JetStream's "Ack"): the sub-benchmarks are <round>Each and
// <round>PerBatch100. newBroker returns a broker of its own, cleaned up
// when b ends. Every message has a fresh id, so a broker that deduplicates
// ids stores each one; the messages are built before the timer starts.
func BrokerPublish(b *testing.B, round string, newBroker func(b *testing.B) seckill.Broker) {
	for _, batch := range []int{1, 100} {
		name := round + "Each"
		if batch > 1 {
			name = fmt.Sprintf("%sPerBatch%d", round, batch)
		}
		b.Run(name, func(b *testing.B) {
			br := newBroker(b)
			ctx := context.Background()
			msgs := BrokerMessages("bench", b.N)
			b.ResetTimer()
			for sent := 0; sent < b.N; {
				n := min(batch, b.N-sent)
				if err := br.Publish(ctx, msgs[sent:sent+n]); err != nil {
					b.Fatal(err)
				}
				sent += n
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}
