// Command seckill runs the flash-sale engine and its tools. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/seckill-dev/seckill/internal/bench"
)

func main() {
	if bench.IsChild() { // bench's load generator runs in a process of its own
		os.Exit(bench.ChildMain(os.Stdin, os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
