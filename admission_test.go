package seckill_test

import (
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

var t0 = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

func admissionSale(a seckill.Admission) *seckill.Sale {
	return &seckill.Sale{ID: "s1", Name: "tea", Stock: 10, PurchaseLimit: 2,
		StartAt: t0, EndAt: t0.Add(time.Hour), Admission: a}
}

func TestAdmissionValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       seckill.Admission
		buckets int64
		want    string // "" = valid
	}{
		{"zero is first come", seckill.Admission{}, 4, ""},
		{"first come", seckill.Admission{Mode: seckill.AdmitFirstCome}, 0, ""},
		{"first come with a rate", seckill.Admission{Mode: seckill.AdmitFirstCome, AdmitPerSecond: 5}, 0, "takes no"},
		{"lottery", seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Minute)}, 0, ""},
		{"lottery without close", seckill.Admission{Mode: seckill.AdmitLottery}, 0, "needs entries_close_at"},
		{"lottery closing at the start", seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0}, 0, "after start_at"},
		{"lottery closing at the end", seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Hour)}, 0, "before end_at"},
		{"lottery in buckets", seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Minute)}, 2, "one bucket"},
		{"queue", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50}, 0, ""},
		{"queue without a rate", seckill.Admission{Mode: seckill.AdmitQueue}, 0, "admit_per_second"},
		{"queue too fast", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: seckill.MaxAdmitPerSecond + 1}, 0, "admit_per_second"},
		{"queue with a close", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 1, EntriesCloseAt: t0.Add(time.Minute)}, 0, "no entries_close_at"},
		{"unknown mode", seckill.Admission{Mode: "raffle"}, 0, "mode must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := admissionSale(tc.a)
			s.Buckets = tc.buckets
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error about %q", err, tc.want)
			case err != nil && seckill.ErrorCode(err) != seckill.EINVALID:
				t.Fatalf("code = %s, want %s", seckill.ErrorCode(err), seckill.EINVALID)
			}
		})
	}
}

func TestAdmissionRoundTripsThroughItsStoredForm(t *testing.T) {
	for _, a := range []seckill.Admission{
		{},
		{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(90 * time.Second)},
		{Mode: seckill.AdmitQueue, AdmitPerSecond: 7},
	} {
		got, err := seckill.DecodeAdmission(seckill.EncodeAdmission(a))
		if err != nil || got.Of() != a.Of() || !got.EntriesCloseAt.Equal(a.EntriesCloseAt) || got.AdmitPerSecond != a.AdmitPerSecond {
			t.Errorf("round trip of %+v = %+v, %v", a, got, err)
		}
	}
	if seckill.EncodeAdmission(seckill.Admission{Mode: seckill.AdmitFirstCome}) != "" {
		t.Error("first come is not stored as empty")
	}
	if _, err := seckill.DecodeAdmission("{"); err == nil {
		t.Error("a broken stored admission decoded")
	}
}

func TestEntryWindow(t *testing.T) {
	lottery := admissionSale(seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Minute)})
	for _, tc := range []struct {
		name string
		s    *seckill.Sale
		at   time.Time
		want string
	}{
		{"before the start", lottery, t0.Add(-time.Millisecond), seckill.ENOTSTARTED},
		{"at the start", lottery, t0, ""},
		{"just before close", lottery, t0.Add(time.Minute - time.Millisecond), ""},
		{"at close", lottery, t0.Add(time.Minute), seckill.EENDED},
		{"a first come sale", admissionSale(seckill.Admission{}), t0, seckill.EADMISSION},
	} {
		if got := seckill.ErrorCode(seckill.EntryWindow(tc.s, tc.at)); got != tc.want {
			t.Errorf("%s: code %q, want %q", tc.name, got, tc.want)
		}
	}
	if seckill.DrawDue(lottery, t0.Add(time.Minute-1)) || !seckill.DrawDue(lottery, t0.Add(time.Minute)) {
		t.Error("DrawDue is not 'from entries_close_at on'")
	}
	if seckill.DrawDue(admissionSale(seckill.Admission{}), t0.Add(time.Hour)) {
		t.Error("a first come sale has a draw due")
	}
}

