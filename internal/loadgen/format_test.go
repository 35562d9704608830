package loadgen

import (
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond: "1.50s", 42 * time.Millisecond: "42ms",
		1500 * time.Microsecond: "1.5ms", 250 * time.Microsecond: "250µs",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
	}
	if got := FormatMillis(Millis(42 * time.Millisecond)); got != "42ms" {
		t.Errorf("FormatMillis(Millis(42ms)) = %q", got)
	}
}
