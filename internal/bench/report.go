package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-dev/seckill/internal/loadgen"
)

// Result is one benchmark's measurement in one round.
type Result struct {
	Name  string `json:"name"`
	Round int    `json:"round"` // 1-based, in the order run
	Load
}

// Ratio compares two benchmarks: Of's req/s over Base's, taken in each
// round and reported as the median of those per-round ratios, so that a
// ratio never divides numbers from different rounds.
type Ratio struct {
	Of       string    `json:"of"`
	Base     string    `json:"base"`
	Target   float64   `json:"target,omitempty"` // the ratio a goal asks for, if any
	PerRound []float64 `json:"per_round"`
	Median   float64   `json:"median"`
	// Metric is what is compared: "" for req/s, "persisted/s" for Of's
	// claims persisted per second over Base's req/s, "cpu/claim" for the
	// CPU of every process per request (Load.AllCPU); AtMost makes
	// Target an upper bound.
	Metric string `json:"metric,omitempty"`
	AtMost bool   `json:"at_most,omitempty"`
}

// Met reports whether the ratio reaches its target (true without one).
func (r Ratio) Met() bool {
	if r.AtMost {
		return r.Target == 0 || r.Median <= r.Target
	}
	return r.Target == 0 || r.Median >= r.Target
}

// Report is a run of interleaved rounds.
type Report struct {
	Header       []string          `json:"header"` // lines describing the setup
	Descriptions map[string]string `json:"descriptions"`
	Names        []string          `json:"names"`  // benchmarks, in the order of each round
	Rounds       [][]Result        `json:"rounds"` // in the order run
	Ratios       []Ratio           `json:"ratios"`
}

// Add records one round's results, in the order they ran.
func (rep *Report) Add(round []Result) { rep.Rounds = append(rep.Rounds, round) }

// ComparePersisted adds two ratios of of to base: of's claims persisted
// per second over base's req/s (target at least rate), and of's CPU of
// every process per request over base's (target at most cpu); 0 for no
// target.
func (rep *Report) ComparePersisted(of, base string, rate, cpu float64) {
	pr := Ratio{Of: of, Base: base, Target: rate, Metric: "persisted/s"}
	cr := Ratio{Of: of, Base: base, Target: cpu, Metric: "cpu/claim", AtMost: true}
	for _, round := range rep.Rounds {
		a, okA := find(round, of)
		b, okB := find(round, base)
		if okA && okB && b.RPS > 0 && b.AllCPU() > 0 {
			pr.PerRound = append(pr.PerRound, a.PersistedOrRPS()/b.RPS)
			cr.PerRound = append(cr.PerRound, a.AllCPU()/b.AllCPU())
		}
	}
	pr.Median, cr.Median = Median(pr.PerRound), Median(cr.PerRound)
	rep.Ratios = append(rep.Ratios, pr, cr)
}

// Compare adds the ratio of of's req/s to base's (median of per-round
// ratios), with an optional target.
func (rep *Report) Compare(of, base string, target float64) {
	r := Ratio{Of: of, Base: base, Target: target}
	for _, round := range rep.Rounds {
		a, okA := find(round, of)
		b, okB := find(round, base)
		if okA && okB && b.RPS > 0 {
			r.PerRound = append(r.PerRound, a.RPS/b.RPS)
		}
	}
	r.Median = Median(r.PerRound)
	rep.Ratios = append(rep.Ratios, r)
}

