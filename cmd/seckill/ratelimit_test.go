package main

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestParseLimit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want seckill.RateLimit
		off  bool
	}{
		{"20/1m", seckill.RateLimit{Rate: 20, Period: time.Minute}, false},
		{"5/1s", seckill.RateLimit{Rate: 5, Period: time.Second}, false},
		{"5/s", seckill.RateLimit{Rate: 5, Period: time.Second}, false},
		{"100/1h30m", seckill.RateLimit{Rate: 100, Period: 90 * time.Minute}, false},
		{"3/.5s", seckill.RateLimit{Rate: 3, Period: 500 * time.Millisecond}, false},
		{"1/24h", seckill.RateLimit{Rate: 1, Period: 24 * time.Hour}, false},
		{"1000000/1s", seckill.RateLimit{Rate: 1_000_000, Period: time.Second}, false},
		{"007/1m", seckill.RateLimit{Rate: 7, Period: time.Minute}, false},
		{" 20/1m\n", seckill.RateLimit{Rate: 20, Period: time.Minute}, false},
		{"off", seckill.RateLimit{}, true},
		{"OFF", seckill.RateLimit{}, true},
		{" Off ", seckill.RateLimit{}, true},
	} {
		got, off, err := parseLimit(tt.in)
		if err != nil || got != tt.want || off != tt.off {
			t.Errorf("parseLimit(%q) = %+v, %v, %v; want %+v, %v, nil", tt.in, got, off, err, tt.want, tt.off)
		}
	}
}

func TestParseLimitRejects(t *testing.T) {
	for _, in := range []string{
		"", "off/1m", "20", "20/", "/1m", "0/1m", "-1/1m", "+20/1m", "20.5/1m", "1e3/1m",
		"20/1", "20/0s", "20/-1m", "20/+1m", "20/1y", "20/ 1m", "20 /1m", "20/1m/1m", "on",
		"1/25h", "1/999us", "1000001/1s", "2000000/1s", "10000000/1h", "99999999999999999999/1s",
		"20/1m\x00", "２０/1m", "20/1ｍ",
	} {
		got, off, err := parseLimit(in)
		if err == nil || off || got != (seckill.RateLimit{}) {
			t.Errorf("parseLimit(%q) = %+v, %v, %v; want an error", in, got, off, err)
		}
	}
}

// FuzzParseLimit: parsing never panics, an accepted limit is one every
// limiter can enforce, and it prints back to itself.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{
		"20/1m", "5/1s", "off", "OFF", "20/m", "3/.5s", "1/24h", "1000000/1s", "0/1m", "20/0s",
		"20/-1m", "1/25h", "99999999999999999999/1s", "20/1m/1m", " 20/1m ", "20/1h2m3s4ms5us6ns",
		"1/9223372036854775807ns", "1/1µs", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, off, err := parseLimit(s)
		switch {
		case err != nil:
			if off || l != (seckill.RateLimit{}) {
				t.Fatalf("parseLimit(%q) = %+v, off %v with error %v", s, l, off, err)
			}
			return
		case off:
			if l != (seckill.RateLimit{}) || !strings.EqualFold(strings.TrimSpace(s), "off") {
				t.Fatalf("parseLimit(%q) = %+v, off", s, l)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("parseLimit(%q) accepted %+v, which does not validate: %v", s, l, err)
		}
		if l.Interval() < time.Microsecond || l.Interval()*time.Duration(l.Rate) > l.Period {
			t.Fatalf("parseLimit(%q) = %+v: interval %s out of range", s, l, l.Interval())
		}
		back, off, err := parseLimit(l.String())
		if err != nil || off || back != l {
			t.Fatalf("parseLimit(%q) = %+v; its String %q parses as %+v, %v, %v", s, l, l.String(), back, off, err)
		}
	})
}
