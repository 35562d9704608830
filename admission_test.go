package seckill_test

import (
	"slices"
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
		{"adaptive queue, defaults", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50, Adaptive: &seckill.AdaptiveAdmission{}}, 0, ""},
		{"adaptive queue, bounds", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50,
			Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 5, MaxPerSecond: 500, TargetLatencyMS: 100}}, 0, ""},
		{"adaptive starting under its floor", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 4,
			Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 5}}, 0, "min_per_second <= admit_per_second"},
		{"adaptive starting over its ceiling", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50,
			Adaptive: &seckill.AdaptiveAdmission{MaxPerSecond: 40}}, 0, "admit_per_second <= max_per_second"},
		{"adaptive ceiling too high", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50,
			Adaptive: &seckill.AdaptiveAdmission{MaxPerSecond: seckill.MaxAdmitPerSecond + 1}}, 0, "max_per_second"},
		{"adaptive negative floor", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50,
			Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: -1}}, 0, "min_per_second"},
		{"adaptive target over a minute", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 50,
			Adaptive: &seckill.AdaptiveAdmission{TargetLatencyMS: 60001}}, 0, "target_latency_ms"},
		{"adaptive lottery", seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Minute), Adaptive: &seckill.AdaptiveAdmission{}}, 0, "no admit_per_second or adaptive"},
		{"adaptive first come", seckill.Admission{Mode: seckill.AdmitFirstCome, Adaptive: &seckill.AdaptiveAdmission{}}, 0, "takes no"},
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

