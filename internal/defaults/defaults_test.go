package defaults

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{{0, time.Second}, {-1, time.Second}, {time.Minute, time.Minute}} {
		got := tt.in
		Positive(&got, time.Second)
		if got != tt.want {
			t.Errorf("Positive(%v, 1s) = %v; want %v", tt.in, got, tt.want)
		}
	}
	n := 0
	Positive(&n, 7)
	if n != 7 {
		t.Errorf("Positive(0, 7) = %d", n)
	}
}

func TestClockAndLogger(t *testing.T) {
	var now func() time.Time
	Clock(&now)
	if now == nil || time.Since(now()) > time.Minute {
		t.Fatal("Clock did not set time.Now")
	}
	fixed := func() time.Time { return time.Unix(1, 0) }
	now = fixed
	Clock(&now)
	if !now().Equal(time.Unix(1, 0)) {
		t.Fatal("Clock replaced a clock that was set")
	}

	var l *slog.Logger
	Logger(&l)
	if l == nil || l.Enabled(context.Background(), slog.LevelError) {
		t.Fatalf("Logger = %v; want a logger that discards", l)
	}
	var buf bytes.Buffer
	mine := slog.New(slog.NewTextHandler(&buf, nil))
	l = mine
	Logger(&l)
	if l != mine {
		t.Fatal("Logger replaced a logger that was set")
	}
}
