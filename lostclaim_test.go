package seckill

import (
	"testing"
	"time"
)

func TestJudgeClaim(t *testing.T) {
	p := ClaimPolicy{MinAge: 10 * time.Second, MaxAge: 2 * time.Minute}
	s := time.Second
	for _, tc := range []struct {
		name string
		f    ClaimFacts
		want ClaimVerdict
	}{
		{"young: its batch may still run", ClaimFacts{Age: 9 * s, OutboxEmpty: true}, ClaimMayLand},
		{"nothing in flight", ClaimFacts{Age: 12 * s, OutboxEmpty: true}, ClaimLost},
		{"an outbox entry old enough to be its", ClaimFacts{Age: 30 * s, OutboxOldest: 25 * s}, ClaimMayLand},
		{"the outbox holds only later entries", ClaimFacts{Age: 30 * s, OutboxOldest: 5 * s}, ClaimLost},
		{"events in the broker", ClaimFacts{Age: 30 * s, OutboxEmpty: true, Backlog: 3}, ClaimMayLand},
		{"a broker that cannot tell", ClaimFacts{Age: 30 * s, OutboxEmpty: true, Backlog: -1}, ClaimMayLand},
		{"past MaxAge whatever is in flight", ClaimFacts{Age: 2 * time.Minute, OutboxOldest: 3 * time.Minute, Backlog: 9}, ClaimLost},
		{"the outbox entry exactly old enough", ClaimFacts{Age: 30 * s, OutboxOldest: 20 * s}, ClaimMayLand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JudgeClaim(tc.f, p); got != tc.want {
				t.Errorf("JudgeClaim(%+v) = %v; want %v", tc.f, got, tc.want)
			}
		})
	}
}
