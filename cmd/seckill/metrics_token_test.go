package main

import (
	"net/http"
	"testing"
)

// TestMetricsTokenWired: --metrics-token reaches a running node: /metrics
// refuses a request without it (401) and answers the scraper that sends
// it, while /healthz stays open for the load balancer.
func TestMetricsTokenWired(t *testing.T) {
	const tok = "metrics-token-0123456789abcdefghij"
	e := startEngine(t, func(c *Config) { c.MetricsToken = tok })
	if r := e.do("GET", "/metrics", "", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d", r.status)
	}
	if r := e.do("GET", "/metrics", tok, nil); r.status != http.StatusOK {
		t.Fatalf("/metrics with the token: %d", r.status)
	}
	if r := e.do("GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Fatalf("/healthz: %d", r.status)
	}
}
