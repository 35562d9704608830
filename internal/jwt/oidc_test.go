package jwt

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
)

// TestOIDCProvider signs a buyer in at a running OpenID Connect provider
// (oauth2-proxy/mockoidc, in-process): the shop takes jwks_uri from the
// provider's discovery document, runs the authorization-code flow, and
// hands the buyer's tokens to seckill, which verifies them with the
// provider's issuer and the shop's client id pinned.
func TestOIDCProvider(t *testing.T) {
	idp, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idp.Shutdown() })
	cfg := idp.Config()

	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, idp.DiscoveryEndpoint(), &discovery)
	if discovery.Issuer != cfg.Issuer || discovery.JWKSURI == "" {
		t.Fatalf("discovery = %+v", discovery)
	}

	tokens := signIn(t, idp, cfg)
	ks, err := NewKeySet(KeySetConfig{URL: discovery.JWKSURI})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := New(Config{Keys: ks, Issuer: discovery.Issuer, Audience: cfg.ClientID, MaxLifetime: 24 * time.Hour})
	for name, tok := range map[string]string{"access token": tokens.AccessToken, "ID token": tokens.IDToken} {
		if user, err := v.Verify(tok); err != nil || user != mockoidc.DefaultUser().ID() {
			t.Fatalf("%s: Verify = %q, %v; want %q", name, user, err, mockoidc.DefaultUser().ID())
		}
	}
	// Pinned to another client or issuer, the same tokens are refused.
	for _, c := range []Config{
		{Keys: ks, Issuer: discovery.Issuer, Audience: "another-client"},
		{Keys: ks, Issuer: "https://another-idp.example/", Audience: cfg.ClientID},
		// The provider's refresh token outlives a 30-minute limit.
		{Keys: ks, Issuer: discovery.Issuer, Audience: cfg.ClientID, MaxLifetime: 30 * time.Minute},
	} {
		tok := tokens.AccessToken
		if c.MaxLifetime > 0 {
			tok = tokens.RefreshToken
		}
		wantUnauthorized(t, New(c), tok)
	}
}

type oidcTokens struct {
	AccessToken  string `json:"access_token"`
	IDToken      string `json:"id_token"`
	RefreshToken string `json:"refresh_token"`
}

// signIn runs the authorization-code flow as a shop's backend does.
func signIn(t *testing.T, idp *mockoidc.MockOIDC, cfg *mockoidc.Config) oidcTokens {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	q := url.Values{
		"client_id": {cfg.ClientID}, "response_type": {"code"}, "scope": {"openid email"},
		"state": {"s1"}, "nonce": {"n1"}, "redirect_uri": {"https://shop.example/callback"},
	}
	resp, err := client.Get(idp.AuthorizationEndpoint() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	form := url.Values{
		"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"client_id": {cfg.ClientID}, "client_secret": {cfg.ClientSecret},
		"redirect_uri": {"https://shop.example/callback"},
	}
	resp, err = client.Post(idp.TokenEndpoint(), "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tokens oidcTokens
	if err := json.NewDecoder(resp.Body).Decode(&tokens); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %s, %v", resp.Status, err)
	}
	if tokens.AccessToken == "" || tokens.IDToken == "" {
		t.Fatalf("token response without tokens: %+v", tokens)
	}
	return tokens
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}
