// Package bench is the harness of `seckill bench`: it drives a
// target over HTTP from a separate load-generator process, so that the CPU
// the server spends (this process, getrusage) and the CPU the load
// generator spends (the child, getrusage) are counted apart; it samples
// Redis's own CPU (INFO) over the same window; it keeps rounds in order and
// reports every ratio as the median of per-round ratios; and it draws the
// comparison chart. It sets up what is measured (the baselines, the
// comparison's strategies) itself; the full engine is started by the
// command that runs it (Wiring), as `seckill serve` would run it.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/loadgen"
)

// childEnv marks a process started as the load generator.
const childEnv = "SECKILL_BENCH_LOADGEN"

// Lines the child prints around the measured window.
const (
	lineMeasuring = "measuring"
	lineMeasured  = "measured"
)

// Spec is one measurement, as the load generator receives it.
type Spec struct {
	URL         string        `json:"url"`
	Requests    [][]byte      `json:"requests"`            // raw HTTP/1.1 requests; call i (warm-up and window in one count) sends Requests[i % len]
	Want        int           `json:"want"`                // the status every answer should have
	WantAlso    int           `json:"want_also,omitempty"` // a second status as good (a lottery's 201 new and 200 repeated entry)
	Once        bool          `json:"once,omitempty"`      // each request is sent once: a call past the last counts unexpected ("repeat") whatever its status
	Concurrency int           `json:"concurrency"`
	Rate        int           `json:"rate"` // requests/s; 0 = closed loop
	Warmup      time.Duration `json:"warmup"`
	Duration    time.Duration `json:"duration"`
}

// Load is what one measurement found.
type Load struct {
	Requests   int64            `json:"requests"`
	Expected   int64            `json:"expected"`
	Unexpected map[string]int64 `json:"unexpected,omitempty"`
	Errors     int64            `json:"errors"`
	RPS        float64          `json:"requests_per_sec"`
	Latency    loadgen.Summary  `json:"latency"`
	MaxLag     time.Duration    `json:"max_lag_ns,omitempty"`
	// CPU microseconds per request over the measured window: the server
	// (this process), the load generator (the child) and Redis (INFO;
	// NaN when not sampled).
	ServerCPU float64 `json:"server_cpu_us_per_req"`
	LoadCPU   float64 `json:"loadgen_cpu_us_per_req"`
	RedisCPU  float64 `json:"redis_cpu_us_per_req,omitempty"`
	// DatabaseCPU and BrokerCPU are those of the engines' database and
	// broker servers (/proc, every process of the server's name; 0 when
	// not on this machine), sampled for a benchmark whose pipeline runs.
	DatabaseCPU float64 `json:"database_cpu_us_per_req,omitempty"`
	BrokerCPU   float64 `json:"broker_cpu_us_per_req,omitempty"`
	// Persisted is, for a benchmark whose pipeline runs, the claims of
	// the window per second of the window and the catch-up after it: a
	// claim counts once its order is in the database, and the wait for
	// the writer to catch up is charged to the window.
	Persisted float64 `json:"persisted_per_sec,omitempty"`
	// Backlog is how many claims the engine's pipeline had not yet put in
	// the database when the window closed, and Settle how long it took
	// to; the server's and Redis's CPU until then count in the figures
	// above, so a pipeline that lags is charged for its work all the same.
	Backlog int64         `json:"backlog,omitempty"`
	Settle  time.Duration `json:"settle_ns,omitempty"`
}

// AllCPU is the CPU µs per request of every process serving it: the
// server, Redis, and the database and broker servers where sampled.
func (l Load) AllCPU() float64 {
	var sum float64
	for _, v := range []float64{l.ServerCPU, l.RedisCPU, l.DatabaseCPU, l.BrokerCPU} {
		if !math.IsNaN(v) {
			sum += v
		}
	}
	return sum
}

// PersistedOrRPS is Persisted where the pipeline ran, else RPS (a
// baseline persists nothing, and its rate is what a claim is held to).
func (l Load) PersistedOrRPS() float64 {
	if l.Persisted > 0 {
		return l.Persisted
	}
	return l.RPS
}

