package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill/internal/bench"
)

// Every subcommand tears down what it started: servers, workers, clients.
// The test binary is also bench's load generator: bench starts the running
// executable again for it. With SECKILL_TEST_RUN_MAIN=1 it is the seckill
// command instead (the shutdown tests run it as a process to send it
// signals).
func TestMain(m *testing.M) {
	if bench.IsChild() {
		os.Exit(bench.ChildMain(os.Stdin, os.Stdout))
	}
	if os.Getenv("SECKILL_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m,
		// A rueidis timer that outlives a closed client by a few seconds.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		// toxiproxy v2.5.0 (the newest the module proxy serves; the
		// partition suite's nemesis) leaves a link's toxic stub blocked on
		// its output channel when the link is torn down mid-write; it
		// holds nothing but the channel.
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.Cleanup(func(code int) {
			removeSeckillBinary()
			os.Exit(code)
		}))
}
