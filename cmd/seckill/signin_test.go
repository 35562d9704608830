package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/seckill-dev/seckill/internal/lostclaim"
)

// shopDocBlock returns the first ```sh block after heading in docs/shop.md.
func shopDocBlock(t *testing.T, heading string) string {
	t.Helper()
	return shopDocCode(t, heading, "sh")
}

// shopDocCode returns the first ```lang block after heading in docs/shop.md.
func shopDocCode(t *testing.T, heading, lang string) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/shop.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/shop.md has no %q", heading)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("docs/shop.md %s has no %s example", heading, lang)
	}
	return m[1]
}

// TestShopDocSignIn runs docs/shop.md's sign-in example: a running OpenID
// Connect provider (mockoidc) stands for login.example.com, and the shop's
// client id is docs/shop.md's audience. The example's exports configure the
// engine through the environment, as `seckill serve` reads it; its curl
// line runs as written against the engine, with a token the provider
// issued through the authorization-code flow.
func TestShopDocSignIn(t *testing.T) {
	block := shopDocBlock(t, "## Sign-in")
	idpBase, idp := startOIDC(t)

	// The exports, with the provider's address for login.example.com.
	exports := regexp.MustCompile(`(?m)^export (SECKILL_\w+)=(\S+)$`).FindAllStringSubmatch(block, -1)
	if len(exports) < 3 {
		t.Fatalf("docs/shop.md sign-in example: %d exports, want the JWKS URL, issuer and audience", len(exports))
	}
	for _, e := range exports {
		t.Setenv(e[1], strings.ReplaceAll(e[2], "https://login.example.com", idpBase))
	}
	env := parseServe(t)
	if env.JWTJWKSURL != idp.JWKSEndpoint() || env.JWTIssuer != idp.Issuer() || env.JWTAudience != idp.ClientID {
		t.Fatalf("docs/shop.md exports read as JWKS %q, issuer %q, audience %q; the provider's are %q, %q, %q",
			env.JWTJWKSURL, env.JWTIssuer, env.JWTAudience, idp.JWKSEndpoint(), idp.Issuer(), idp.ClientID)
	}
	e := startEngine(t, func(c *Config) {
		c.JWTJWKSURL, c.JWTIssuer, c.JWTAudience, c.JWTMaxLifetime = env.JWTJWKSURL, env.JWTIssuer, env.JWTAudience, env.JWTMaxLifetime
	})
	sale := e.liveSale(10, 1)

	curl := regexp.MustCompile(`(?s)curl .*?[^\\]\n`).FindString(block)
	if curl == "" {
		t.Fatal("docs/shop.md sign-in example has no curl command")
	}
	curl = strings.ReplaceAll(curl, "http://127.0.0.1:8080", e.base)
	run := func(token string) map[string]any {
		t.Helper()
		cmd := exec.Command("bash", "-c", curl)
		cmd.Env = append(os.Environ(), "SALE_ID="+sale, "ID_TOKEN="+token)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", curl, err)
		}
		var body map[string]any
		if err := json.Unmarshal(out, &body); err != nil {
			t.Fatalf("curl printed %q: %v", out, err)
		}
		return body
	}
	tokens := oidcSignIn(t, idp)
	body := run(tokens.IDToken)
	if id, _ := body["reservation_id"].(string); id == "" {
		t.Fatalf("docs/shop.md's curl with the provider's ID token: %v, want a reservation", body)
	}
	// The buyer is the provider's subject: a second claim by the same
	// buyer, with the access token, meets the per-buyer limit of 1.
	if got := run(tokens.AccessToken); !strings.Contains(jsonText(got), "limit_exceeded") {
		t.Fatalf("second claim of the same subject: %v, want limit_exceeded", got)
	}
	// A token of the deployment's shared secret lacks the pinned issuer.
	if got := run(e.token("someone")); !strings.Contains(jsonText(got), "issuer") {
		t.Fatalf("HS256 token without iss: %v, want refused for its issuer", got)
	}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

// startOIDC runs mockoidc with docs/shop.md's client id and returns the base
// that stands for https://login.example.com (its issuer).
func startOIDC(t *testing.T) (string, *mockoidc.MockOIDC) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	idp, err := mockoidc.NewServer(key)
	if err != nil {
		t.Fatal(err)
	}
	idp.ClientID = "seckill-shop"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := idp.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idp.Shutdown() })
	return idp.Issuer(), idp
}

type oidcTokens struct {
	AccessToken string `json:"access_token"`
	IDToken     string `json:"id_token"`
}

