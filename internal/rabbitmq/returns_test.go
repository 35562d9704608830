package rabbitmq

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestDrainReturnsStopsAtAClosedChannel: a connection lost after the
// confirms arrived closes the returns channel; the drain hands over what was
// buffered and returns instead of spinning on the closed channel for ever
// (the relay wedged that way in TestBrokerCutMidSale).
func TestDrainReturnsStopsAtAClosedChannel(t *testing.T) {
	for _, closed := range []bool{false, true} {
		returns := make(chan amqp.Return, 4)
		returns <- amqp.Return{MessageId: "a"}
		returns <- amqp.Return{MessageId: "b"}
		if closed {
			close(returns)
		}
		var got []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			drainReturns(returns, func(r amqp.Return) { got = append(got, r.MessageId) })
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("closed=%v: drainReturns still running after a minute", closed)
		}
		if len(got) != 2 || got[0] != "a" || got[1] != "b" {
			t.Errorf("closed=%v: drained %v, want [a b]", closed, got)
		}
	}
}
