package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// Server is a private standalone redis-server that a test may stop and
// start again on the same port, as an operator's Redis restarts. It keeps
// an append-only file synced on every write, so it comes back with every
// acknowledged write.
type Server struct {
	// Addr is its host:port, the same across restarts.
	Addr string
	bin  string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer starts a standalone redis-server on a free port and waits
// until it answers. It is killed when the test ends. Without a
// redis-server on PATH the test skips (or fails, when servicetest.Required).
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if servicetest.Required() {
			t.Fatalf("redis-server is required (SECKILL_TEST_REQUIRE_SERVICES=1) but not installed: %v", err)
		}
		t.Skipf("skipping: a private Redis needs redis-server on PATH: %v", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), bin: bin, dir: t.TempDir()}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Stop kills the server and waits until it is gone. Safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the stopped server again on its port and waits until it
// answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("redis-server on %s is running already", s.Addr)
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--dir", s.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := dial(ctx, s.Addr)
	if err != nil {
		_ = cmd.Process.Kill()
		<-done
		return err
	}
	c.Close()
	s.cmd, s.done = cmd, done
	return nil
}
