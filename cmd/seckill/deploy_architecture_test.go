package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage: docs/architecture.md, a newcomer's
// map of the code, has a row naming each package under internal/, and
// names none that is gone.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir(filepath.Join("..", "..", "internal"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, d := range dirs {
		if d.IsDir() {
			have[d.Name()] = true
			if !strings.Contains(string(doc), "`internal/"+d.Name()+"`") {
				t.Errorf("docs/architecture.md does not name internal/%s", d.Name())
			}
		}
	}
	if len(have) < 10 {
		t.Fatalf("internal/ has %d packages: wrong directory?", len(have))
	}
	for _, part := range strings.Split(string(doc), "`internal/")[1:] {
		name, _, ok := strings.Cut(part, "`")
		if ok && !strings.Contains(name, "/") && !have[name] {
			t.Errorf("docs/architecture.md names internal/%s, which does not exist", name)
		}
	}
}
