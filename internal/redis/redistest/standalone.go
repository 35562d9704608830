package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// Server is a private standalone redis-server that a test may stop and
// start again on the same port, as an operator's Redis restarts: killed
// with SIGKILL (as a power loss ends it), its data directory rolled back to
// a snapshot, started again. Without persistence arguments it comes back
// empty.
type Server struct {
	// Addr is host:port; it stays the same across restarts.
	Addr string
	// Dir is the server's working directory (its AOF and RDB files).
	Dir string

	t    testing.TB
	bin  string
	port int
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer starts a redis-server with args (e.g. "--appendonly",
// "yes") on a free port in a temporary directory and waits until it
// answers. It is killed when the test ends. Without redis-server the test
// skips (or fails, when servicetest.Required).
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if servicetest.Required() {
			t.Fatalf("redis-server is required (SECKILL_TEST_REQUIRE_SERVICES=1) but not installed: %v", err)
		}
		t.Skipf("skipping: needs redis-server on PATH: %v", err)
	}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{t: t, bin: bin, port: ports[0], args: args, Dir: t.TempDir()}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.Start(); err == nil {
			t.Cleanup(s.Kill)
			return s
		}
		if attempt == 3 {
			t.Fatalf("redistest: start redis-server: %v", err)
		}
	}
}

// Start starts the (stopped) server again on its port and directory and
// waits until it answers, loading its data first.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redis-server on %s is running", s.Addr)
	}
	args := append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.Dir,
		"--logfile", "redis.log", "--protected-mode", "no", "--save", "",
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		c, err := dial(ctx, s.Addr)
		if err == nil {
			// Answering PING while loading the AOF is not ready yet.
			info, ierr := c.Do(ctx, c.B().Info().Section("persistence").Build()).ToString()
			c.Close()
			if ierr == nil && !containsLine(info, "loading:1") {
				return nil
			}
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("redis-server on %s exited at start: %s", s.Addr, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("redis-server on %s not ready: %v", s.Addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Stop kills the server and waits until it is gone. Safe to call twice.
func (s *Server) Stop() { s.Kill() }

// Restart starts the stopped server again on its port and waits until it
// answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

// Kill ends the server with SIGKILL (no shutdown, no final fsync) and
// waits for it to exit. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Snapshot copies the server's directory (as the disk would hold it now)
// to a new temporary directory and returns it.
func (s *Server) Snapshot() (string, error) {
	dst := s.t.TempDir()
	return dst, copyTree(s.Dir, dst)
}

// Restore replaces the (stopped) server's directory with a snapshot: a
// power loss that lost whatever the disk had not made durable.
func (s *Server) Restore(snapshot string) error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "redis.log" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.Dir, e.Name())); err != nil {
			return err
		}
	}
	return copyTree(snapshot, s.Dir)
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == "redis.log" {
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

func (s *Server) logTail() string {
	data, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

func containsLine(text, line string) bool {
	for len(text) > 0 {
		i := 0
		for i < len(text) && text[i] != '\n' {
			i++
		}
		l := text[:i]
		if len(l) > 0 && l[len(l)-1] == '\r' {
			l = l[:len(l)-1]
		}
		if l == line {
			return true
		}
		if i == len(text) {
			break
		}
		text = text[i+1:]
	}
	return false
}

// StartReplica starts a redis-server replicating primary and waits until
// the link is up.
func StartReplica(t testing.TB, primary *Server, args ...string) *Server {
	t.Helper()
	host, port, _ := net.SplitHostPort(primary.Addr)
	r := StartServer(t, append([]string{"--replicaof", host, port}, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		c, err := dial(ctx, r.Addr)
		if err == nil {
			info, _ := c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
			c.Close()
			if containsLine(info, "master_link_status:up") {
				return r
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("replica %s: link to %s not up: %v", r.Addr, primary.Addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
