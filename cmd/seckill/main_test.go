package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Every subcommand tears down what it started: servers, workers, clients.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A rueidis timer that outlives a closed client by a few seconds.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}
