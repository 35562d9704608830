// Command seckill runs the flash-sale engine and its tools. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/seckill-dev/seckill/internal/bench"
)

// gcPercent is the garbage collector's target (GOGC) when the environment
// sets none. An engine's live heap is small (bounded caches: 10-20 MB with
// ten thousand buyers) and each request leaves a few KB of garbage, so at
// Go's default of 100 a stampede runs the collector every 80-160 ms: on
// the sold-out path its marking, sweeping and span refills took 1-1.5 µs
// of the 17 µs of CPU a request costs (bench soldout, CPU profile). 400
// cuts that to a quarter for a heap of up to 5× the live one. GOGC and
// GOMEMLIMIT in the environment still rule.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if bench.IsChild() { // bench's load generator runs in a process of its own
		os.Exit(bench.ChildMain(os.Stdin, os.Stdout))
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The first SIGINT or SIGTERM asks for a graceful stop (serve drains
	// within its shutdown timeout); a second one exits at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		s := <-sigs
		fmt.Fprintf(os.Stderr, "seckill: second signal (%s): exiting now\n", s)
		os.Exit(exitSecondSignal)
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}

// exitSecondSignal is the exit status after a second signal: 128 + SIGINT,
// as a shell reports an interrupted command.
const exitSecondSignal = 130
