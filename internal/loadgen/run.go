// Package loadgen owns seckill's load generator: a runner that drives an
// operation from many goroutines, either closed-loop (a fixed number of
// callers, each sending its next request when the last is answered) or at
// a fixed arrival rate (requests due at start + i/rate, their latency
// measured from that intended instant, so a stalled server is not hidden
// by the generator waiting for it: coordinated omission); an HDR-style
// latency histogram; and a lean keep-alive HTTP/1.1 client that costs far
// less per request than net/http's, so that on a shared machine the
// generator is not the bottleneck of what it measures. The benchmarks of
// cmd/seckill and the tests use it alike.
package loadgen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill/internal/startstop"
)

// Call identifies one operation of a run.
type Call struct {
	// Worker is the index of the goroutine making the call, from 0 to
	// Options.Workers-1: use it to pick the worker's own connection.
	Worker int
	// Seq numbers the calls of a run from 0, in the order they were due.
	Seq int64
	// Intended is when the call was due: its start in closed-loop mode,
	// its slot of the schedule at a fixed rate (it may start later, when
	// every worker was busy).
	Intended time.Time
}

// Op is one operation. An error counts in Result.Errors; the latency is
// recorded either way.
type Op func(ctx context.Context, c Call) error

// Options shape a run. Requests or Duration (or both) must bound it.
type Options struct {
	// Workers is the number of goroutines calling Op: the concurrency of
	// a closed-loop run, the most calls in flight at a fixed rate.
	Workers int
	// Requests stops the run after this many calls; 0 means no limit.
	Requests int64
	// Duration stops the run once this long has passed since its start:
	// no call starts (or, at a fixed rate, is due) after it; 0 means no
	// limit.
	Duration time.Duration
	// MinCalls is how many calls a closed-loop run with a Duration starts
	// however late it is: a run on a machine so loaded that its goroutines
	// were not scheduled before Duration ran out still measures something
	// (over the time it took), instead of reporting no calls. (At a fixed
	// rate the calls due in the window are made, late, anyway.)
	MinCalls int64
	// Rate, if positive, is the fixed arrival rate in calls per second:
	// call i is due at start + i/Rate whatever happened to the calls
	// before it, and its latency is measured from then. Zero means a
	// closed loop.
	Rate float64
	// Start, if set, is the instant the run begins (its first call is due
	// then); Run waits for it. Default: at once.
	Start time.Time
}

// Result is what a run measured.
type Result struct {
	// Calls is how many calls completed (successfully or not).
	Calls int64
	// Errors is how many calls returned an error.
	Errors int64
	// Elapsed runs from the start to the end of the last call.
	Elapsed time.Duration
	// Latency holds every call's latency: from its start in a closed
	// loop, from its intended instant at a fixed rate.
	Latency *Histogram
	// MaxLag is, at a fixed rate, the longest a call started after it was
	// due: large when the workers could not keep up with the rate.
	MaxLag time.Duration
}

// Throughput is completed calls per second of Elapsed.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// Pacer is the schedule of a fixed-rate run: call i is due at
// Start + i/Rate. It is computed from i each time, never by adding up
// intervals, so it does not drift however long the run.
type Pacer struct {
	Start time.Time
	Rate  float64 // calls per second
}

// At is when call seq is due.
func (p Pacer) At(seq int64) time.Time {
	return p.Start.Add(time.Duration(float64(seq) * float64(time.Second) / p.Rate))
}

// shards spreads the workers' latency counts over a few histograms,
// merged at the end, so that they do not all write the same cache lines.
const shards = 8

// Run calls op as opts say until the run is bounded (Requests or
// Duration) or ctx ends, then waits for the calls in flight. Calls see
// ctx; a call cut short by ctx counts like any other.
func Run(ctx context.Context, opts Options, op Op) (Result, error) {
	switch {
	case opts.Workers < 1:
		return Result{}, errors.New("loadgen: Workers must be at least 1")
	case opts.Requests <= 0 && opts.Duration <= 0:
		return Result{}, errors.New("loadgen: a run needs Requests or Duration")
	case opts.Rate < 0:
		return Result{}, errors.New("loadgen: Rate must not be negative")
	}
	start := opts.Start
	if start.IsZero() {
		start = time.Now()
	}
	if err := sleepUntil(ctx, start); err != nil {
		return Result{}, err
	}
	var end time.Time
	if opts.Duration > 0 {
		end = start.Add(opts.Duration)
	}
	pacer := Pacer{Start: start, Rate: opts.Rate}

	var (
		next, calls, errs atomic.Int64
		maxLag            atomic.Int64
		lastEnd           atomic.Int64 // nanoseconds since start
		wg                sync.WaitGroup
		hists             [shards]*Histogram
	)
	for i := range hists {
		hists[i] = NewHistogram()
	}
	for w := range opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hists[w%shards]
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if opts.Requests > 0 && seq >= opts.Requests {
					return
				}
				var intended time.Time
				if opts.Rate > 0 {
					intended = pacer.At(seq)
					if !end.IsZero() && !intended.Before(end) {
						return
					}
					if sleepUntil(ctx, intended) != nil {
						return
					}
				}
				began := time.Now()
				if opts.Rate == 0 {
					if !end.IsZero() && !began.Before(end) && seq >= opts.MinCalls {
						return
					}
					intended = began
				} else if lag := int64(began.Sub(intended)); lag > maxLag.Load() {
					storeMax(&maxLag, lag)
				}
				err := op(ctx, Call{Worker: w, Seq: seq, Intended: intended})
				done := time.Now()
				h.Record(done.Sub(intended))
				calls.Add(1)
				if err != nil {
					errs.Add(1)
				}
				storeMax(&lastEnd, int64(done.Sub(start)))
			}
		}()
	}
	wg.Wait()
	lat := hists[0]
	for _, h := range hists[1:] {
		lat.Merge(h)
	}
	return Result{
		Calls:   calls.Load(),
		Errors:  errs.Load(),
		Elapsed: time.Duration(lastEnd.Load()),
		Latency: lat,
		MaxLag:  time.Duration(maxLag.Load()),
	}, nil
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// sleepUntil waits until t or until ctx ends (then it returns ctx.Err()).
func sleepUntil(ctx context.Context, t time.Time) error {
	return startstop.Sleep(ctx, time.Until(t))
}
