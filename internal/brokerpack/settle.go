package brokerpack

import "sync"

// Settlement is a handler's decision on one delivery, with the rule of the
// Delivery contract built in: the last Ack or Retry before Freeze wins, and
// calls after Freeze (the handler has returned) are ignored. Broker
// adapters embed it in their Delivery and apply what Freeze returns.
type Settlement struct {
	mu     sync.Mutex
	state  SettleState
	reason string
	frozen bool
}

// SettleState is what became of a delivery.
type SettleState uint8

const (
	Unsettled SettleState = iota // no decision: a crash if the consumer is stopping, else a retry
	Acked
	Retried
	Released // given back for another consumer, no attempt spent
)

// Release gives the delivery back without spending an attempt, as
// seckill.Releaser says.
func (s *Settlement) Release() { s.set(Released, "") }

// Ack marks the delivery done.
func (s *Settlement) Ack() { s.set(Acked, "") }

// Retry marks the attempt failed, keeping reason for the dead letter.
func (s *Settlement) Retry(reason error) {
	text := "retry requested without a reason"
	if reason != nil {
		text = reason.Error()
	}
	s.set(Retried, text)
}

// Decide records a decision the adapter takes itself (a message that has
// already had all its attempts), as Retry would.
func (s *Settlement) Decide(state SettleState, reason string) { s.set(state, reason) }

func (s *Settlement) set(state SettleState, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.frozen {
		s.state, s.reason = state, reason
	}
}

// Freeze ends the handler's say and returns its decision.
func (s *Settlement) Freeze() (SettleState, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = true
	return s.state, s.reason
}
