package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/seckill-dev/seckill"
)

// TestOpenAPIMatchesRoutes checks that docs/openapi.yaml documents exactly
// the (method, path) pairs internal/httpapi registers, read from the route
// table of Server.routes in server.go. The pprof debug routes (registered
// under the pprofPrefix constant, not a path literal) are not the API.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "internal", "httpapi", "server.go"))
	if err != nil {
		t.Fatal(err)
	}
	body := string(src)
	start := strings.Index(body, "func (s *Server) routes() {")
	if start < 0 {
		t.Fatal("server.go has no Server.routes")
	}
	end := strings.Index(body[start:], "\n}\n")
	body = body[start : start+end]
	entry := regexp.MustCompile(`\{"([A-Z]+)", ([^,]+),`)
	registered := map[string]bool{}
	for _, m := range entry.FindAllStringSubmatch(body, -1) {
		path := m[2]
		if path == "pprofPrefix" {
			continue
		}
		if !strings.HasPrefix(path, `"`) {
			t.Errorf("route %s %s: path is not a literal; teach this test about it", m[1], path)
			continue
		}
		registered[m[1]+" "+strings.Trim(path, `"`)] = true
	}
	if len(registered) < 20 {
		t.Fatalf("read only %d routes from server.go: %v", len(registered), registered)
	}

	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi: %q, want 3.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
			if _, ok := op["responses"]; !ok {
				t.Errorf("%s %s has no responses", method, path)
			}
		}
	}
	var missing, extra []string
	for r := range registered {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for r := range documented {
		if !registered[r] {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, r := range missing {
		t.Errorf("route %s is registered but not in docs/openapi.yaml", r)
	}
	for _, r := range extra {
		t.Errorf("docs/openapi.yaml documents %s, which server.go does not register", r)
	}
}

// TestOpenAPIFailReasons: the reasons docs/openapi.yaml lists for a failed
// reservation are the codes the API gives (seckill.BuyerFailReason).
func TestOpenAPIFailReasons(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `yaml:"enum"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	got := doc.Components.Schemas["Reservation"].Properties["reason"].Enum
	want := seckill.BuyerFailReasonCodes()
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("openapi.yaml's Reservation.reason enum %v; the API gives %v", got, want)
	}
}
