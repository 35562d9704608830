package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/secrets"
)

// runToken prints a buyer JWT. The secret is the configured one, or the
// one the embedded default generated in the data dir.
func runToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	var user string
	var ttl time.Duration
	fs := flagSet("token", stderr)
	fs.StringVar(&user, "user", "", "user id to put in the token's sub claim (required)")
	stringFlag(fs, &cfg.JWTSecret, "jwt-secret", cfg.JWTSecret, "HS256 secret; empty reads the one generated in the data dir")
	stringFlag(fs, &cfg.DataDir, "data-dir", cfg.DataDir, "data directory of the embedded default")
	if err := durationFlag(fs, &ttl, "token-ttl", 24*time.Hour, "how long the token is valid"); err != nil {
		return err
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if user == "" {
		return errors.New("--user is required")
	}
	if !seckill.ValidUserID(user) {
		return fmt.Errorf("--user must be 1-%d printable characters", seckill.MaxUserIDBytes)
	}
	if cfg.JWTSecret == "" {
		s, _, err := secrets.LoadOrCreate(cfg.DataDir)
		if err != nil {
			return err
		}
		cfg.JWTSecret = s.JWTSecret
	}
	tok, err := jwt.Sign([]byte(cfg.JWTSecret), user, ttl, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
