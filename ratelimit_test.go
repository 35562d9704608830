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
