// Command seckill runs the flash-sale engine and its tools. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/seckill-dev/seckill/internal/bench"
)

func main() {
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