// oidcSignIn runs the authorization-code flow as a shop's backend does.
func oidcSignIn(t *testing.T, idp *mockoidc.MockOIDC) oidcTokens {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	q := url.Values{
		"client_id": {idp.ClientID}, "response_type": {"code"}, "scope": {"openid"},
		"state": {"s"}, "redirect_uri": {"https://shop.example/callback"},
	}
	resp, err := client.Get(idp.AuthorizationEndpoint() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %s", resp.Status)
	}
	form := url.Values{
		"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"client_id": {idp.ClientID}, "client_secret": {idp.ClientSecret},
	}
	resp, err = client.PostForm(idp.TokenEndpoint(), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tokens oidcTokens
	if err := json.NewDecoder(resp.Body).Decode(&tokens); err != nil || tokens.IDToken == "" {
		t.Fatalf("token: %s, %v", resp.Status, err)
	}
	return tokens
}

// rotatingJWKS is an identity provider's JWKS whose keys the test changes.
type rotatingJWKS struct {
	mu   sync.Mutex
	keys []jose.JSONWebKey
}

func (j *rotatingJWKS) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	j.mu.Lock()
	doc, _ := json.Marshal(jose.JSONWebKeySet{Keys: j.keys})
	j.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(doc)
}

func (j *rotatingJWKS) publish(keys ...jose.JSONWebKey) {
	j.mu.Lock()
	j.keys = keys
	j.mu.Unlock()
}

// rsaSigner is one of the provider's keys; tokens are made by go-jose.
type rsaSigner struct {
	kid  string
	priv *rsa.PrivateKey
}

func newRSASigner(t *testing.T, kid string) rsaSigner {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return rsaSigner{kid, k}
}

func (s rsaSigner) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: &s.priv.PublicKey, KeyID: s.kid, Algorithm: "RS256", Use: "sig"}
}

