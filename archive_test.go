package seckill_test

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestLotteryArchiveWait(t *testing.T) {
	lottery := &seckill.Sale{Admission: seckill.Admission{Mode: seckill.AdmitLottery}}
	drawn := seckill.DrawRecord{DrawnAt: time.Unix(1, 0)}
	for _, c := range []struct {
		name  string
		sale  *seckill.Sale
		rec   seckill.DrawRecord
		found bool
		wait  bool
	}{
		{"first come", &seckill.Sale{}, seckill.DrawRecord{}, false, false},
		{"queue", &seckill.Sale{Admission: seckill.Admission{Mode: seckill.AdmitQueue}}, seckill.DrawRecord{}, false, false},
		{"lottery without a draw record", lottery, seckill.DrawRecord{}, false, true},
		{"lottery not drawn", lottery, seckill.DrawRecord{}, true, true},
		{"lottery drawn", lottery, drawn, true, false},
	} {
		if got := seckill.LotteryArchiveWait(c.sale, c.rec, c.found); (got != "") != c.wait {
			t.Errorf("%s: LotteryArchiveWait = %q; want waiting %v", c.name, got, c.wait)
		}
	}
}

func TestLotteryCopyNeeded(t *testing.T) {
	for _, c := range []struct {
		name            string
		inRedis, copied seckill.LotteryCounts
		want            bool
	}{
		{"nothing copied yet", seckill.LotteryCounts{Entries: 3, Winners: 1}, seckill.LotteryCounts{}, true},
		{"all copied", seckill.LotteryCounts{Entries: 3, Winners: 1}, seckill.LotteryCounts{Entries: 3, Winners: 1}, false},
		{"a copy cut short", seckill.LotteryCounts{Entries: 1200, Winners: 10}, seckill.LotteryCounts{Entries: 500, Winners: 4}, true},
		{"a win since the copy", seckill.LotteryCounts{Entries: 3, Winners: 2}, seckill.LotteryCounts{Entries: 3, Winners: 1}, true},
		{"an entry since the copy", seckill.LotteryCounts{Entries: 4, Winners: 1}, seckill.LotteryCounts{Entries: 3, Winners: 1}, true},
		{"no entries at all", seckill.LotteryCounts{}, seckill.LotteryCounts{}, false},
		// The keys are gone (archived by another node): nothing to copy from.
		{"keys gone", seckill.LotteryCounts{}, seckill.LotteryCounts{Entries: 3, Winners: 1}, false},
	} {
		if got := seckill.LotteryCopyNeeded(c.inRedis, c.copied); got != c.want {
			t.Errorf("%s: LotteryCopyNeeded(%+v, %+v) = %v; want %v", c.name, c.inRedis, c.copied, got, c.want)
		}
	}
}
