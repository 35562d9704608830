package servicetest

import "testing"

func TestStretch(t *testing.T) {
	for _, c := range []struct {
		load float64
		cpus int
		want float64
	}{
		{0, 2, 1},   // idle, or no /proc/loadavg
		{1.5, 2, 1}, // under the CPUs: no stretch
		{2, 2, 1},   // exactly busy
		{5, 2, 2.5}, // queued: the load per CPU
		{16, 2, 8},  // at the ceiling
		{40, 2, 8},  // past it: an overrun this far is a hang
		{3, 0, 3},   // no CPU count: taken as one
		{12, 16, 1}, // a big machine lightly loaded
		{64, 16, 4}, // and heavily
	} {
		if got := Stretch(c.load, c.cpus); got != c.want {
			t.Errorf("Stretch(%v, %d) = %v; want %v", c.load, c.cpus, got, c.want)
		}
	}
}