func (s rsaSigner) token(t *testing.T, user string) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: s.priv, KeyID: s.kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := josejwt.Signed(sig).Claims(josejwt.Claims{
		Issuer: "https://login.example.com", Audience: josejwt.Audience{"seckill-shop"}, Subject: user,
		IssuedAt: josejwt.NewNumericDate(now), Expiry: josejwt.NewNumericDate(now.Add(time.Hour)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestJWKSRotationMidSale: buyers claim with tokens of the provider's key;
// mid-sale the provider publishes a second key and signs with it; the
// first token naming the new kid makes the engine fetch the JWKS, and
// buyers of both keys keep claiming. Every claim is counted in stock.
func TestJWKSRotationMidSale(t *testing.T) {
	jwks := &rotatingJWKS{}
	srv := httptest.NewServer(jwks)
	t.Cleanup(srv.Close)
	first, second := newRSASigner(t, "2030-01"), newRSASigner(t, "2030-02")
	jwks.publish(first.public())
	e := startEngine(t, func(c *Config) {
		c.JWTJWKSURL, c.JWTIssuer, c.JWTAudience = srv.URL, "https://login.example.com", "seckill-shop"
	})
	sale := e.liveSale(100, 1)
	claim := func(tok string) {
		t.Helper()
		if r := e.reserve(sale, tok, 1, ""); r.status/100 != 2 {
			t.Fatalf("claim: %d %v", r.status, r.body)
		}
	}
	for i := range 5 {
		claim(first.token(t, "early-"+strconv.Itoa(i)))
	}
	// A token of the second key before the provider publishes it.
	if r := e.reserve(sale, second.token(t, "too-early"), 1, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("token of an unpublished key: %d %v, want 401", r.status, r.body)
	}
	jwks.publish(first.public(), second.public())
	// The unknown-kid fetch above spent the allowance: the new key is
	// learnt by the next fetch allowed, within DefaultUnknownKeyInterval.
	deadline := time.Now().Add(time.Minute)
	for {
		r := e.reserve(sale, second.token(t, "late-0"), 1, "")
		if r.status/100 == 2 {
			break
		}
		if r.status != http.StatusUnauthorized || time.Now().After(deadline) {
			t.Fatalf("token of the new key: %d %v", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 1; i < 5; i++ {
		claim(second.token(t, "late-"+strconv.Itoa(i)))
		claim(first.token(t, "early-again-"+strconv.Itoa(i)))
	}
	if lvl := e.stock(sale); lvl.Reserved != 14 {
		t.Fatalf("reserved = %d, want 14 (5 + 1 + 2×4)", lvl.Reserved)
	}
}

func TestCheckSignIn(t *testing.T) {
	for _, c := range []struct {
		url      string
		lifetime time.Duration
		ok       bool
	}{
		{"", 24 * time.Hour, true},
		{"https://login.example.com/.well-known/jwks.json", 0, true},
		{"http://127.0.0.1:9000/jwks", time.Hour, true},
		{"http://localhost/jwks", time.Hour, true},
		{"http://[::1]:9000/jwks", time.Hour, true},
		{"http://login.example.com/jwks", time.Hour, false},
		{"http://10.0.0.5/jwks", time.Hour, false},
		{"ftp://login.example.com/jwks", time.Hour, false},
		{"login.example.com/jwks", time.Hour, false},
		{"https://", time.Hour, false},
		{"", -time.Second, false},
	} {
		cfg := DefaultConfig()
		cfg.JWTJWKSURL, cfg.JWTMaxLifetime = c.url, c.lifetime
		if err := cfg.checkSignIn(); (err == nil) != c.ok {
			t.Errorf("checkSignIn(%q, %s) = %v, want ok %v", c.url, c.lifetime, err, c.ok)
		}
	}
	// The shop's sign-in page: a buyer's way to a token, so neither
	// plain http to another host nor a fragment the page's own would
	// clash with.
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://shop.example/seckill/signin", true},
		{"https://shop.example/signin?lang=de", true},
		{"http://127.0.0.1:8081/signin", true},
		{"http://shop.example/signin", false},
		{"https://shop.example/signin#x", false},
		{"shop.example/signin", false},
		{"javascript:alert(1)", false},
	} {
		cfg := DefaultConfig()
		cfg.ShopSignInURL = c.url
		if err := cfg.checkSignIn(); (err == nil) != c.ok {
			t.Errorf("checkSignIn(shop signin %q) = %v, want ok %v", c.url, err, c.ok)
		}
	}
}

// TestShortSecretsRefused: serve refuses a configured JWT secret, admin
// token or metrics token under 32 bytes, naming which, and a metrics
// token that is the admin token.
func TestShortSecretsRefused(t *testing.T) {
	for _, c := range []struct {
		secret, admin, want string
	}{
		{strings.Repeat("s", 31), strings.Repeat("a", 32), "--jwt-secret"},
		{strings.Repeat("s", 32), "admin", "--admin-token"},
	} {
		cfg := DefaultConfig()
		cfg.JWTSecret, cfg.AdminToken = c.secret, c.admin
		if _, err := cfg.parse(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("secret %d bytes, admin token %d bytes: %v, want refused naming %s", len(c.secret), len(c.admin), err, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.JWTSecret, cfg.AdminToken = strings.Repeat("s", 32), ""
	if _, err := cfg.parse(); err != nil {
		t.Errorf("32-byte secret, generated admin token: %v", err)
	}
	// The scraper's token: long enough, and not the admin's.
	for _, c := range []struct{ metrics, admin, want string }{
		{strings.Repeat("m", 31), "", "--metrics-token"},
		{strings.Repeat("a", 32), strings.Repeat("a", 32), "metrics token: must differ from the admin token"},
		{strings.Repeat("m", 32), strings.Repeat("a", 32), ""},
	} {
		cfg := DefaultConfig()
		cfg.JWTSecret, cfg.AdminToken, cfg.MetricsToken = strings.Repeat("s", 32), c.admin, c.metrics
		_, err := cfg.parse()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("metrics token %d bytes, admin %d bytes: %v, want %q", len(c.metrics), len(c.admin), err, c.want)
		}
	}
}

// TestClaimIDGuessesLimited: a buyer polling made-up reservation ids of
// the right shape (guessing at a claim id's 24-bit tag, to forge a
// lost_in_stock_store failed order of their own) gets 404 up to the
// lookup limit, then 429; their real reservation still answers, and
// another buyer's lookups are not limited by theirs.
func TestClaimIDGuessesLimited(t *testing.T) {
	e := startEngine(t, nil)
	sale := e.liveSale(10, 1)
	mallory := e.token("mallory")
	r := e.reserve(sale, mallory, 1, "")
	real, _ := r.body["reservation_id"].(string)
	if r.status/100 != 2 || real == "" {
		t.Fatalf("claim: %d %v", r.status, r.body)
	}
	guess := func(tok string, i int) reply {
		t.Helper()
		id := fmt.Sprintf("%s.%026d", sale, i) // digits are in the id alphabet
		return e.do("GET", "/api/v1/reservations/"+id, tok, nil)
	}
	// The limiter refills one lookup every Period/Rate (12 s): on a slow
	// machine the guesses take that long, so the refusal may come a few
	// guesses past Rate, never before it, and never later than the refill
	// allows.
	limit, interval := lostclaim.DefaultLookupLimit.Rate, lostclaim.DefaultLookupLimit.Interval()
	start := time.Now()
	for i := 0; ; i++ {
		g := guess(mallory, i)
		if g.status == http.StatusNotFound {
			if allowed := limit + int(time.Since(start)/interval) + 1; i >= allowed {
				t.Fatalf("guess %d answered 404; the limit allows %d in %s", i, allowed, time.Since(start))
			}
			continue
		}
		if g.status != http.StatusTooManyRequests || g.code() != "rate_limited" || i < limit {
			t.Fatalf("guess %d: %d %v, want 404 up to %d guesses, then 429 rate_limited", i, g.status, g.body, limit)
		}
		break
	}
	if g := e.do("GET", "/api/v1/reservations/"+real, mallory, nil); g.status != http.StatusOK {
		t.Fatalf("the buyer's real reservation past the limit: %d %v", g.status, g.body)
	}
	if g := guess(e.token("alice"), 0); g.status != http.StatusNotFound {
		t.Fatalf("another buyer's lookup: %d %v, want 404", g.status, g.body)
	}
}
