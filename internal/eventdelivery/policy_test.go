package eventdelivery

import (
	"testing"
	"time"
)

func TestDeliveryBackoffDoublesUpToTheCap(t *testing.T) {
	p := Policy{FirstBackoff: time.Second, MaxBackoff: 10 * time.Second, RetryFor: time.Hour}
	for _, c := range []struct {
		attempts int
		jitter   float64
		want     time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{4, 0, 8 * time.Second},
		{5, 0, 10 * time.Second},
		{500, 0, 10 * time.Second},
		{1, 0.5, 900 * time.Millisecond},
		{5, 0.75, 8500 * time.Millisecond},
		{1, -3, time.Second},           // jitter out of range is clamped
		{1, 7, 800 * time.Millisecond}, // to [0, 1]
	} {
		if got := p.Backoff(c.attempts, c.jitter); got != c.want {
			t.Errorf("Backoff(%d, %v) = %v, want %v", c.attempts, c.jitter, got, c.want)
		}
	}
}

func TestDeliveryDeadLettersOnlyPastRetryFor(t *testing.T) {
	p := Policy{FirstBackoff: time.Minute, MaxBackoff: time.Hour, RetryFor: 24 * time.Hour}
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		attempts int
		now      time.Time
		wantNext time.Time
		wantDead bool
	}{
		{"first failure", 1, at.Add(time.Second), at.Add(time.Second + time.Minute), false},
		{"tenth failure", 10, at.Add(5 * time.Hour), at.Add(6 * time.Hour), false},
		{"next attempt exactly at the limit", 10, at.Add(23 * time.Hour), at.Add(24 * time.Hour), false},
		{"next attempt past the limit", 10, at.Add(23*time.Hour + time.Millisecond), time.Time{}, true},
		{"a clock far past the event", 2, at.Add(48 * time.Hour), time.Time{}, true},
	} {
		next, dead := p.AfterFailure(c.attempts, at, c.now, 0)
		if !next.Equal(c.wantNext) || dead != c.wantDead {
			t.Errorf("%s: AfterFailure = %v, %v; want %v, %v", c.name, next, dead, c.wantNext, c.wantDead)
		}
	}
}
