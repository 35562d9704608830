// Package secrets keeps the secrets of a deployment that configures none:
// the JWT secret and the admin token are generated on first start and kept
// in the data directory, so that a restart keeps tokens valid.
package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Values are the secrets one data directory keeps.
type Values struct {
	JWTSecret  string `json:"jwt_secret"`
	AdminToken string `json:"admin_token"`
}

// File is the name of the secrets file in the data directory.
const File = "secrets.json"

// MinBytes is the least length of a secret: an HS256 key or a bearer token
// shorter than 32 bytes is within reach of offline guessing (a token seen
// once, signed with a short secret, can be brute-forced).
const MinBytes = 32

// Check refuses a configured secret shorter than MinBytes. name says where
// it came from, for the error.
func Check(name, value string) error {
	if len(value) < MinBytes {
		return fmt.Errorf("%s is %d bytes: want at least %d (e.g. openssl rand -hex 32)", name, len(value), MinBytes)
	}
	return nil
}

// LoadOrCreate reads dir/secrets.json, creating it with fresh random
// values when absent. generated is true when the file was written now.
func LoadOrCreate(dir string) (s Values, generated bool, err error) {
	path := filepath.Join(dir, File)
	b, err := readPrivate(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &s); err != nil {
			return s, false, fmt.Errorf("read %s: %w", path, err)
		}
		if s.JWTSecret == "" || s.AdminToken == "" {
			return s, false, fmt.Errorf("read %s: jwt_secret and admin_token must both be set", path)
		}
		if err := errors.Join(Check(path+" jwt_secret", s.JWTSecret), Check(path+" admin_token", s.AdminToken)); err != nil {
			return s, false, err
		}
		return s, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return s, false, fmt.Errorf("read secrets: %w", err)
	}
	s = Values{JWTSecret: randomToken(32), AdminToken: randomToken(32)}
	b, _ = json.MarshalIndent(s, "", "  ")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return s, false, fmt.Errorf("create data dir: %w", err)
	}
	// O_EXCL: two processes starting at once must not both write, or the
	// loser's tokens would be invalid after its restart.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreate(dir)
	} else if err != nil {
		return s, false, fmt.Errorf("write secrets: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return s, false, fmt.Errorf("write secrets: %w", err)
	}
	return s, true, f.Close()
}

// readPrivate reads the secrets file, refusing one that its group or
// others may read or write: whoever reads it can act as any buyer and as
// the operator, and whoever writes it chooses the secrets.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("secrets file %s has mode %04o: its group and others must have no access (chmod 600 %s)", path, perm, path)
	}
	return io.ReadAll(f)
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
