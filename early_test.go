package seckill_test

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestStillEarly(t *testing.T) {
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	learned := start.Add(-time.Minute)
	cases := []struct {
		name         string
		now, learned time.Time
		want         bool
	}{
		{"just learned, a minute early", learned, learned, true},
		{"within the lapse", learned.Add(seckill.EarlyLapse - time.Nanosecond), learned, true},
		{"the lapse is over: ask the store again", learned.Add(seckill.EarlyLapse), learned, false},
		{"inside the margin before the start", start.Add(-seckill.EarlyMargin), start.Add(-seckill.EarlyMargin - time.Millisecond), false},
		{"just outside the margin", start.Add(-seckill.EarlyMargin - time.Nanosecond), start.Add(-2 * seckill.EarlyMargin), true},
		{"started", start, start.Add(-time.Millisecond), false},
		{"a clock that went back before the learning", learned.Add(-time.Millisecond), learned, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.StillEarly(tc.now, start, tc.learned); got != tc.want {
				t.Fatalf("StillEarly(%s, start, %s) = %v, want %v", tc.now.Format(time.StampMilli), tc.learned.Format(time.StampMilli), got, tc.want)
			}
		})
	}
}
