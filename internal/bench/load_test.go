package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/loadgen"
)

// TestOnceCountsRepeatsUnexpected: with Once, a call past the last request
// is a repeat, counted unexpected although the server answers it the
// wanted status (a queue's repeated join answers 200 as a first one).
func TestOnceCountsRepeatsUnexpected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	tg, err := loadgen.ParseTarget(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([][]byte, 3)
	for i := range reqs {
		reqs[i] = tg.AppendRequest(nil, "GET", "/", nil)
	}
	for _, once := range []bool{false, true} {
		res, err := generate(context.Background(), Spec{URL: srv.URL, Requests: reqs, Want: http.StatusOK, Once: once,
			Concurrency: 2, Duration: 100 * time.Millisecond}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests <= int64(len(reqs)) {
			t.Fatalf("once %v: %d calls, want more than the %d requests", once, res.Requests, len(reqs))
		}
		wantExpected, wantRepeats := res.Requests, int64(0)
		if once {
			wantExpected, wantRepeats = int64(len(reqs)), res.Requests-int64(len(reqs))
		}
		if res.Expected != wantExpected || res.Unexpected["repeat"] != wantRepeats {
			t.Errorf("once %v: %d expected, %d repeats of %d calls; want %d and %d", once, res.Expected, res.Unexpected["repeat"], res.Requests, wantExpected, wantRepeats)
		}
	}
}

// TestPrintNamesEarlierRoundsWithUnexpectedAnswers: the table shows the
// last round's answers only, so an earlier round with others is named.
func TestPrintNamesEarlierRoundsWithUnexpectedAnswers(t *testing.T) {
	rep := &Report{Names: []string{"queue-new"}}
	rep.Add([]Result{{Name: "queue-new", Round: 1, Load: Load{Requests: 10, Expected: 7, Unexpected: map[string]int64{"repeat": 3}}}})
	rep.Add([]Result{{Name: "queue-new", Round: 2, Load: Load{Requests: 10, Expected: 10}}})
	rep.Add([]Result{{Name: "queue-new", Round: 3, Load: Load{Requests: 10, Expected: 10}}})
	var out strings.Builder
	rep.Print(&out)
	if got := out.String(); !strings.Contains(got, "round 1: 7 as expected, 3 not: repeat 3") || strings.Contains(got, "round 2:") {
		t.Errorf("the report does not name round 1's repeats alone:\n%s", got)
	}
}

func TestGrowth(t *testing.T) {
	for _, c := range []struct {
		name       string
		rounds     []float64
		last, tail float64
		ok         bool
	}{
		{"flat", []float64{100, 100, 100, 100}, 1, 1, true},
		{"a decline", []float64{100, 90, 80, 70, 60}, 0.6, 0.7 / 0.9, true},
		{"one noisy last round, no trend", []float64{100, 95, 105, 100, 102, 80}, 0.8, 1, true},
		{"too few rounds", []float64{100, 90}, 0, 0, false},
		{"nothing persisted in round 1", []float64{0, 90, 80}, 0, 0, false},
	} {
		last, tail, ok := Growth(c.rounds)
		if ok != c.ok || math.Abs(last-c.last) > 1e-9 || math.Abs(tail-c.tail) > 1e-9 {
			t.Errorf("%s: Growth = %v, %v, %v; want %v, %v, %v", c.name, last, tail, ok, c.last, c.tail, c.ok)
		}
	}
}

func TestPrintGrowthOfPersistedClaims(t *testing.T) {
	rep := &Report{Names: []string{"live"}}
	for i, p := range []float64{1000, 990, 1010, 700} {
		rep.Add([]Result{{Name: "live", Round: i + 1, Load: Load{Requests: 10, Expected: 10, Persisted: p}}})
	}
	var out strings.Builder
	rep.Print(&out)
	if got := out.String(); !strings.Contains(got, "round 4 ÷ round 1 0.70 (target ≥ 0.85: MISSED by 0.15); last three ÷ first three (medians) 0.99") {
		t.Errorf("no growth line, or a wrong one:\n%s", got)
	}
}
