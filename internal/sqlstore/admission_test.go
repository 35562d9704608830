package sqlstore

import (
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestAdmissionRoundTripsThroughItsStoredForm(t *testing.T) {
	for _, a := range []seckill.Admission{
		{},
		{Mode: seckill.AdmitLottery, EntriesCloseAt: time.Date(2026, 12, 6, 9, 1, 30, 0, time.UTC)},
		{Mode: seckill.AdmitQueue, AdmitPerSecond: 7},
		{Mode: seckill.AdmitQueue, AdmitPerSecond: 7, Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 2, MaxPerSecond: 70, TargetLatencyMS: 150}},
	} {
		got, err := decodeAdmission(encodeAdmission(a))
		if err != nil || got.Of() != a.Of() || !got.EntriesCloseAt.Equal(a.EntriesCloseAt) || got.AdmitPerSecond != a.AdmitPerSecond ||
			(got.Adaptive == nil) != (a.Adaptive == nil) || got.Adaptive != nil && *got.Adaptive != *a.Adaptive {
			t.Errorf("round trip of %+v = %+v, %v", a, got, err)
		}
	}
	if encodeAdmission(seckill.Admission{Mode: seckill.AdmitFirstCome}) != "" {
		t.Error("first come is not stored as empty")
	}
	if _, err := decodeAdmission("{"); err == nil {
		t.Error("a broken stored admission decoded")
	}
}