// Samplers sample the CPU of the processes beside the server: Redis's
// over every window, the database's and broker's over a window whose
// pipeline runs. Nil ones are not sampled.
type Samplers struct {
	Redis, Database, Broker Sampler
}

// Unsettled counts the claims an engine has taken that are not yet in its
// database.
type Unsettled func(ctx context.Context) (int64, error)

// settleWait bounds the wait for a pipeline to catch up after a window.
const settleWait = 2 * time.Minute

// IsChild reports whether this process was started as the load generator;
// main then calls ChildMain and exits with its code.
func IsChild() bool { return os.Getenv(childEnv) == "1" }

// ChildMain is the load generator's main: a Spec on stdin, the lines
// "measuring" and "measured" around the measured window, then the Load as
// JSON, on stdout.
func ChildMain(stdin io.Reader, stdout io.Writer) int {
	var spec Spec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintln(stdout, "error: read spec:", err)
		return 2
	}
	res, err := generate(context.Background(), spec, stdout)
	if err != nil {
		fmt.Fprintln(stdout, "error:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// generate runs spec here, printing the window's marks to marks.
func generate(ctx context.Context, spec Spec, marks io.Writer) (Load, error) {
	if len(spec.Requests) == 0 || spec.Concurrency < 1 || spec.Duration <= 0 {
		return Load{}, errors.New("spec needs requests, concurrency and a duration")
	}
	t, err := loadgen.ParseTarget(spec.URL)
	if err != nil {
		return Load{}, err
	}
	conns := make([]*loadgen.Conn, spec.Concurrency)
	for i := range conns {
		conns[i] = loadgen.NewConn(t)
		if err := conns[i].Connect(); err != nil {
			return Load{}, err
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var (
		expected atomic.Int64
		mu       sync.Mutex
		other    = map[string]int64{}
		counting atomic.Bool
	)
	n := int64(len(spec.Requests))
	var offset int64 // the warm-up's calls: the window goes on where it stopped
	op := func(_ context.Context, c loadgen.Call) error {
		resp, err := conns[c.Worker].Do(spec.Requests[(offset+c.Seq)%n])
		if !counting.Load() {
			return err
		}
		switch {
		case err != nil:
			return err
		case spec.Once && offset+c.Seq >= n:
			mu.Lock()
			other["repeat"]++
			mu.Unlock()
		case resp.Status == spec.Want || spec.WantAlso != 0 && resp.Status == spec.WantAlso:
			expected.Add(1)
		default:
			key := strconv.Itoa(resp.Status)
			if code := apiclient.ErrorCode(resp.Body); code != "" {
				key += " " + code
			}
			mu.Lock()
			other[key]++
			mu.Unlock()
		}
		return nil
	}
	run := func(d time.Duration) (loadgen.Result, error) {
		// Every connection makes a call in every window, however the
		// machine schedules this process.
		return loadgen.Run(ctx, loadgen.Options{Workers: spec.Concurrency, Duration: d, MinCalls: int64(spec.Concurrency), Rate: float64(spec.Rate)}, op)
	}
	if spec.Warmup > 0 {
		warm, err := run(spec.Warmup)
		if err != nil {
			return Load{}, err
		}
		offset = warm.Calls
	}
	counting.Store(true)
	fmt.Fprintln(marks, lineMeasuring)
	before := cpuSelf()
	res, err := run(spec.Duration)
	cpu := cpuSelf() - before
	fmt.Fprintln(marks, lineMeasured)
	if err != nil {
		return Load{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	return Load{
		Requests: res.Calls, Expected: expected.Load(), Unexpected: other, Errors: res.Errors,
		RPS: res.Throughput(), Latency: res.Latency.Summary(), MaxLag: res.MaxLag,
		LoadCPU: perRequest(cpu, res.Calls),
	}, nil
}

// cpuSelf is this process's CPU time so far, user + system.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func perRequest(cpu time.Duration, n int64) float64 {
	if n <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / float64(n)
}

// Sampler reads a cumulative CPU figure of another process (Redis's
// used_cpu_user + used_cpu_sys), sampled at both ends of the window.
type Sampler func(ctx context.Context) (time.Duration, error)

// Measure runs spec in a load-generator child (the running executable
// started again with the child marker), sampling this process's CPU and
// the samplers' over the measured window. If unsettled is set, the window
// of the CPU figures closes only once it counts 0 (the engine's pipeline
// has persisted every claim of the window), and the database's and
// broker's CPU are sampled too.
func Measure(ctx context.Context, spec Spec, samplers Samplers, unsettled Unsettled) (Load, error) {
	if unsettled == nil {
		samplers.Database, samplers.Broker = nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return Load{}, fmt.Errorf("find the executable to run the load generator: %w", err)
	}
	in, err := json.Marshal(spec)
	if err != nil {
		return Load{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, spec.Warmup+spec.Duration+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe, "-test.run=^$") // a test binary runs its TestMain only
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Load{}, err
	}
	if err := cmd.Start(); err != nil {
		return Load{}, fmt.Errorf("start the load generator: %w", err)
	}
	var (
		res        Load
		cpu0, cpu1 time.Duration
		others     = []*sampled{{f: samplers.Redis}, {f: samplers.Database}, {f: samplers.Broker}}
		last       string
	)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch line {
		case lineMeasuring:
			for _, o := range others {
				o.start(ctx)
			}
			cpu0 = cpuSelf()
		case lineMeasured:
			if unsettled != nil {
				if res.Backlog, res.Settle, err = settle(ctx, unsettled); err != nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
					return Load{}, err
				}
			}
			cpu1 = cpuSelf()
			for _, o := range others {
				o.stop(ctx)
			}
		default:
			last = line
		}
	}
	if err := cmd.Wait(); err != nil {
		return Load{}, fmt.Errorf("load generator: %w (%s)", err, last)
	}
	backlog, took := res.Backlog, res.Settle
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		return Load{}, fmt.Errorf("load generator said %q: %w", last, err)
	}
	res.Backlog, res.Settle = backlog, took
	res.ServerCPU = perRequest(cpu1-cpu0, res.Requests)
	res.RedisCPU, res.DatabaseCPU, res.BrokerCPU = others[0].perRequest(res.Requests), others[1].perRequest(res.Requests), others[2].perRequest(res.Requests)
	if unsettled != nil && res.RPS > 0 {
		// The window as the load generator measured it (its req/s is
		// over it), then the catch-up.
		window := float64(res.Requests)/res.RPS + took.Seconds()
		res.Persisted = float64(res.Expected) / window
	}
	return res, nil
}

// sampled is one Sampler's readings at both ends of a window.
type sampled struct {
	f          Sampler
	t0, t1     time.Duration
	err0, err1 error
}

func (s *sampled) start(ctx context.Context) {
	if s.f != nil {
		s.t0, s.err0 = s.f(ctx)
	}
}

func (s *sampled) stop(ctx context.Context) {
	if s.f != nil {
		s.t1, s.err1 = s.f(ctx)
	}
}

// perRequest is the window's CPU µs per request; 0 when not sampled.
func (s *sampled) perRequest(n int64) float64 {
	if s.f == nil || s.err0 != nil || s.err1 != nil {
		return 0
	}
	return perRequest(s.t1-s.t0, n)
}

// settle waits until unsettled counts 0 and returns what it counted first
// and how long that took.
func settle(ctx context.Context, unsettled Unsettled) (backlog int64, took time.Duration, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	for first := true; ; first = false {
		n, err := unsettled(ctx)
		if err != nil {
			return backlog, time.Since(start), fmt.Errorf("count unsettled claims: %w", err)
		}
		if first {
			backlog = n
		}
		if n == 0 {
			return backlog, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return backlog, time.Since(start), fmt.Errorf("%d claims still unsettled after %s: %w", n, settleWait, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
