package bench

import (
	"context"
	"io"
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
