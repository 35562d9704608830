package seckill_test

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestLimitString(t *testing.T) {
	for l, want := range map[seckill.RateLimit]string{
		{}:                               "off",
		{Rate: 20, Period: time.Minute}:  "20/1m",
		{Rate: 5, Period: time.Second}:   "5/1s",
		{Rate: 2, Period: 3 * time.Hour}: "2/3h",
		{Rate: 3, Period: 1500 * time.Millisecond}: "3/1.5s",
	} {
		if got := l.String(); got != want {
			t.Errorf("%+v.String() = %q; want %q", l, got, want)
		}
	}
}

func TestLimitValidate(t *testing.T) {
	if err := (seckill.RateLimit{Rate: 1_000_000, Period: time.Second}).Validate(); err != nil {
		t.Errorf("1e6/1s: %v", err)
	}
	for _, l := range []seckill.RateLimit{
		{}, {Rate: 1}, {Period: time.Second}, {Rate: -1, Period: time.Second},
		{Rate: 1_000_001, Period: time.Hour}, {Rate: 2, Period: time.Microsecond},
		{Rate: 1000, Period: time.Millisecond / 2 * 1}, {Rate: 1, Period: 25 * time.Hour},
	} {
		if err := l.Validate(); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("%+v.Validate() = %v; want code %s", l, err, seckill.EINVALID)
		}
	}
}

func TestLimitAdmit(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	sec := time.Second
	l := seckill.RateLimit{Rate: 3, Period: 3 * time.Second} // one a second, bursts of 3
	cases := []struct {
		name  string
		l     seckill.RateLimit
		tat   time.Time
		next  time.Time
		retry time.Duration
		ok    bool
	}{
		{"never seen", l, time.Time{}, now.Add(sec), 0, true},
		{"tat long past: the burst is back", l, now.Add(-time.Hour), now.Add(sec), 0, true},
		{"tat now", l, now, now.Add(sec), 0, true},
		{"second of a burst", l, now.Add(sec), now.Add(2 * sec), 0, true},
		{"last of the burst", l, now.Add(2 * sec), now.Add(3 * sec), 0, true},
		{"past the burst: wait one interval", l, now.Add(3 * sec), now.Add(3 * sec), sec, false},
		{"further past: the tat is unchanged, the wait longer", l, now.Add(4*sec + 500*time.Millisecond), now.Add(4*sec + 500*time.Millisecond), 2*sec + 500*time.Millisecond, false},
		{"zero limit admits all", seckill.RateLimit{}, now.Add(time.Hour), now.Add(time.Hour), 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next, retry, ok := c.l.Admit(c.tat, now)
			if !next.Equal(c.next) || retry != c.retry || ok != c.ok {
				t.Fatalf("Admit(%v) = %v, %v, %v; want %v, %v, %v", c.tat.Sub(now), next.Sub(now), retry, ok, c.next.Sub(now), c.retry, c.ok)
			}
		})
	}
	// Rate requests at one instant pass, the next waits an interval.
	tat := time.Time{}
	for i := range 3 {
		var ok bool
		if tat, _, ok = l.Admit(tat, now); !ok {
			t.Fatalf("request %d of a burst of 3 refused", i+1)
		}
	}
	if _, retry, ok := l.Admit(tat, now); ok || retry != sec {
		t.Fatalf("4th request at one instant: ok %v retry %v; want refused for 1s", ok, retry)
	}
}
