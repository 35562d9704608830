package secrets

import (
	"os"
	"path/filepath"
	"strings"
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

// TestRefusesOpenFile: a secrets file its group or others can read or
// write is refused, and so is one whose secrets are short.
func TestRefusesOpenFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, File)
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o602, 0o644, 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: err %v, want refused", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreate(dir); err != nil {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}

	short := t.TempDir()
	if err := os.WriteFile(filepath.Join(short, File), []byte(`{"jwt_secret":"short","admin_token":"`+strings.Repeat("a", 32)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(short); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short jwt_secret: err %v, want refused", err)
	}
}

func TestCheck(t *testing.T) {
	if err := Check("x", strings.Repeat("a", 31)); err == nil {
		t.Error("31 bytes accepted")
	}
	if err := Check("x", strings.Repeat("a", 32)); err != nil {
		t.Error(err)
	}
}
