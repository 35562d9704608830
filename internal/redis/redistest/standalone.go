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
	proc *process // nil while stopped
}

// StartServer starts a redis-server with args (e.g. "--appendonly",
// "yes") on a free port in a temporary directory and waits until it
// answers. It is killed when the test ends. Without redis-server the test
// skips (or fails, when servicetest.Required).
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := redisServer(t, "a private redis-server")
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
	if s.proc != nil {
		return fmt.Errorf("redis-server on %s is running", s.Addr)
	}
	p, err := startProcess(s.bin, append([]string{
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.Dir,
		"--logfile", "redis.log", "--protected-mode", "no", "--save", "",
	}, s.args...)...)
	if err != nil {
		return err
	}
	s.proc = p
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// Answering PING while loading the AOF is not ready yet.
	perr := poll(ctx, 20*time.Millisecond, p.done, func() bool {
		var info string
		info, err = infoOf(ctx, s.Addr, "persistence")
		return err == nil && !containsLine(info, "loading:1")
	})
	switch {
	case errors.Is(perr, errExited):
		s.proc = nil
		return fmt.Errorf("redis-server on %s exited at start: %s", s.Addr, logTail(filepath.Join(s.Dir, "redis.log")))
	case perr != nil:
		return fmt.Errorf("redis-server on %s not ready: %v", s.Addr, err)
	}
	return nil
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
	if s.proc == nil {
		return
	}
	s.proc.kill()
	s.proc = nil
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

// containsLine reports whether line is one of text's lines (INFO ends
// them with \r\n).
func containsLine(text, line string) bool {
	for l := range strings.Lines(text) {
		if strings.TrimRight(l, "\r\n") == line {
			return true
		}
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
	var err error
	if perr := poll(ctx, 20*time.Millisecond, nil, func() bool {
		var info string
		info, err = infoOf(ctx, r.Addr, "replication")
		return containsLine(info, "master_link_status:up")
	}); perr != nil {
		t.Fatalf("replica %s: link to %s not up: %v", r.Addr, primary.Addr, err)
	}
	return r
}

// infoOf is the INFO section of the server at addr.
func infoOf(ctx context.Context, addr, section string) (string, error) {
	c, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
}
