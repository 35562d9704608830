package jwt

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
)

// idpKey is a signing key of a test identity provider. Its tokens are
// made by go-jose, a JOSE library independent of the verifier's.
type idpKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newIdPKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) idpKey {
	t.Helper()
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("alg %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, alg: alg, priv: priv}
}

// jwk is the key's public half as the provider publishes it.
func (k idpKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// sign makes a token with claims, by go-jose.
func (k idpKey) sign(t testing.TB, claims any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := josejwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const (
	testIssuer   = "https://idp.example.com/"
	testAudience = "seckill-shop"
)

// buyerClaims are an IdP's claims for user, issued at iat for ttl.
func buyerClaims(user string, iat time.Time, ttl time.Duration) josejwt.Claims {
	return josejwt.Claims{
		Issuer: testIssuer, Audience: josejwt.Audience{testAudience}, Subject: user,
		IssuedAt: josejwt.NewNumericDate(iat), NotBefore: josejwt.NewNumericDate(iat),
		Expiry: josejwt.NewNumericDate(iat.Add(ttl)),
	}
}

// jwksServer serves a JWKS the test changes, counts the requests, and can
// be taken down (500) or cut (connections closed).
type jwksServer struct {
	*httptest.Server
	mu   sync.Mutex
	doc  []byte
	down bool
	cut  bool
	hits atomic.Int64
}

func newJWKSServer(t testing.TB, keys ...idpKey) *jwksServer {
	s := &jwksServer{}
	s.set(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		doc, down, cut := s.doc, s.down, s.cut
		s.mu.Unlock()
		switch {
		case cut:
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			fallthrough
		case down:
			http.Error(w, "identity provider down", http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write(doc)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(t testing.TB, keys ...idpKey) {
	t.Helper()
	set := jose.JSONWebKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.jwk())
	}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	s.setDoc(doc)
}

func (s *jwksServer) setDoc(doc []byte) {
	s.mu.Lock()
	s.doc = doc
	s.mu.Unlock()
}

func (s *jwksServer) setDown(down, cut bool) {
	s.mu.Lock()
	s.down, s.cut = down, cut
	s.mu.Unlock()
}

// clock is a test clock safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock     { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration)  { c.ns.Add(int64(d)) }
func (c *clock) set(t time.Time)      { c.ns.Store(t.UnixNano()) }
func (c *clock) fn() func() time.Time { return c.now }

// idpVerifier is a Verifier for the JWKS at url with the test issuer and
// audience pinned and a 24 h lifetime, on clk; it also takes HS256 tokens
// of secret.
func idpVerifier(t testing.TB, url string, clk *clock) (*Verifier, *KeySet) {
	t.Helper()
	ks, err := NewKeySet(KeySetConfig{URL: url, Now: clk.fn()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Refresh(context.Background()); err != nil {
		t.Fatalf("first JWKS fetch: %v", err)
	}
	v := New(Config{Secret: secret, Keys: ks, Issuer: testIssuer, Audience: testAudience, MaxLifetime: 24 * time.Hour, Now: clk.fn()})
	return v, ks
}

func wantUser(t *testing.T, v *Verifier, tok, user string) {
	t.Helper()
	got, err := v.Verify(tok)
	if err != nil || got != user {
		t.Fatalf("Verify = %q, %v; want %q, nil", got, err, user)
	}
}

// wantRefused checks that v refuses tok with a message containing msg.
func wantRefused(t *testing.T, v *Verifier, tok, msg string) {
	t.Helper()
	wantUnauthorized(t, v, tok)
	if _, err := v.Verify(tok); !strings.Contains(seckill.ErrorMessage(err), msg) {
		t.Fatalf("message = %q, want it to contain %q", seckill.ErrorMessage(err), msg)
	}
}

// TestJWKSAlgorithms: RS256, ES256 and EdDSA tokens made by go-jose verify
// against the JWKS, each by its kid; HS256 tokens of the shared secret
// still do.
func TestJWKSAlgorithms(t *testing.T) {
	clk := newClock(t0)
	keys := []idpKey{newIdPKey(t, "rsa-1", jose.RS256), newIdPKey(t, "ec-1", jose.ES256), newIdPKey(t, "ed-1", jose.EdDSA)}
	srv := newJWKSServer(t, keys...)
	v, ks := idpVerifier(t, srv.URL, clk)
	if ks.Len() != 3 {
		t.Fatalf("keys held = %d, want 3", ks.Len())
	}
	for _, k := range keys {
		user := "buyer-" + k.kid
		tok := k.sign(t, buyerClaims(user, t0, time.Hour))
		wantUser(t, v, tok, user)
		wantUser(t, v, tok, user) // from the cache
	}
	hs, err := Sign(secret, "hs-buyer", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Sign's token has no iss and aud, which are pinned: refused; one
	// with them passes the fast path's checks.
	wantRefused(t, v, hs, "issuer")
	hs = mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "hs-buyer", "iss": testIssuer, "aud": testAudience, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	wantUser(t, v, hs, "hs-buyer")
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times, want 1 (known kids need no fetch)", got)
	}
}

// TestClaimsPinned: iss and aud are pinned, the lifetime bounded; tokens
// without iat are refused while the lifetime is bounded, and a bad claim
// never prompts a JWKS fetch, even with a kid the set does not hold.
func TestClaimsPinned(t *testing.T) {
	clk := newClock(t0)
	k := newIdPKey(t, "rsa-1", jose.RS256)
	srv := newJWKSServer(t, k)
	v, _ := idpVerifier(t, srv.URL, clk)
	stranger := newIdPKey(t, "unknown-kid", jose.RS256)

	good := buyerClaims("u1", t0, time.Hour)
	wantUser(t, v, k.sign(t, good), "u1")

	cases := []struct {
		name   string
		claims func(c *josejwt.Claims)
		msg    string
	}{
		{"other issuer", func(c *josejwt.Claims) { c.Issuer = "https://evil.example.com/" }, "issuer"},
		{"no issuer", func(c *josejwt.Claims) { c.Issuer = "" }, "issuer"},
		{"other audience", func(c *josejwt.Claims) { c.Audience = josejwt.Audience{"another-app"} }, "audience"},
		{"no audience", func(c *josejwt.Claims) { c.Audience = nil }, "audience"},
		{"lifetime over 24h", func(c *josejwt.Claims) { c.Expiry = josejwt.NewNumericDate(t0.Add(24*time.Hour + time.Second)) }, "lifetime"},
		{"no iat", func(c *josejwt.Claims) { c.IssuedAt = nil }, "iat"},
		{"iat in the future", func(c *josejwt.Claims) { c.IssuedAt = josejwt.NewNumericDate(t0.Add(time.Hour)) }, "Invalid token"},
		{"expired", func(c *josejwt.Claims) {
			c.IssuedAt, c.Expiry = josejwt.NewNumericDate(t0.Add(-2*time.Hour)), josejwt.NewNumericDate(t0.Add(-time.Hour))
			c.NotBefore = c.IssuedAt
		}, "expired"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claims := good
			c.claims(&claims)
			wantRefused(t, v, k.sign(t, claims), c.msg)
			before := srv.hits.Load()
			clk.add(time.Minute) // past the unknown-kid interval
			wantRefused(t, v, stranger.sign(t, claims), c.msg)
			if srv.hits.Load() != before {
				t.Fatal("a token with bad claims and an unknown kid fetched the JWKS")
			}
			clk.set(t0)
		})
	}
	// Exactly 24 h is allowed.
	wantUser(t, v, k.sign(t, buyerClaims("u2", t0, 24*time.Hour)), "u2")
	// The same limits hold for HS256 tokens, which take the fast path.
	wantRefused(t, v, mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u3", "iss": testIssuer, "aud": testAudience, "exp": t0.Add(time.Hour).Unix()}), "iat")
	wantRefused(t, v, mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u3", "iss": testIssuer, "aud": testAudience, "iat": t0.Unix(), "exp": t0.Add(48 * time.Hour).Unix()}), "lifetime")
	// Without a limit, a token without iat passes.
	free := New(Config{Secret: secret, Now: clk.fn()})
	wantUser(t, free, mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u3", "exp": t0.Add(48 * time.Hour).Unix()}), "u3")
}

// TestKeyRotationMidSale: the provider adds a key and signs with it; the
// first token naming it prompts a fetch and passes; tokens of the old key
// pass while the set still publishes it, and are refused (even those
// cached) once a fetch finds it withdrawn.
func TestKeyRotationMidSale(t *testing.T) {
	clk := newClock(t0)
	old := newIdPKey(t, "2030-01", jose.RS256)
	srv := newJWKSServer(t, old)
	v, ks := idpVerifier(t, srv.URL, clk)

	oldTok := old.sign(t, buyerClaims("early-buyer", t0, time.Hour))
	wantUser(t, v, oldTok, "early-buyer")

	// Rotation: the provider publishes the new key next to the old one
	// and signs with the new one from now on.
	clk.add(time.Minute)
	next := newIdPKey(t, "2030-02", jose.ES256)
	srv.set(t, old, next)
	newTok := next.sign(t, buyerClaims("late-buyer", clk.now(), time.Hour))
	wantUser(t, v, newTok, "late-buyer")
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (start, the new kid)", got)
	}
	wantUser(t, v, oldTok, "early-buyer")
	wantUser(t, v, old.sign(t, buyerClaims("early-buyer-2", t0, time.Hour)), "early-buyer-2")

	// The old key is withdrawn; the periodic refresh finds out.
	srv.set(t, next)
	if err := ks.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, v, oldTok, "kid")
	wantUser(t, v, newTok, "late-buyer")
}

// TestJWKSOutageKeepsKeys: while the provider's JWKS answers 500, cuts
// connections, or serves a document with no usable key, the keys held keep
// verifying tokens (new ones too); an unknown kid is refused.
func TestJWKSOutageKeepsKeys(t *testing.T) {
	clk := newClock(t0)
	k := newIdPKey(t, "rsa-1", jose.RS256)
	srv := newJWKSServer(t, k)
	v, ks := idpVerifier(t, srv.URL, clk)
	stranger := newIdPKey(t, "rsa-2", jose.RS256)

	outages := []struct {
		name string
		make func()
	}{
		{"500", func() { srv.setDown(true, false) }},
		{"connection cut", func() { srv.setDown(false, true) }},
		{"not JSON", func() { srv.setDown(false, false); srv.setDoc([]byte("<html>maintenance</html>")) }},
		{"empty set", func() { srv.setDoc([]byte(`{"keys":[]}`)) }},
		{"only an HMAC key", func() { srv.setDoc([]byte(`{"keys":[{"kty":"oct","kid":"rsa-1","k":"c2VjcmV0"}]}`)) }},
	}
	for i, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			o.make()
			if err := ks.Refresh(context.Background()); err == nil {
				t.Fatal("Refresh succeeded during the outage")
			}
			if ks.Len() != 1 {
				t.Fatalf("keys held = %d after a failed fetch, want 1", ks.Len())
			}
			user := "buyer-" + itoa(int64(i))
			wantUser(t, v, k.sign(t, buyerClaims(user, clk.now(), time.Hour)), user)
			clk.add(time.Minute)
			hits := srv.hits.Load()
			wantRefused(t, v, stranger.sign(t, buyerClaims(user, clk.now(), time.Hour)), "kid")
			if srv.hits.Load() != hits+1 {
				t.Fatal("an unknown kid did not try the JWKS")
			}
		})
	}
}

// TestUnknownKidRateLimited: a flood of tokens with made-up kids, at once
// and in turn, fetches the JWKS at most once per UnknownKeyInterval.
func TestUnknownKidRateLimited(t *testing.T) {
	clk := newClock(t0)
	k := newIdPKey(t, "rsa-1", jose.RS256)
	srv := newJWKSServer(t, k)
	v, ks := idpVerifier(t, srv.URL, clk)
	bogus := make([]string, 50)
	for i := range bogus {
		bogus[i] = newIdPKey(t, "made-up-"+itoa(int64(i)), jose.EdDSA).sign(t, buyerClaims("u", t0, time.Hour))
	}
	start := srv.hits.Load()
	var wg sync.WaitGroup
	for _, tok := range bogus {
		wg.Go(func() {
			if _, err := v.Verify(tok); err == nil {
				t.Error("a token with a made-up kid passed")
			}
		})
	}
	wg.Wait()
	if got := srv.hits.Load() - start; got != 1 {
		t.Fatalf("50 unknown kids at once fetched the JWKS %d times, want 1", got)
	}
	for range 3 {
		clk.add(DefaultUnknownKeyInterval / 4)
		for _, tok := range bogus[:10] {
			wantRefused(t, v, tok, "kid")
		}
	}
	if got := srv.hits.Load() - start; got != 1 {
		t.Fatalf("within the interval: %d fetches, want 1", got)
	}
	clk.add(DefaultUnknownKeyInterval / 4)
	wantRefused(t, v, bogus[0], "kid")
	if got := srv.hits.Load() - start; got != 2 {
		t.Fatalf("after the interval: %d fetches, want 2", got)
	}
	if ks.Fetches() != srv.hits.Load() {
		t.Fatalf("Fetches() = %d, server saw %d", ks.Fetches(), srv.hits.Load())
	}
	// The known key is unaffected by the flood.
	wantUser(t, v, k.sign(t, buyerClaims("real", t0, time.Hour)), "real")
}

// TestAlgorithmConfusion: tokens that try to make one kind of key verify
// another kind of signature are refused.
func TestAlgorithmConfusion(t *testing.T) {
	clk := newClock(t0)
	rsaKey := newIdPKey(t, "rsa-1", jose.RS256)
	ecKey := newIdPKey(t, "ec-1", jose.ES256)
	edKey := newIdPKey(t, "ed-1", jose.EdDSA)
	srv := newJWKSServer(t, rsaKey, ecKey, edKey)
	v, _ := idpVerifier(t, srv.URL, clk)
	// The same verifier without a shared secret: HS256 has no key at all.
	ks, err := NewKeySet(KeySetConfig{URL: srv.URL, Now: clk.fn()})
	if err != nil {
		t.Fatal(err)
	}
	noSecret := New(Config{Keys: ks, Issuer: testIssuer, Audience: testAudience, Now: clk.fn()})

	claims := gojwt.MapClaims{"sub": "mallory", "iss": testIssuer, "aud": testAudience, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	withKid := func(method gojwt.SigningMethod, kid string, key any) string {
		tok := gojwt.NewWithClaims(method, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pub := rsaKey.priv.Public()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	jwkJSON, err := json.Marshal(rsaKey.jwk())
	if err != nil {
		t.Fatal(err)
	}
	good := rsaKey.sign(t, buyerClaims("mallory", t0, time.Hour))
	parts := strings.Split(good, ".")
	ecPriv, edPriv := ecKey.priv.(*ecdsa.PrivateKey), edKey.priv.(ed25519.PrivateKey)

	cases := map[string]string{
		// HS256 keyed with the provider's public key, in every form an
		// attacker can copy from the JWKS or a certificate.
		"HS256 keyed with public PEM":      withKid(gojwt.SigningMethodHS256, "rsa-1", pemKey),
		"HS256 keyed with public DER":      withKid(gojwt.SigningMethodHS256, "rsa-1", der),
		"HS256 keyed with JWK JSON":        withKid(gojwt.SigningMethodHS256, "rsa-1", jwkJSON),
		"HS256 keyed with modulus":         withKid(gojwt.SigningMethodHS256, "rsa-1", pub.(*rsa.PublicKey).N.Bytes()),
		"alg none with kid":                b64(`{"alg":"none","kid":"rsa-1"}`) + "." + parts[1] + ".",
		"alg none keeps RS256 sig":         b64(`{"alg":"none","kid":"rsa-1"}`) + "." + parts[1] + "." + parts[2],
		"header says HS256 over RS256 sig": b64(`{"alg":"HS256","kid":"rsa-1"}`) + "." + parts[1] + "." + parts[2],
		// A kid naming a key of another type.
		"ES256 with the RSA key's kid":   withKid(gojwt.SigningMethodES256, "rsa-1", ecPriv),
		"EdDSA with the RSA key's kid":   withKid(gojwt.SigningMethodEdDSA, "rsa-1", edPriv),
		"RS256 with the EC key's kid":    withKid(gojwt.SigningMethodRS256, "ec-1", rsaKey.priv),
		"ES256 with the EdDSA key's kid": withKid(gojwt.SigningMethodES256, "ed-1", ecPriv),
		// Same key, another algorithm of its family.
		"RS512 with the RSA key": withKid(gojwt.SigningMethodRS512, "rsa-1", rsaKey.priv),
		"PS256 with the RSA key": withKid(gojwt.SigningMethodPS256, "rsa-1", rsaKey.priv),
		"ES384 header":           b64(`{"alg":"ES384","kid":"ec-1"}`) + "." + parts[1] + "." + parts[2],
		// No kid, or a kid that is not a string.
		"RS256 without kid":  mint(t, gojwt.SigningMethodRS256, rsaKey.priv, claims),
		"RS256 numeric kid":  b64(`{"alg":"RS256","kid":1}`) + "." + parts[1] + "." + parts[2],
		"RS256 sig tampered": parts[0] + "." + parts[1] + "." + flip(parts[2]),
		"RS256 claims tampered": parts[0] + "." + b64(`{"aud":"seckill-shop","exp":`+itoa(t0.Add(time.Hour).Unix())+
			`,"iat":`+itoa(t0.Unix())+`,"iss":"https://idp.example.com/","sub":"admin"}`) + "." + parts[2],
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			wantUnauthorized(t, v, tok)
			wantUnauthorized(t, noSecret, tok)
		})
	}
	// The control: the untampered token passes both.
	wantUser(t, v, good, "mallory")
	wantUser(t, noSecret, good, "mallory")
}

// TestJWKSSymmetricKeyNeverUsed: an "oct" key in the JWKS (a provider
// misconfiguration, or an attacker's write to it) never verifies an HS256
// token: HS256 is keyed only with the configured secret.
func TestJWKSSymmetricKeyNeverUsed(t *testing.T) {
	clk := newClock(t0)
	k := newIdPKey(t, "rsa-1", jose.RS256)
	srv := newJWKSServer(t)
	octSecret := []byte("the-jwks-published-this-hmac-key!!")
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.jwk(), {Key: octSecret, KeyID: "oct-1", Algorithm: "HS256", Use: "sig"}}}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	srv.setDoc(doc)
	v, ks := idpVerifier(t, srv.URL, clk)
	if ks.Len() != 1 {
		t.Fatalf("keys held = %d, want 1 (the oct key skipped)", ks.Len())
	}
	tok := gojwt.NewWithClaims(gojwt.SigningMethodHS256, gojwt.MapClaims{"sub": "mallory", "iss": testIssuer, "aud": testAudience, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	tok.Header["kid"] = "oct-1"
	s, err := tok.SignedString(octSecret)
	if err != nil {
		t.Fatal(err)
	}
	wantUnauthorized(t, v, s)
}

// TestParseJWKS: which keys of a set are used.
func TestParseJWKS(t *testing.T) {
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey := newIdPKey(t, "rsa", jose.RS256)
	privJWK := jose.JSONWebKey{Key: rsaKey.priv, KeyID: "private"}
	cases := []struct {
		name string
		key  jose.JSONWebKey
		alg  string // "" skipped
	}{
		{"RSA", rsaKey.jwk(), algRS256},
		{"RSA no alg", jose.JSONWebKey{Key: rsaKey.priv.Public(), KeyID: "k"}, algRS256},
		{"RSA published private", privJWK, algRS256},
		{"EC P-256", newIdPKey(t, "k", jose.ES256).jwk(), algES256},
		{"Ed25519", newIdPKey(t, "k", jose.EdDSA).jwk(), algEdDSA},
		{"RSA 1024", jose.JSONWebKey{Key: &weak.PublicKey, KeyID: "k"}, ""},
		{"EC P-384", jose.JSONWebKey{Key: &p384.PublicKey, KeyID: "k"}, ""},
		{"no kid", jose.JSONWebKey{Key: rsaKey.priv.Public()}, ""},
		{"use enc", jose.JSONWebKey{Key: rsaKey.priv.Public(), KeyID: "k", Use: "enc"}, ""},
		{"RSA says RS384", jose.JSONWebKey{Key: rsaKey.priv.Public(), KeyID: "k", Algorithm: "RS384"}, ""},
		{"RSA says HS256", jose.JSONWebKey{Key: rsaKey.priv.Public(), KeyID: "k", Algorithm: "HS256"}, ""},
		{"oct", jose.JSONWebKey{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "k"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := json.Marshal(c.key)
			if err != nil {
				t.Fatal(err)
			}
			// Next to a usable key, so the set always parses.
			other, err := json.Marshal(newIdPKey(t, "other", jose.EdDSA).jwk())
			if err != nil {
				t.Fatal(err)
			}
			keys, _, err := parseJWKS([]byte(`{"keys":[` + string(raw) + `,` + string(other) + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for kid, k := range keys {
				if kid != "other" {
					got = k.alg
				}
			}
			if got != c.alg {
				t.Fatalf("alg = %q, want %q", got, c.alg)
			}
		})
	}
	// A malformed key among good ones costs only itself; two keys under
	// one kid are both dropped.
	good, _ := json.Marshal(rsaKey.jwk())
	keys, _, err := parseJWKS([]byte(`{"keys":[{"kty":"RSA","kid":"bad","n":"!!"},{"kty":"XYZ","kid":"x"},` + string(good) + `]}`))
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %v, %v; want the one good key", keys, err)
	}
	if keys, _, err := parseJWKS([]byte(`{"keys":[` + string(good) + `,` + string(good) + `]}`)); err == nil {
		t.Fatalf("a kid named twice was used: %v", keys)
	}
}

// TestKeySetStartStop: Start fetches at once and on its interval; Stop
// ends the loop.
func TestKeySetStartStop(t *testing.T) {
	k := newIdPKey(t, "rsa-1", jose.RS256)
	srv := newJWKSServer(t, k)
	// Fetches are counted where they start, in the client: the server
	// may see a request Stop cancelled after Stop has returned.
	var sent atomic.Int64
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	ks, err := NewKeySet(KeySetConfig{URL: srv.URL, Client: client, RefreshInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ks.Start(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for ks.Len() == 0 || sent.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d keys, %d fetches", ks.Len(), sent.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if err := ks.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := sent.Load()
	// Stop waited for the loop: no fetch can start after it.
	for range 3 {
		if err := ks.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := sent.Load(); got != n+3 {
		t.Fatalf("fetches after Stop = %d, want only the 3 asked for", got-n)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
