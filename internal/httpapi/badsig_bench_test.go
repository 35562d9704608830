package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/seckill-dev/seckill/internal/jwt"
)

// rs256Verifier is a jwt.Verifier of an identity provider's RS256 key,
// served as a JWKS by an httptest server, and a function that signs a
// buyer token with that key (by go-jose, as the provider would).
func rs256Verifier(b *testing.B) (*jwt.Verifier, func(user string) string) {
	b.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv.Public(), KeyID: "rsa-1", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}))
	b.Cleanup(srv.Close)
	ks, err := jwt.NewKeySet(jwt.KeySetConfig{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	if err := ks.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: priv, KeyID: "rsa-1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		b.Fatal(err)
	}
	sign := func(user string) string {
		now := time.Now()
		tok, err := josejwt.Signed(signer).Claims(josejwt.Claims{Subject: user, IssuedAt: josejwt.NewNumericDate(now),
			Expiry: josejwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	return jwt.New(jwt.Config{Keys: ks, MaxLifetime: 24 * time.Hour}), sign
}

// BenchmarkForgedTokens is what one request with a made-up RS256 token
// (a known kid, a wrong signature, a new one each time) costs the
// reservation route, from one address, with no bound on such tokens
// (each pays the signature check) and with DefaultBadSignatureLimit (past
// its burst, none does); cached is a buyer's known token on the same
// route, for scale.
func BenchmarkForgedTokens(b *testing.B) {
	verifier, sign := rs256Verifier(b)
	const n = 256
	toks := make([]string, n)
	for i := range toks {
		toks[i] = forged(sign("mallory-" + strconv.Itoa(i)))
	}
	good := sign("ann")
	run := func(b *testing.B, e *env, tok func(i int) string) {
		b.ReportAllocs()
		for i := range b.N {
			r := newRequest("POST", "/api/v1/sales/"+testSaleID+"/reservations", `{"qty":1}`)
			r.RemoteAddr = "198.51.100.7:40000"
			r.Header.Set("Authorization", "Bearer "+tok(i))
			serve(e.h, r)
		}
	}
	for _, c := range []struct {
		name  string
		bound bool
		tok   func(i int) string
	}{
		{"unbounded", false, func(i int) string { return toks[i%n] }},
		{"bounded", true, func(i int) string { return toks[i%n] }},
		{"cached", true, func(int) string { return good }},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, func(cfg *Config) {
				cfg.Verifier = verifier
				if c.bound {
					cfg.BadSignatureLimit = DefaultBadSignatureLimit
				}
			})
			run(b, e, c.tok)
		})
	}
}
