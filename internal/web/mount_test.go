package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/jwt"
)

type soldOutReserver struct{}

func (soldOutReserver) Reserve(context.Context, string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return seckill.ReserveResult{Outcome: seckill.OutcomeSoldOut}, nil
}

// TestMountBesideTheAPI mounts the pages and the API on one mux the way
// cmd/seckill is to: the API's handler on "/", then Routes. Each request
// must reach its owner, and neither registration may panic on a conflict.
func TestMountBesideTheAPI(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.DemoLogin = func(n string) (string, error) { return "tok-" + n, nil } })
	api, err := httpapi.New(httpapi.Config{
		Sales:      f.sales,
		Stock:      f.stock,
		Reserver:   soldOutReserver{},
		Verifier:   jwt.NewVerifier([]byte("secret-for-the-mount-test-0123456789")),
		AdminToken: testAdminToken,
	})
	if err != nil {
		t.Fatal(err)
	}
	root := http.NewServeMux()
	root.Handle("/", api.Handler())
	f.h.Routes(root)
	srv := httptest.NewServer(root)
	defer srv.Close()

	type route struct {
		method, path, auth, body string
		status                   int
		owner                    string // "web" or "api": told apart by content
	}
	routes := []route{
		{"GET", "/", "", "", 200, "web"},
		{"GET", "/sales/tea", "", "", 200, "web"},
		{"GET", "/admin", "", "", 200, "web"},
		{"GET", "/static/buyer.js", "", "", 200, "web"},
		{"GET", "/api/v1/time", "", "", 200, "web"},
		{"POST", "/demo/v1/login", "", `{"name":"ann"}`, 200, "web"},
		{"POST", "/admin/v1/sse-ticket", testAdminToken, `{"sale_id":"tea"}`, 200, "web"},
		{"GET", "/admin/v1/sales/tea/events", "", "", 401, "web"},
		{"GET", "/api/v1/sales/tea", "", "", 200, "api"},
		{"GET", "/admin/v1/sales/tea", testAdminToken, "", 200, "api"},
		{"POST", "/admin/v1/sales/tea/preheat", testAdminToken, "", 200, "api"},
		{"GET", "/healthz", "", "", 200, "api"},
		{"GET", "/metrics", "", "", 200, "api"},
		{"GET", "/nothing-here", "", "", 404, "api"},
		{"POST", "/api/v1/time", "", "", 404, "api"},
	}
	for _, rt := range routes {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			var body io.Reader
			if rt.body != "" {
				body = strings.NewReader(rt.body)
			}
			req, _ := http.NewRequest(rt.method, srv.URL+rt.path, body)
			if rt.auth != "" {
				req.Header.Set("Authorization", "Bearer "+rt.auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != rt.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, b, rt.status)
			}
			// The API's errors carry its own wording; a page or an
			// asset is ours; a JSON answer is told apart by its keys.
			owner := "api"
			ct := resp.Header.Get("Content-Type")
			switch {
			case !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/plain"):
				if strings.HasPrefix(ct, "text/html") || strings.HasPrefix(ct, "text/javascript") {
					owner = "web"
				}
			default:
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				_, isTime := m["unix_ms"]
				_, isTicket := m["ticket"]
				_, isToken := m["token"]
				e, _ := m["error"].(map[string]any)
				if isTime || isTicket || isToken || (e != nil && strings.Contains(e["message"].(string), "ticket")) {
					owner = "web"
				}
			}
			if owner != rt.owner {
				t.Errorf("answered by %s (%s %s), want %s", owner, ct, b, rt.owner)
			}
		})
	}
}
