package main

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// The demo login mints a token for any name: only `seckill demo` turns it
// on by itself; serve needs --demo-login on, and then warns at start.
func TestDemoLoginOffUnlessAskedFor(t *testing.T) {
	if got := DefaultConfig().DemoLogin; got != "off" {
		t.Errorf("serve's default demo login = %q, want off", got)
	}
	if got := demoConfig().DemoLogin; got != "on" {
		t.Errorf("demo's default demo login = %q, want on", got)
	}
	bad := DefaultConfig()
	bad.DemoLogin = "auto"
	if _, err := bad.demoLogin(); err == nil {
		t.Error(`demo login "auto" accepted; want an error naming on and off`)
	}

	for _, tc := range []struct {
		setting    string
		wantStatus int
		wantWarn   bool
	}{
		{"off", http.StatusNotFound, false},
		{"on", http.StatusOK, true},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			logs := &servicetest.Buffer{}
			e := startEngine(t, func(c *Config) { c.DemoLogin = tc.setting }, func(m *Main) {
				m.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			})
			r := e.do("POST", "/demo/v1/login", "", map[string]any{"name": "mallory"}, "Content-Type", "application/json")
			if r.status != tc.wantStatus {
				t.Errorf("POST /demo/v1/login with --demo-login %s: %d %v, want %d", tc.setting, r.status, r.body, tc.wantStatus)
			}
			warned := strings.Contains(logs.String(), "anyone who reaches POST /demo/v1/login can act as any buyer")
			if warned != tc.wantWarn {
				t.Errorf("start-up warning logged = %v, want %v; logs:\n%s", warned, tc.wantWarn, logs.String())
			}
		})
	}
}
