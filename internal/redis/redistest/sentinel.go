package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sentinels are private Redis Sentinels (redis-server --sentinel) watching
// one primary under MasterSet.
type Sentinels struct {
	// Addrs are the sentinels' host:port.
	Addrs []string
	// MasterSet is the name the sentinels monitor the primary under.
	MasterSet string

	mu    sync.Mutex
	procs []*process
	dirs  []string
}

// URL is the redis:// URL a client (rueidis) connects through: every
// sentinel, and master_set.
func (s *Sentinels) URL() string {
	u := "redis://" + s.Addrs[0] + "?master_set=" + s.MasterSet
	for _, a := range s.Addrs[1:] {
		u += "&addr=" + a
	}
	return u
}

// SentinelTiming is how fast the sentinels act.
type SentinelTiming struct {
	// DownAfter is down-after-milliseconds: how long the primary must not
	// answer before a sentinel calls it down.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout.
	FailoverTimeout time.Duration
}

// StartSentinels starts n sentinels monitoring primary with the given
// quorum, each with a generated config in its own temporary directory on a
// free port, and waits until every sentinel sees the primary, its
// replicas (wantReplicas of them) and the other n-1 sentinels: from then a
// failover can happen. They are killed when the test ends. Without
// redis-server the test skips (or fails, when servicetest.Required).
func StartSentinels(t testing.TB, primary *Server, n, quorum, wantReplicas int, timing SentinelTiming) *Sentinels {
	t.Helper()
	bin := redisServer(t, "Redis Sentinel")
	if timing.DownAfter <= 0 {
		timing.DownAfter = time.Second
	}
	if timing.FailoverTimeout <= 0 {
		timing.FailoverTimeout = 3 * time.Second
	}
	s := &Sentinels{MasterSet: "seckill"}
	t.Cleanup(s.stop)
	host, port, _ := net.SplitHostPort(primary.Addr)
	ports, err := freePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		dir := t.TempDir()
		conf := fmt.Sprintf(`bind 127.0.0.1
port %d
protected-mode no
dir %s
logfile sentinel.log
sentinel monitor %s %s %s %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, ports[i], dir, s.MasterSet, host, port, quorum,
			s.MasterSet, timing.DownAfter.Milliseconds(),
			s.MasterSet, timing.FailoverTimeout.Milliseconds(), s.MasterSet)
		path := filepath.Join(dir, "sentinel.conf") // the sentinel rewrites it
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := startProcess(bin, path, "--sentinel")
		if err != nil {
			t.Fatalf("redistest: start sentinel: %v", err)
		}
		s.mu.Lock()
		s.procs, s.dirs = append(s.procs, p), append(s.dirs, dir)
		s.mu.Unlock()
		s.Addrs = append(s.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i])))
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for i, addr := range s.Addrs {
		var m map[string]string
		perr := poll(ctx, 50*time.Millisecond, s.procs[i].done, func() bool {
			m, err = s.masterInfo(ctx, addr)
			return err == nil && m["num-slaves"] == strconv.Itoa(wantReplicas) &&
				m["num-other-sentinels"] == strconv.Itoa(n-1) && !strings.Contains(m["flags"], "down")
		})
		switch {
		case errors.Is(perr, errExited):
			t.Fatalf("redistest: sentinel %s exited at start: %s", addr, s.logTail(i))
		case perr != nil:
			t.Fatalf("redistest: sentinel %s not ready (want %d replicas, %d other sentinels): %v %v\n%s", addr, wantReplicas, n-1, m, err, s.logTail(i))
		}
	}
	return s
}

// masterInfo is SENTINEL MASTER <set> as a map.
func (s *Sentinels) masterInfo(ctx context.Context, addr string) (map[string]string, error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Arbitrary("SENTINEL", "MASTER").Args(s.MasterSet).Build()).AsStrMap()
}

// Master returns the primary's host:port as the sentinel at addr sees it
// (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (s *Sentinels) Master(ctx context.Context, addr string) (string, error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	hp, err := c.Do(ctx, c.B().SentinelGetMasterAddrByName().Master(s.MasterSet).Build()).AsStrSlice()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: master %v", addr, hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// WaitFailover waits until every sentinel names a primary other than old
// and returns it.
func (s *Sentinels) WaitFailover(ctx context.Context, old string) (string, error) {
	var agreed, last string
	if err := poll(ctx, 50*time.Millisecond, nil, func() bool {
		agreed, last = s.agreedMaster(ctx)
		if agreed == old {
			last = "still " + old
		}
		return agreed != "" && agreed != old
	}); err != nil {
		return "", fmt.Errorf("no failover from %s: %w (last %s)\n%s", old, err, last, s.logTail(0))
	}
	return agreed, nil
}

// agreedMaster is the primary every sentinel names, or "" and why not.
func (s *Sentinels) agreedMaster(ctx context.Context) (string, string) {
	agreed := ""
	for _, addr := range s.Addrs {
		m, err := s.Master(ctx, addr)
		if err != nil || (agreed != "" && m != agreed) {
			return "", fmt.Sprintf("%s: %s %v", addr, m, err)
		}
		agreed = m
	}
	return agreed, ""
}

// WaitReplicated waits until the sentinels agree on a primary that reports
// n online replicas, and returns that primary. It is not necessarily the
// one they named last: on a loaded machine a busy primary can miss
// down-after and be failed over again, so the topology is whatever the
// sentinels settle on.
func (s *Sentinels) WaitReplicated(ctx context.Context, n int) (string, error) {
	var m, last string
	if err := poll(ctx, 50*time.Millisecond, nil, func() bool {
		if m, last = s.agreedMaster(ctx); m == "" {
			return false
		}
		info, ok := replicated(ctx, m, n)
		last = fmt.Sprintf("%s: INFO replication %q", m, info)
		return ok
	}); err != nil {
		tails := ""
		for i := range s.Addrs {
			tails += "\n" + s.Addrs[i] + ":\n" + s.logTail(i)
		}
		return "", fmt.Errorf("no primary with %d online replicas: %w (last %s)%s", n, err, last, tails)
	}
	return m, nil
}

func (s *Sentinels) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		p.kill()
	}
	s.procs = nil
}

func (s *Sentinels) logTail(i int) string { return logTail(filepath.Join(s.dirs[i], "sentinel.log")) }

// replicated reports whether addr is a primary with n online replicas,
// with its INFO replication.
func replicated(ctx context.Context, addr string, n int) (string, bool) {
	info, err := infoOf(ctx, addr, "replication")
	if err != nil {
		return err.Error(), false
	}
	return info, containsLine(info, "role:master") && strings.Count(info, "state=online") >= n
}
