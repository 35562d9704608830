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