func TestPreheatLead(t *testing.T) {
	queue := admissionSale(seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10})
	lottery := admissionSale(seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Minute)})
	first := admissionSale(seckill.Admission{})
	for _, tc := range []struct {
		name        string
		s           *seckill.Sale
		lead, opens time.Duration
		want        time.Duration
	}{
		{"first come: the lead", first, 10 * time.Minute, 15 * time.Minute, 10 * time.Minute},
		{"lottery: the lead (entries open at the start)", lottery, 10 * time.Minute, 15 * time.Minute, 10 * time.Minute},
		{"queue: loaded when its room opens", queue, 10 * time.Minute, 15 * time.Minute, 15 * time.Minute},
		{"queue: the lead when longer", queue, 20 * time.Minute, 15 * time.Minute, 20 * time.Minute},
	} {
		if got := seckill.PreheatLead(tc.s, tc.lead, tc.opens); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
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

func TestAdaptiveBoundsTakeTheirDefaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a      seckill.Admission
		want   seckill.AdmitBounds
		wantOK bool
	}{
		{"fixed queue", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 20}, seckill.AdmitBounds{}, false},
		{"lottery", seckill.Admission{Mode: seckill.AdmitLottery, Adaptive: &seckill.AdaptiveAdmission{}}, seckill.AdmitBounds{}, false},
		{"defaults: 1 up to the starting rate, 250 ms", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 20, Adaptive: &seckill.AdaptiveAdmission{}},
			seckill.AdmitBounds{Min: 1, Max: 20, Target: 250 * time.Millisecond}, true},
		{"set", seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 20, Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 5, MaxPerSecond: 80, TargetLatencyMS: 40}},
			seckill.AdmitBounds{Min: 5, Max: 80, Target: 40 * time.Millisecond}, true},
	} {
		if got, ok := tc.a.Bounds(); got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: Bounds = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestNextAdmitRateIsAIMDWithinItsBounds(t *testing.T) {
	b := seckill.AdmitBounds{Min: 5, Max: 105, Target: 100 * time.Millisecond}
	for _, tc := range []struct {
		name     string
		rate     int64
		mean     time.Duration
		observed bool
		want     int64
	}{
		{"fast: add a tenth of the span", 50, 20 * time.Millisecond, true, 60},
		{"at the target is fast enough", 50, 100 * time.Millisecond, true, 60},
		{"slow: halve", 50, 101 * time.Millisecond, true, 25},
		{"fast near the ceiling: stop at it", 100, time.Millisecond, true, 105},
		{"at the ceiling stays", 105, time.Millisecond, true, 105},
		{"slow near the floor: stop at it", 8, time.Second, true, 5},
		{"at the floor stays", 5, time.Second, true, 5},
		{"no claims seen: hold", 50, 0, false, 50},
		{"no claims seen, a rate out of bounds is brought in", 500, 0, false, 105},
	} {
		if got := seckill.NextAdmitRate(tc.rate, tc.mean, tc.observed, b); got != tc.want {
			t.Errorf("%s: NextAdmitRate(%d, %v, %v) = %d, want %d", tc.name, tc.rate, tc.mean, tc.observed, got, tc.want)
		}
	}
	narrow := seckill.AdmitBounds{Min: 1, Max: 3, Target: time.Second}
	if got := seckill.NextAdmitRate(1, 0, true, narrow); got != 2 {
		t.Errorf("a span under 10 steps by 1: got %d, want 2", got)
	}
}

// TestNextAdmitRateFollowsAFakeEngine runs the rule against an engine
// whose latency grows past the target above 40 admissions a second: the
// rate climbs, saws around 40 and never leaves its bounds.
func TestNextAdmitRateFollowsAFakeEngine(t *testing.T) {
	b := seckill.AdmitBounds{Min: 2, Max: 200, Target: 100 * time.Millisecond}
	latency := func(rate int64) time.Duration { return time.Duration(rate) * 100 * time.Millisecond / 40 }
	rate, above := int64(2), 0
	var seen []int64
	for range 100 {
		rate = seckill.NextAdmitRate(rate, latency(rate), true, b)
		seen = append(seen, rate)
		if rate < b.Min || rate > b.Max {
			t.Fatalf("rate %d out of bounds", rate)
		}
		if rate > 40 {
			above++
		}
	}
	last := seen[50:]
	if slices.Max(last) > 2*40+20 || slices.Min(last) < 40/2-20 {
		t.Errorf("rates after 50 steps %v; want them sawing around 40", last)
	}
	if above == 0 || above > 60 {
		t.Errorf("%d of 100 steps above 40 a second; want some, not most", above)
	}
}

func TestAdaptedQueuePace(t *testing.T) {
	p := seckill.QueuePace{Start: t0, Admitted: 10.5, At: t0.Add(5 * time.Second), Rate: 4}
	for _, tc := range []struct {
		name string
		at   time.Duration
		want int64
	}{
		{"before the start", -time.Second, 0},
		{"before its last move (a clock behind): hold", 4 * time.Second, 10},
		{"at its last move", 5 * time.Second, 10},
		{"a half-position later", 5*time.Second + 125*time.Millisecond, 11},
		{"2 s later, at 4 a second", 7 * time.Second, 18},
	} {
		if got := p.AdmittedAt(t0.Add(tc.at)); got != tc.want {
			t.Errorf("%s: AdmittedAt = %d, want %d", tc.name, got, tc.want)
		}
	}
	if st := p.StandingAt(22, t0.Add(7*time.Second)); st != (seckill.QueueStanding{Position: 22, Ahead: 3, ETASeconds: 1}) {
		t.Errorf("StandingAt(22) = %+v", st)
	}
	fixed := seckill.FixedQueuePace(admissionSale(seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10}))
	if got, want := fixed.AdmittedAt(t0.Add(2500*time.Millisecond)), seckill.QueueAdmitted(t0, t0.Add(2500*time.Millisecond), 10); got != want {
		t.Errorf("fixed pace = %d, QueueAdmitted = %d", got, want)
	}
}

func TestDrawWaiting(t *testing.T) {
	s := admissionSale(seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(10 * time.Minute)})
	for _, tc := range []struct {
		name  string
		drawn bool
		at    time.Duration
		want  time.Duration
	}{
		{"entries open", false, 5 * time.Minute, 0},
		{"at the close", false, 10 * time.Minute, 0},
		{"due for 3 minutes", false, 13 * time.Minute, 3 * time.Minute},
		{"drawn", true, 13 * time.Minute, 0},
	} {
		if got := seckill.DrawWaiting(s, tc.drawn, t0.Add(tc.at)); got != tc.want {
			t.Errorf("%s: DrawWaiting = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := seckill.DrawWaiting(admissionSale(seckill.Admission{}), false, t0.Add(time.Hour)); got != 0 {
		t.Errorf("a first-come sale waits %v for a draw", got)
	}
}
