package servicetest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// MaxStretch is how far WantWithin stretches a bound on a loaded machine:
// an overrun past it is a hang (a backend call waiting out a TCP or a
// driver timeout of tens of seconds), not queueing for a core.
const MaxStretch = 8

// WantWithin fails the test when took is over bound stretched by the
// machine's load (Stretch): on a machine loaded past its CPUs, wall-clock
// latency includes the time queued for a core, but not without end. An
// overrun within the stretch is logged. Lower bounds need no such care.
func WantWithin(t testing.TB, what string, took, bound time.Duration) {
	t.Helper()
	if took <= bound {
		return
	}
	load, cpus := LoadAverage(), runtime.NumCPU()
	s := Stretch(load, cpus)
	if took <= time.Duration(float64(bound)*s) {
		t.Logf("%s after %v, over the %v bound but within its %.1f× stretch on a machine loaded %.1f on %d CPUs", what, took.Round(time.Millisecond), bound, s, load, cpus)
		return
	}
	t.Errorf("%s after %v; want within %v (stretched %.1f× for a load of %.1f on %d CPUs)", what, took.Round(time.Millisecond), bound, s, load, cpus)
}

// Stretch is the factor WantWithin allows a bound on a machine of cpus
// CPUs at load average load: the load per CPU, at least 1 and at most
// MaxStretch.
func Stretch(load float64, cpus int) float64 {
	if cpus < 1 {
		cpus = 1
	}
	return min(max(load/float64(cpus), 1), MaxStretch)
}

// LoadAverage is the machine's one-minute load average (0 where
// /proc/loadavg is not there).
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var load float64
	if _, err := fmt.Sscan(string(b), &load); err != nil {
		return 0
	}
	return load
}
