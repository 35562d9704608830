// Package redistest starts private Redis servers for tests, built from the
// installed redis-server in the test's temporary directory on free ports
// and gone when the test ends: a standalone server that can be killed and
// started again (with replicas), Sentinels watching it, and a Redis Cluster
// of three masters. All three start and stop their processes, wait for
// them and explain a failed start through the same few helpers below.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// startTimeout bounds how long a server, a replica link, a set of
// sentinels or a cluster may take to become ready.
const startTimeout = 30 * time.Second

// redisServer returns the path of the installed redis-server, which what
// (as "Redis Cluster") needs. Without it the test skips, or fails when
// servicetest.Required.
func redisServer(t testing.TB, what string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if servicetest.Required() {
			t.Fatalf("%s is required (SECKILL_TEST_REQUIRE_SERVICES=1) but redis-server is not installed: %v", what, err)
		}
		t.Skipf("skipping: %s needs redis-server on PATH: %v", what, err)
	}
	return bin
}

// process is one redis-server (or sentinel) this package started.
type process struct {
	cmd *exec.Cmd
	// done is closed once the process has exited, with err set to why.
	done chan struct{}
	err  error
}

// startProcess starts bin with args and watches for its exit.
func startProcess(bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// kill ends the process with SIGKILL (no shutdown, no final fsync) and
// waits until it has exited.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// errExited is poll's answer when the process it watched quit.
var errExited = errors.New("exited")

// poll calls ready every interval until it reports true (poll returns
// nil), the process exited closes (errExited; nil waits on no process) or
// ctx ends (its cause).
func poll(ctx context.Context, interval time.Duration, exited <-chan struct{}, ready func() bool) error {
	for !ready() {
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(interval):
		}
	}
	return nil
}

// dial connects to one node directly (not as a Cluster client), retrying
// while the server starts.
func dial(ctx context.Context, addr string) (rueidis.Client, error) {
	var err error
	var c rueidis.Client
	perr := poll(ctx, 20*time.Millisecond, nil, func() bool {
		c, err = rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{addr},
			ForceSingleClient: true,
			DisableCache:      true,
		})
		if err == nil {
			if err = c.Do(ctx, c.B().Ping().Build()).Error(); err == nil {
				return true
			}
			c.Close()
		}
		return false
	})
	if perr != nil {
		return nil, fmt.Errorf("%s: redis-server did not answer: %w (%v)", addr, perr, err)
	}
	return c, nil
}

// freePorts returns n distinct ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTail returns the end of the log at path, to explain a failed start.
func logTail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}
