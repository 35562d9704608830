package main

import (
	"os"
	"testing"

	"github.com/seckill-dev/seckill/internal/bench"
)

// TestMain lets the test binary be bench's load generator too: bench
// starts the running executable again for it.
func TestMain(m *testing.M) {
	if bench.IsChild() {
		os.Exit(bench.ChildMain(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}
