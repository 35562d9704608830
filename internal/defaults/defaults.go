// Package defaults fills in what a component's Config leaves zero: a
// positive number or duration, the clock, the logger. Each constructor
// calls one of these per field, so that every component defaults alike: a
// zero or negative knob takes the default, a nil clock is time.Now, and a
// nil logger discards.
package defaults

import (
	"log/slog"
	"time"
)

// Positive sets *p to def unless it is already positive.
func Positive[T ~int | ~int64 | ~float64](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Clock sets *now to time.Now if it is nil.
func Clock(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}

// Logger sets *l to a logger that discards everything if it is nil.
func Logger(l **slog.Logger) {
	if *l == nil {
		*l = slog.New(slog.DiscardHandler)
	}
}
