package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/seckill-dev/seckill/internal/jwt"
)

// checkSignIn refuses sign-in settings that cannot work or are unsafe: a
// JWKS fetched over plain HTTP from another host could be swapped in
// transit, and whoever swaps it signs in as any buyer; so could the shop's
// sign-in page a buyer is sent to for a token.
func (c *Config) checkSignIn() error {
	if c.JWTMaxLifetime < 0 {
		return fmt.Errorf("jwt max lifetime %s: want 0 (no limit) or a positive duration", c.JWTMaxLifetime)
	}
	if c.JWTJWKSURL != "" {
		if err := httpsOrLoopback(c.JWTJWKSURL); err != nil {
			return fmt.Errorf("jwt jwks url: %w", err)
		}
	}
	if c.ShopSignInURL != "" {
		if err := httpsOrLoopback(c.ShopSignInURL); err != nil {
			return fmt.Errorf("shop signin url: %w", err)
		}
		if strings.Contains(c.ShopSignInURL, "#") {
			return fmt.Errorf("shop signin url %q: no #fragment (the page adds return_to and state to its query)", c.ShopSignInURL)
		}
	}
	return nil
}

// httpsOrLoopback refuses a URL other than https://, or plain http:// to
// a loopback address: what travels over it (keys that decide who signs
// in, a buyer's way to a token) must not be swapped in transit.
func httpsOrLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q: want an https:// URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("%q: want https:// (plain http only to a loopback address)", raw)
}

// buyerVerifier is the verifier of buyer tokens: HS256 with the
// deployment's secret and, with --jwt-jwks-url, the identity provider's
// keys. The JWKS is fetched once before serving (a failure is logged: the
// first token then prompts a fetch) and refreshed by a worker.
func (m *Main) buyerVerifier(ctx context.Context) (*jwt.Verifier, error) {
	cfg := &m.Config
	vc := jwt.Config{
		Secret: []byte(cfg.JWTSecret), Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience,
		MaxLifetime: cfg.JWTMaxLifetime, Now: m.requestClock(),
	}
	if cfg.JWTJWKSURL != "" {
		ks, err := jwt.NewKeySet(jwt.KeySetConfig{URL: cfg.JWTJWKSURL, Logger: m.Logger})
		if err != nil {
			return nil, err
		}
		fctx, cancel := context.WithTimeout(ctx, jwt.DefaultFetchTimeout)
		err = ks.Refresh(fctx)
		cancel()
		if err != nil {
			m.Logger.Error("identity provider's JWKS not fetched; buyer tokens it signed are refused until it is", "url", cfg.JWTJWKSURL, "err", err)
		} else {
			m.Logger.Info("identity provider's JWKS fetched", "url", cfg.JWTJWKSURL, "keys", ks.Len())
		}
		m.start(ctx, ks)
		vc.Keys = ks
	}
	if cfg.JWTJWKSURL != "" && (cfg.JWTIssuer == "" || cfg.JWTAudience == "") {
		m.Logger.Warn("--jwt-jwks-url without --jwt-issuer and --jwt-audience: tokens the provider issues for any of its applications are accepted")
	}
	return jwt.New(vc), nil
}