func TestQueueWindow(t *testing.T) {
	q := admissionSale(seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10})
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{t0.Add(-15*time.Minute - time.Millisecond), seckill.ENOTSTARTED},
		{t0.Add(-15 * time.Minute), ""},
		{t0.Add(30 * time.Minute), ""},
		{t0.Add(time.Hour), seckill.EENDED},
	} {
		if got := seckill.ErrorCode(seckill.QueueWindow(q, tc.at, seckill.DefaultQueueOpensBefore)); got != tc.want {
			t.Errorf("at %s: code %q, want %q", tc.at.Format(time.TimeOnly), got, tc.want)
		}
	}
	if seckill.ErrorCode(seckill.QueueWindow(admissionSale(seckill.Admission{}), t0, time.Minute)) != seckill.EADMISSION {
		t.Error("a first come sale has a queue")
	}
}

func TestQueuePlaceSettledFromTheStartPlusTheMargin(t *testing.T) {
	q := admissionSale(seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10})
	lottery := admissionSale(seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Minute)})
	for _, tc := range []struct {
		name string
		s    *seckill.Sale
		at   time.Time
		want bool
	}{
		{"before the start", q, t0.Add(-time.Minute), false},
		{"at the start", q, t0, false},
		{"just inside the margin", q, t0.Add(seckill.QueueSettleMargin - time.Millisecond), false},
		{"at the start plus the margin", q, t0.Add(seckill.QueueSettleMargin), true},
		{"an hour on", q, t0.Add(time.Hour), true},
		{"a lottery", lottery, t0.Add(time.Hour), false},
	} {
		if got := seckill.QueuePlaceSettled(tc.s, tc.at, seckill.QueueSettleMargin); got != tc.want {
			t.Errorf("%s: settled %v, want %v", tc.name, got, tc.want)
		}
	}
	if !seckill.EntryKnownUntil(lottery).Equal(t0.Add(time.Minute)) {
		t.Errorf("a lottery's entries are known until %s, want its entries close", seckill.EntryKnownUntil(lottery))
	}
}

func TestQueueAdmitsPositionsAtTheRate(t *testing.T) {
	for _, tc := range []struct {
		at   time.Duration // from the start
		rate int64
		want int64
	}{
		{-time.Second, 10, 0},
		{0, 10, 1},
		{99 * time.Millisecond, 10, 1},
		{100 * time.Millisecond, 10, 2},
		{time.Second, 10, 11},
		{2500 * time.Millisecond, 4, 11},
		{365 * 24 * time.Hour, seckill.MaxAdmitPerSecond, 365*24*3600*seckill.MaxAdmitPerSecond + 1}, // no overflow
	} {
		if got := seckill.QueueAdmitted(t0, t0.Add(tc.at), tc.rate); got != tc.want {
			t.Errorf("QueueAdmitted(+%s, %d/s) = %d, want %d", tc.at, tc.rate, got, tc.want)
		}
	}
}

func TestQueueStandingAt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		position int64
		at       time.Duration
		want     seckill.QueueStanding
	}{
		{"first, at the start", 1, 0, seckill.QueueStanding{Position: 1, Admitted: true}},
		{"before the start", 1, -time.Minute, seckill.QueueStanding{Position: 1, ETASeconds: 61}},
		{"behind 19 at 10/s", 21, 0, seckill.QueueStanding{Position: 21, Ahead: 19, ETASeconds: 2}},
		{"admitted later", 21, 2 * time.Second, seckill.QueueStanding{Position: 21, Admitted: true}},
	} {
		if got := seckill.QueueStandingAt(tc.position, t0, t0.Add(tc.at), 10); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
