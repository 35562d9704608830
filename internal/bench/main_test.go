package bench

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The test binary is also the load generator: Measure starts the running
// executable again for it.
func TestMain(m *testing.M) {
	if IsChild() {
		os.Exit(ChildMain(os.Stdin, os.Stdout))
	}
	goleak.VerifyTestMain(m,
		// A rueidis timer that outlives a closed client by a few seconds.
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}
