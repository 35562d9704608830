package jwt

import (
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	gojwt "github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerifyAlgorithms is the cost of Verify by algorithm, first
// sight (the token verified, then forgotten, so each iteration checks a
// signature) and cached (a token seen before), all on one Verifier with
// the issuer, audience and lifetime pinned as a shop with an identity
// provider runs it. HS256-plain is today's token (Sign: sub, iat, exp);
// the others carry an IdP's claims (iss, aud, sub, iat, nbf, exp). The
// bogus cases are what a flood of forged tokens costs: a known kid with a
// wrong signature pays one signature check; an unknown kid (within the
// fetch interval) or a wrong issuer pays none.
func BenchmarkVerifyAlgorithms(b *testing.B) {
	now := time.Now()
	clk := newClock(now)
	keys := map[string]idpKey{
		"RS256": newIdPKey(b, "rsa-1", jose.RS256),
		"ES256": newIdPKey(b, "ec-1", jose.ES256),
		"EdDSA": newIdPKey(b, "ed-1", jose.EdDSA),
	}
	srv := newJWKSServer(b, keys["RS256"], keys["ES256"], keys["EdDSA"])
	v, _ := idpVerifier(b, srv.URL, clk)
	const n = 128
	toks := map[string][]string{}
	for i := range n {
		user := "user-" + itoa(int64(1000000+i))
		plain, err := Sign(secret, user, time.Hour, now)
		if err != nil {
			b.Fatal(err)
		}
		toks["HS256-plain"] = append(toks["HS256-plain"], plain)
		toks["HS256"] = append(toks["HS256"], mint(b, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{
			"iss": testIssuer, "aud": testAudience, "sub": user, "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}))
		for alg, k := range keys {
			toks[alg] = append(toks[alg], k.sign(b, buyerClaims(user, now, time.Hour)))
		}
	}
	forged := func(tok string) string {
		p := strings.Split(tok, ".")
		return p[0] + "." + p[1] + "." + flip(p[2])
	}
	toks["bogus-RS256-known-kid"] = []string{forged(toks["RS256"][0])}
	toks["bogus-unknown-kid"] = []string{newIdPKey(b, "made-up", jose.RS256).sign(b, buyerClaims("u", now, time.Hour))}
	c := buyerClaims("u", now, time.Hour)
	c.Issuer = "https://evil.example/"
	toks["bogus-wrong-issuer"] = []string{forged(keys["RS256"].sign(b, c))}
	v.Verify(toks["bogus-unknown-kid"][0]) // spends the fetch allowance

	// Today's verifier: HS256 only, nothing pinned.
	today := newVerifier(secret, clk.fn())
	verifier := func(name string) *Verifier {
		if name == "HS256-plain" {
			return today
		}
		return v
	}
	first := func(name string) {
		b.Run(name+"/first", func(b *testing.B) {
			ts, v := toks[name], verifier(name)
			b.ReportAllocs()
			for i := range b.N {
				tok := ts[i%len(ts)]
				if _, err := v.VerifyAt(tok, now); err != nil {
					b.Fatal(err)
				}
				v.verified.Delete(tok)
			}
		})
	}
	cached := func(name string) {
		b.Run(name+"/cached", func(b *testing.B) {
			ts, v := toks[name], verifier(name)
			for _, tok := range ts {
				if _, err := v.VerifyAt(tok, now); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := v.VerifyAt(ts[i%len(ts)], now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	bogus := func(name string) {
		b.Run(name, func(b *testing.B) {
			tok := toks[name][0]
			b.ReportAllocs()
			for range b.N {
				if _, err := v.VerifyAt(tok, now); err == nil {
					b.Fatal("forged token accepted")
				}
			}
		})
	}
	for _, name := range []string{"HS256-plain", "HS256", "RS256", "ES256", "EdDSA"} {
		first(name)
		cached(name)
	}
	bogus("bogus-RS256-known-kid")
	bogus("bogus-unknown-kid")
	bogus("bogus-wrong-issuer")
}
