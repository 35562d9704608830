package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Every subcommand tears down what it started: servers, workers, clients.
// With SECKILL_TEST_RUN_MAIN=1 the test binary is the seckill command
// instead (the shutdown tests run it as a process to send it signals).
func TestMain(m *testing.M) {
	if os.Getenv("SECKILL_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m,
		// A rueidis timer that outlives a closed client by a few seconds.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}
