package servicetest

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds or within has passed, and reports
// whether it held. Tests wait on conditions, never on sleeps: the poll
// interval only bounds how soon a held condition is noticed, and within is
// generous because a loaded machine is slow, not wrong.
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}

// WaitFor polls cond until it holds, failing the test, with what it was
// waiting for, if it does not hold within the time given.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Eventually(within, cond) {
		t.Fatalf("gave up after %s waiting for %s", within, what)
	}
}
