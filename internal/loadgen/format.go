package loadgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// String prints the percentiles, e.g. "p50 1.2ms  p90 …  max 9ms".
func (s Summary) String() string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  p99.9 %s  max %s",
		FormatDuration(s.P50), FormatDuration(s.P90), FormatDuration(s.P99), FormatDuration(s.P999), FormatDuration(s.Max))
}

// Millis is d in milliseconds.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// FormatMillis prints v milliseconds as FormatDuration does.
func FormatMillis(v float64) string {
	return FormatDuration(time.Duration(v * float64(time.Millisecond)))
}

// FormatDuration prints a duration with three significant digits.
func FormatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d >= 10*time.Millisecond:
		return strconv.FormatFloat(Millis(d), 'f', 0, 64) + "ms"
	case d >= time.Millisecond:
		return strconv.FormatFloat(Millis(d), 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + "µs"
	}
}

// Thousands formats n with thousands separators: 12,345.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
