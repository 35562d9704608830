package brokerpack

import (
	"testing"
	"time"
)

func TestRetryDelayDoublesUpToTheCap(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 5, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for attempt, want := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 1000: time.Second,
	} {
		if got := p.Delay(attempt); got != want {
			t.Errorf("Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
}

func TestRetryPolicyValidateRefusesWhatCannotWork(t *testing.T) {
	if err := DefaultRetryPolicy().Validate(); err != nil {
		t.Errorf("the default policy: %v", err)
	}
	for name, p := range map[string]RetryPolicy{
		"no attempt":          {MaxAttempts: 0, Backoff: time.Second, MaxBackoff: time.Second},
		"back-off under 1ms":  {MaxAttempts: 1, Backoff: time.Microsecond, MaxBackoff: time.Second},
		"cap below the first": {MaxAttempts: 1, Backoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%s: Validate = nil, want an error", name)
		}
	}
}
