package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Cluster is a running private Redis Cluster.
type Cluster struct {
	// Addrs are the host:port of the masters; Addrs[i] serves the i-th
	// third of the hash slots.
	Addrs []string
}

// URL returns a redis:// URL naming every master as a seed node.
func (c *Cluster) URL() string {
	u := "redis://" + c.Addrs[0]
	for i, a := range c.Addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// masters is the number of masters of a Cluster, each without replicas.
const masters = 3

// StartCluster starts a Redis Cluster of three masters without replicas
// and waits until it reports cluster_state:ok. Every process is killed when
// the test ends. Without a redis-server on PATH the test skips (or fails,
// when servicetest.Required).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := redisServer(t, "Redis Cluster")
	dir := t.TempDir()
	// Ports picked free may be taken by someone else before redis-server
	// binds them; a fresh set usually works.
	for attempt := 1; ; attempt++ {
		c, err := start(t, bin, filepath.Join(dir, strconv.Itoa(attempt)))
		if err == nil {
			return c
		}
		if attempt == 3 {
			t.Fatalf("redistest: start Redis Cluster: %v", err)
		}
		t.Logf("redistest: start Redis Cluster (attempt %d): %v", attempt, err)
	}
}

func start(t testing.TB, bin, dir string) (*Cluster, error) {
	ports, err := freePorts(2 * masters) // a client port and a bus port each
	if err != nil {
		return nil, err
	}
	var procs []*process
	exited := make(chan error, masters) // a node that quit early failed to start
	stop := func() {
		for _, p := range procs {
			p.kill()
		}
	}
	c := &Cluster{}
	for i := range masters {
		port, bus := ports[2*i], ports[2*i+1]
		nodeDir := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			stop()
			return nil, err
		}
		p, err := startProcess(bin,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
			"--dir", nodeDir, "--logfile", "redis.log",
			"--save", "", "--appendonly", "no", "--protected-mode", "no")
		if err != nil {
			stop()
			return nil, err
		}
		go func() {
			<-p.done
			exited <- fmt.Errorf("redis-server on port %d exited: %v", port, p.err)
		}()
		procs = append(procs, p)
		c.Addrs = append(c.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	if err := join(c.Addrs, ports, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s", err, logTails(dir))
	}
	t.Cleanup(stop)
	return c, nil
}

// join gives each master a third of the slots (as redis-cli would),
// introduces them to each other and waits until every node sees all slots
// covered.
func join(addrs []string, ports []int, exited <-chan error) error {
	tctx, tcancel := context.WithTimeoutCause(context.Background(), startTimeout,
		fmt.Errorf("cluster not ready within %s", startTimeout))
	defer tcancel()
	ctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	go func() { // a node that quits now failed to start: stop waiting for it
		select {
		case err := <-exited:
			cancel(err)
		case <-ctx.Done():
		}
	}()
	clients := make([]rueidis.Client, len(addrs))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, addr := range addrs {
		c, err := dial(ctx, addr)
		if err != nil {
			return err
		}
		clients[i] = c
	}
	// The slots split as redis-cli --cluster create splits them: the i-th
	// of n masters ends at round((i+1)·16384/n) - 1 (5460, 10922, 16383).
	const slots = 16384
	n := len(clients)
	for i, c := range clients {
		lo, hi := (2*i*slots+n)/(2*n), (2*(i+1)*slots+n)/(2*n)-1
		if err := c.Do(ctx, c.B().Arbitrary("CLUSTER", "ADDSLOTSRANGE").Args(strconv.Itoa(lo), strconv.Itoa(hi)).Build()).Error(); err != nil {
			return fmt.Errorf("%s: cluster addslotsrange: %w", addrs[i], err)
		}
	}
	for i := 1; i < len(addrs); i++ {
		err := clients[0].Do(ctx, clients[0].B().Arbitrary("CLUSTER", "MEET").
			Args("127.0.0.1", strconv.Itoa(ports[2*i]), strconv.Itoa(ports[2*i+1])).Build()).Error()
		if err != nil {
			return fmt.Errorf("cluster meet %s: %w", addrs[i], err)
		}
	}
	for i, c := range clients {
		var info string
		var err error
		if perr := poll(ctx, 50*time.Millisecond, nil, func() bool {
			info, err = c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
			return err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(addrs)))
		}); perr != nil {
			return fmt.Errorf("%s: no cluster_state:ok: %w (last CLUSTER INFO %q, %v)", addrs[i], perr, info, err)
		}
	}
	return nil
}

// logTails returns the end of every node's log, to explain a failed start.
func logTails(dir string) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "node*", "redis.log"))
	var b strings.Builder
	for _, l := range logs {
		fmt.Fprintf(&b, "--- %s\n%s\n", l, logTail(l))
	}
	return b.String()
}
