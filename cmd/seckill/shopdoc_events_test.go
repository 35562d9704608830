package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

// TestShopDocOrderEvents runs docs/shop.md's order-event example: its
// exports (the secret made by its openssl line) configure the engine, and
// its receiver, compiled and run as written on another port, gets the
// order.created of a claim, verified; it refuses a tampered body.
func TestShopDocOrderEvents(t *testing.T) {
	block := shopDocBlock(t, "## Order events")
	receiver := shopDocCode(t, "## Order events", "go")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH: cannot run docs/shop.md's receiver")
	}

	// The exports, evaluated by bash as a shell would.
	var exports []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "export ") {
			exports = append(exports, l)
		}
	}
	out, err := exec.Command("bash", "-c", strings.Join(exports, "\n")+"\necho \"$SECKILL_ORDER_WEBHOOK_URL\"; echo \"$SECKILL_ORDER_WEBHOOK_SECRET\"").Output()
	if err != nil {
		t.Fatalf("docs/shop.md's exports: %v", err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(vals) != 2 || len(vals[1]) < webhooksig.MinSecretBytes {
		t.Fatalf("docs/shop.md's exports give %q: want a URL and a secret of %d bytes or more", vals, webhooksig.MinSecretBytes)
	}
	url, secret := vals[0], vals[1]
	const docAddr = "127.0.0.1:9000"
	if !strings.Contains(url, docAddr) || !strings.Contains(receiver, docAddr) {
		t.Fatalf("docs/shop.md's URL %q and receiver must both use %s", url, docAddr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url = strings.Replace(url, docAddr, addr, 1)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "receiver.go"), []byte(strings.Replace(receiver, docAddr, addr, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(gobin, "build", "-o", "receiver", "receiver.go")
	build.Dir = dir
	build.Env = append(os.Environ(), "GO111MODULE=on", "GOFLAGS=-mod=mod")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build docs/shop.md's receiver: %v\n%s", err, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "receiver"))
	cmd.Env = append(os.Environ(), "SECKILL_ORDER_WEBHOOK_SECRET="+secret)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	var (
		mu    sync.Mutex
		lines []string
	)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	servicetest.WaitFor(t, 30*time.Second, "docs/shop.md's receiver to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	e := startEngine(t, func(c *Config) { c.Events.WebhookURL, c.Events.WebhookSecret = url, secret })
	sale := e.liveSale(5, 1)
	r := e.reserve(sale, e.token("readme-buyer"), 1, "")
	if r.status != http.StatusAccepted {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	resID, _ := r.body["reservation_id"].(string)
	var got string
	servicetest.WaitFor(t, 60*time.Second, "the receiver to print the order.created", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, `"type":"order.created"`) && strings.Contains(l, resID) {
				got = l
				return true
			}
		}
		return false
	})
	t.Logf("docs/shop.md's receiver printed %s", got)

	// A body changed after signing is refused; the signed one is taken.
	body := []byte(got)
	sig := webhooksig.Sign(body, time.Now(), []byte(secret))
	for _, c := range []struct {
		body []byte
		want int
	}{{bytes.Replace(body, []byte(`"qty":1`), []byte(`"qty":9`), 1), http.StatusUnauthorized}, {body, http.StatusNoContent}} {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(c.body))
		req.Header.Set(webhooksig.Header, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("POST %s to docs/shop.md's receiver: %d, want %d", c.body, resp.StatusCode, c.want)
		}
	}
}
