package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
)

// TestBenchFairnessBotsWinFirstComeNotTheLottery runs `seckill bench
// fairness` on a small crowd: under first_come the bots, there at the
// opening instant, take most units; under the lottery and the queue
// their share is near their 10% of the crowd (more than half of 20 units
// would happen by chance about once in ten million draws).
func TestBenchFairnessBotsWinFirstComeNotTheLottery(t *testing.T) {
	var out bytes.Buffer
	err := runBenchFairness(context.Background(), []string{"--buyers", "200", "--units", "20", "--rounds", "1", "--spread", "1s"}, &out, &out)
	if err != nil {
		t.Fatalf("bench fairness: %v\n%s", err, out.String())
	}
	share := func(mode string) float64 {
		m := regexp.MustCompile(`(?m)^  ` + mode + ` +([0-9.]+)% \( *(\d+) of +(\d+)\)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no %s line in:\n%s", mode, out.String())
		}
		if m[3] != "20" {
			t.Fatalf("%s gave %s units of 20:\n%s", mode, m[3], out.String())
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	if fc := share("first_come"); fc < 50 {
		t.Errorf("first_come: bots took %.1f%%; want most units\n%s", fc, out.String())
	}
	for _, mode := range []string{"lottery", "queue"} {
		if s := share(mode); s > 50 {
			t.Errorf("%s: bots took %.1f%%; want near their 10%% share\n%s", mode, s, out.String())
		}
	}
}
