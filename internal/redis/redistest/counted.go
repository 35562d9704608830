package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Counted is a private redis-server run under valgrind's callgrind, which
// counts the instructions the server executes. The count of a piece of
// work is the same on a busy machine as on an idle one, where its CPU time
// is not, so benchmarks compare Redis scripts by it. The server runs about
// fifty times slower than a plain one.
type Counted struct {
	// Addr is host:port.
	Addr string

	out  string // callgrind's output file; dump n goes to out.n
	pid  string
	dump int
}

// StartCounted starts a counted redis-server on a free port and waits
// until it answers; it is killed when the test ends. Without redis-server,
// valgrind or callgrind_control the test skips: the count is a
// measurement, not something CI must have.
func StartCounted(t testing.TB) *Counted {
	t.Helper()
	bin := redisServer(t, "a counted redis-server")
	valgrind, err := exec.LookPath("valgrind")
	if err == nil {
		_, err = exec.LookPath("callgrind_control")
	}
	if err != nil {
		t.Skipf("skipping: counting Redis instructions needs valgrind and callgrind_control: %v", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &Counted{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), out: filepath.Join(dir, "callgrind.out")}
	p, err := startProcess(valgrind, "--tool=callgrind", "--callgrind-out-file="+c.out, "--log-file="+filepath.Join(dir, "valgrind.log"),
		bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--dir", dir, "--save", "", "--appendonly", "no")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	c.pid = strconv.Itoa(p.cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 4*startTimeout) // valgrind starts slowly
	defer cancel()
	client, err := dial(ctx, c.Addr)
	if err != nil {
		t.Fatalf("redistest: counted redis-server: %v\n%s", err, logTail(filepath.Join(dir, "valgrind.log")))
	}
	client.Close()
	return c
}

// Count returns the instructions the server executed while work ran.
func (c *Counted) Count(work func()) (int64, error) {
	if err := exec.Command("callgrind_control", "-z", c.pid).Run(); err != nil {
		return 0, fmt.Errorf("callgrind_control -z: %w", err)
	}
	work()
	if err := exec.Command("callgrind_control", "-d", c.pid).Run(); err != nil {
		return 0, fmt.Errorf("callgrind_control -d: %w", err)
	}
	c.dump++
	// The dump is written by the server's next instrumented step: wait
	// for its totals line.
	path := c.out + "." + strconv.Itoa(c.dump)
	deadline := time.Now().Add(startTimeout)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "totals: "); ok {
					return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no totals in %s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