func find(round []Result, name string) (Result, bool) {
	for _, r := range round {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

// Median is the middle value of vs (the mean of the two middle ones for an
// even count); NaN for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// GrowthTarget is issue 31's bound on a sale that grows: persisted
// claims/s of the last round at least this share of the first's.
const GrowthTarget = 0.85

// Growth compares the last of a series of rounds with the first (last ÷
// first) and, less at the mercy of one noisy round, the median of the
// last three with that of the first three. ok is false with fewer than
// three rounds or a first round of 0.
func Growth(vs []float64) (lastOverFirst, tailOverHead float64, ok bool) {
	if len(vs) < 3 || vs[0] <= 0 {
		return 0, 0, false
	}
	return vs[len(vs)-1] / vs[0], Median(vs[len(vs)-3:]) / Median(vs[:3]), true
}

// series is one figure of name across the rounds, in order.
func (rep *Report) series(name string, f func(Result) float64) []float64 {
	var out []float64
	for _, round := range rep.Rounds {
		if r, ok := find(round, name); ok {
			out = append(out, f(r))
		}
	}
	return out
}

// Print writes the report as text: per benchmark the medians over rounds
// (req/s, latency, CPU µs per request of server, load generator and
// Redis), then the ratios with every round's, then each round's req/s in
// the order run.
func (rep *Report) Print(w io.Writer) {
	for _, h := range rep.Header {
		fmt.Fprintln(w, h)
	}
	fmt.Fprintf(w, "  %-14s %10s %11s %9s %9s %11s %11s %10s %9s %10s %9s  %s\n", "bench", "req/s", "persisted/s", "p50", "p99",
		"server µs", "loadgen µs", "redis µs", "db µs", "broker µs", "all µs", "answers (last round)")
	for _, name := range rep.Names {
		med := func(f func(Result) float64) float64 { return Median(rep.series(name, f)) }
		rps := med(func(r Result) float64 { return r.RPS })
		p50 := time.Duration(med(func(r Result) float64 { return float64(r.Latency.P50) }))
		p99 := time.Duration(med(func(r Result) float64 { return float64(r.Latency.P99) }))
		srv := med(func(r Result) float64 { return r.ServerCPU })
		lg := med(func(r Result) float64 { return r.LoadCPU })
		red := med(func(r Result) float64 { return r.RedisCPU })
		answers := ""
		if last := rep.series(name, func(Result) float64 { return 0 }); len(last) > 0 {
			r, _ := find(rep.Rounds[len(rep.Rounds)-1], name)
			answers = answerText(r)
		}
		persisted := loadgen.Thousands(int64(med(func(r Result) float64 { return r.Persisted })))
		if persisted == "0" {
			persisted = "—"
		}
		fmt.Fprintf(w, "  %-14s %10s %11s %9s %9s %11s %11s %10s %9s %10s %9s  %s\n", name, loadgen.Thousands(int64(rps)), persisted,
			FmtDur(p50), FmtDur(p99), fmtFloat(srv, 1), fmtFloat(lg, 1), fmtFloat(red, 1),
			fmtFloat(med(func(r Result) float64 { return r.DatabaseCPU }), 1), fmtFloat(med(func(r Result) float64 { return r.BrokerCPU }), 1),
			fmtFloat(med(func(r Result) float64 { return r.AllCPU() }), 1), answers)
	}
	for _, name := range rep.Names {
		if d := rep.Descriptions[name]; d != "" {
			fmt.Fprintf(w, "  %-14s %s\n", name+":", d)
		}
	}
	// The table shows the last round's answers; a round before it that had
	// others is named, so that no ratio rests on answers nobody saw.
	for i, round := range rep.Rounds[:max(len(rep.Rounds)-1, 0)] {
		for _, r := range round {
			if r.Requests > r.Expected {
				fmt.Fprintf(w, "  %-14s round %d: %s\n", r.Name+":", i+1, answerText(r))
			}
		}
	}
	var settled []string
	for _, name := range rep.Names {
		if backlog := rep.series(name, func(r Result) float64 { return float64(r.Backlog) }); slices.ContainsFunc(rep.Rounds, func(round []Result) bool {
			r, ok := find(round, name)
			return ok && r.Settle > 0
		}) {
			took := Median(rep.series(name, func(r Result) float64 { return float64(r.Settle) }))
			settled = append(settled, fmt.Sprintf("    %-14s %s claims not yet in the database as the window closed, persisted %s later (medians)",
				name, loadgen.Thousands(int64(Median(backlog))), FmtDur(time.Duration(took))))
		}
	}
	if len(settled) > 0 {
		fmt.Fprintln(w, "  pipeline catch-up (its CPU counts in server and redis µs):")
		for _, l := range settled {
			fmt.Fprintln(w, l)
		}
	}
	if len(rep.Ratios) > 0 {
		fmt.Fprintln(w, "  ratios of req/s, median of the per-round ratios (each round's in order):")
		for _, r := range rep.Ratios {
			each := make([]string, len(r.PerRound))
			for i, v := range r.PerRound {
				each[i] = fmtFloat(v, 2)
			}
			goal := ""
			if r.Target > 0 {
				verdict := "met"
				if !r.Met() {
					verdict = fmt.Sprintf("MISSED by %s", fmtFloat(r.Target-r.Median, 2))
				}
				cmp := "≥"
				if r.AtMost {
					cmp = "≤"
					if !r.Met() {
						verdict = fmt.Sprintf("MISSED by %s", fmtFloat(r.Median-r.Target, 2))
					}
				}
				goal = fmt.Sprintf("  target %s %s: %s", cmp, fmtFloat(r.Target, 2), verdict)
			}
			label := r.Of + " ÷ " + r.Base
			if r.Metric != "" {
				label += " (" + r.Metric + ")"
			}
			fmt.Fprintf(w, "    %-28s %5s  (%s)%s\n", label, fmtFloat(r.Median, 2), strings.Join(each, " · "), goal)
		}
	}
	if len(rep.Rounds) > 1 {
		fmt.Fprintln(w, "  req/s of each round, in the order run:")
		for _, name := range rep.Names {
			vs := rep.series(name, func(r Result) float64 { return r.RPS })
			each := make([]string, len(vs))
			for i, v := range vs {
				each[i] = loadgen.Thousands(int64(v))
			}
			fmt.Fprintf(w, "    %-14s %s\n", name, strings.Join(each, " · "))
			if ps := rep.series(name, func(r Result) float64 { return r.Persisted }); slices.ContainsFunc(ps, func(v float64) bool { return v > 0 }) {
				for i, v := range ps {
					each[i] = loadgen.Thousands(int64(v))
				}
				fmt.Fprintf(w, "    %-14s %s\n", name+" (persisted/s)", strings.Join(each, " · "))
				if last, tail, ok := Growth(ps); ok {
					verdict := "met"
					if last < GrowthTarget {
						verdict = fmt.Sprintf("MISSED by %s", fmtFloat(GrowthTarget-last, 2))
					}
					fmt.Fprintf(w, "    %-14s round %d ÷ round 1 %s (target ≥ %s: %s); last three ÷ first three (medians) %s\n",
						name+" growth", len(ps), fmtFloat(last, 2), fmtFloat(GrowthTarget, 2), verdict, fmtFloat(tail, 2))
				}
			}
		}
	}
}

func answerText(r Result) string {
	s := loadgen.Thousands(r.Expected) + " as expected"
	if n := r.Requests - r.Expected; n > 0 {
		var other []string
		keys := make([]string, 0, len(r.Unexpected))
		for k := range r.Unexpected {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			other = append(other, k+" "+loadgen.Thousands(r.Unexpected[k]))
		}
		if r.Errors > 0 {
			other = append(other, "transport errors "+loadgen.Thousands(r.Errors))
		}
		s += fmt.Sprintf(", %s not: %s", loadgen.Thousands(n), strings.Join(other, ", "))
	}
	return s
}

func fmtFloat(v float64, prec int) string {
	if math.IsNaN(v) || v == 0 {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// FmtDur writes a latency with three significant figures or so.
func FmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + " µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}
