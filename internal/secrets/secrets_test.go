package secrets

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadOrCreate: the first call generates and keeps the secrets, later
// ones read the same back; a file missing one of them is refused.
func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, generated, err := LoadOrCreate(dir)
	if err != nil || !generated {
		t.Fatalf("first call: generated %v, err %v; want a new file", generated, err)
	}
	if first.JWTSecret == "" || first.AdminToken == "" || first.JWTSecret == first.AdminToken {
		t.Fatalf("generated %+v; want two distinct secrets", first)
	}
	if fi, err := os.Stat(filepath.Join(dir, File)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets file: %v, %v; want mode 0600", fi, err)
	}
	again, generated, err := LoadOrCreate(dir)
	if err != nil || generated || again != first {
		t.Fatalf("second call: %+v generated %v err %v; want %+v read back", again, generated, err, first)
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, File), []byte(`{"jwt_secret":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(bad); err == nil {
		t.Error("a file without admin_token was accepted")
	}
}
