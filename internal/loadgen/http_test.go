package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestConnKeepsAliveAndReadsEveryFraming(t *testing.T) {
	var conns atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "%s|%s|%s", r.Header.Get("Authorization"), r.Host, b)
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		// Flushed in pieces: chunked transfer encoding.
		for i := range 5 {
			fmt.Fprint(w, strings.Repeat(string(rune('a'+i)), 3000))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("GET /close", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		fmt.Fprint(w, "bye")
	})
	mux.HandleFunc("HEAD /empty", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	tgt, err := ParseTarget(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(tgt)
	defer c.Close()
	for i := range 100 {
		req := tgt.AppendRequest(nil, "POST", "/echo", fmt.Appendf(nil, `{"n":%d}`, i), Header{"Authorization", "Bearer x"})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`Bearer x|%s|{"n":%d}`, tgt.Host, i); resp.Status != 202 || string(resp.Body) != want || resp.RetryAfter != "3" {
			t.Fatalf("got %d %q (Retry-After %q), want 202 %q", resp.Status, resp.Body, resp.RetryAfter, want)
		}
	}
	resp, err := c.Do(tgt.AppendRequest(nil, "GET", "/big", nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Body) != 15000 || resp.Body[0] != 'a' || resp.Body[14999] != 'e' {
		t.Fatalf("chunked body of %d bytes", len(resp.Body))
	}
	if resp, err := c.Do(tgt.AppendRequest(nil, "HEAD", "/empty", nil)); err != nil || resp.Status != 200 {
		t.Fatalf("HEAD: %d %v", resp.Status, err)
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d connections for 102 requests, want 1 kept alive", got)
	}
	if resp, err := c.Do(tgt.AppendRequest(nil, "GET", "/close", nil)); err != nil || string(resp.Body) != "bye" {
		t.Fatalf("close: %q %v", resp.Body, err)
	}
	if resp, err := c.Do(tgt.AppendRequest(nil, "GET", "/nope", nil)); err != nil || resp.Status != 404 {
		t.Fatalf("after the server closed: %d %v", resp.Status, err)
	}
	if got := conns.Load(); got != 2 {
		t.Fatalf("%d connections, want a second one after Connection: close", got)
	}
}

// TestConnRetriesAStaleConnection: the server closes an idle keep-alive
// connection; the next request goes out again on a fresh one.
func TestConnRetriesAStaleConnection(t *testing.T) {
	var handled atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	tgt, _ := ParseTarget(srv.URL)
	c := NewConn(tgt)
	defer c.Close()
	req := tgt.AppendRequest(nil, "GET", "/", nil)
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	time.Sleep(10 * time.Millisecond) // let the close reach the client side
	resp, err := c.Do(req)
	if err != nil || string(resp.Body) != "ok" {
		t.Fatalf("after an idle close: %q %v", resp.Body, err)
	}
	if handled.Load() != 2 {
		t.Fatalf("handled %d requests, want 2", handled.Load())
	}
}

// TestConnRedialsAConnectionClosedBeforeItsFirstRequest: a connection
// opened ahead of a sale sits idle past the server's header timeout and
// the server closes it. The first request finds it closed before writing,
// dials again and is answered, once.
func TestConnRedialsAConnectionClosedBeforeItsFirstRequest(t *testing.T) {
	var handled, opened, closed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		fmt.Fprint(w, "ok")
	}))
	srv.Config.ReadHeaderTimeout = 50 * time.Millisecond
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tgt, _ := ParseTarget(srv.URL)
	c := NewConn(tgt)
	defer c.Close()
	if err := c.Connect(); err != nil {
		t.Fatal(err)
	}
	servicetest.WaitFor(t, 30*time.Second, "the server to close the idle connection, and the client to see it", func() bool {
		return closed.Load() == 1 && peerClosed(c.c)
	})
	resp, err := c.Do(tgt.AppendRequest(nil, "POST", "/buy", []byte(`{"qty":1}`)))
	if err != nil || string(resp.Body) != "ok" {
		t.Fatalf("first request on a connection the server had closed: %q %v", resp.Body, err)
	}
	if handled.Load() != 1 || opened.Load() != 2 {
		t.Fatalf("handled %d requests on %d connections, want 1 on a second connection", handled.Load(), opened.Load())
	}
}

// TestConnSaysWhetherARequestWasSent: a dial that fails is the client's
// failure (ErrNotSent); a request the server read and never answered is
// not.
func TestConnSaysWhetherARequestWasSent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		buf := make([]byte, 0, 512)
		for !strings.Contains(string(buf), "\r\n\r\n") {
			n, err := nc.Read(buf[len(buf):cap(buf)])
			if err != nil {
				return
			}
			buf = buf[:len(buf)+n]
		}
	}()
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	c := NewConn(Target{Addr: addr, Host: addr})
	c.Timeout = 30 * time.Second
	if _, err := c.Do(req); err == nil || errors.Is(err, ErrNotSent) {
		t.Fatalf("a request read and left unanswered: err %v, want an error that is not ErrNotSent", err)
	}
	<-done
	ln.Close()
	if _, err := c.Do(req); !errors.Is(err, ErrNotSent) {
		t.Fatalf("a request to a closed port: err %v, want ErrNotSent", err)
	}
}

func TestConnFailsAgainstADeadServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := NewConn(Target{Addr: addr, Host: addr})
	c.Timeout = time.Second
	if _, err := c.Do([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
}

func TestParseTarget(t *testing.T) {
	for raw, want := range map[string]Target{
		"http://127.0.0.1:8080": {Addr: "127.0.0.1:8080", Host: "127.0.0.1:8080"},
		"http://localhost/":     {Addr: "localhost:80", Host: "localhost"},
		"http://h:1/prefix/":    {Addr: "h:1", Host: "h:1", Prefix: "/prefix"},
	} {
		if got, err := ParseTarget(raw); err != nil || got != want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"https://h:1", "h:1", "http://", "://"} {
		if _, err := ParseTarget(raw); err == nil {
			t.Errorf("ParseTarget(%q) accepted", raw)
		}
	}
}

// BenchmarkConnVsNetHTTP shows what the lean client saves per request
// against a local hello handler (the generator's own cost).
func BenchmarkConnVsNetHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	tgt, _ := ParseTarget(srv.URL)
	b.Run("loadgen", func(b *testing.B) {
		_, err := Run(context.Background(), Options{Workers: 32, Requests: int64(b.N)}, connOp(tgt, 32))
		if err != nil {
			b.Fatal(err)
		}
	})
	b.Run("net/http", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConnsPerHost: 32}
		defer tr.CloseIdleConnections()
		cl := &http.Client{Transport: tr}
		_, err := Run(context.Background(), Options{Workers: 32, Requests: int64(b.N)}, func(context.Context, Call) error {
			resp, err := cl.Get(srv.URL)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

func connOp(tgt Target, workers int) Op {
	conns := make([]*Conn, workers)
	for i := range conns {
		conns[i] = NewConn(tgt)
	}
	req := tgt.AppendRequest(nil, "GET", "/", nil)
	return func(_ context.Context, c Call) error {
		_, err := conns[c.Worker].Do(req)
		return err
	}
}
