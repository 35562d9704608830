package jwt

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
)

// TestBadSignatureIsTold: a token refused after its signature was checked
// is seckill.ErrBadSignature, whatever its algorithm, so that the API can
// limit what such tokens cost per address; a refusal that cost no
// signature check (expired, wrong issuer, unknown key, not a token) is
// not, since an honest client sends those too. Known answers from memory
// only the tokens verified before.
func TestBadSignatureIsTold(t *testing.T) {
	now := time.Now()
	clk := newClock(now)
	rsa := newIdPKey(t, "rsa-1", jose.RS256)
	ec := newIdPKey(t, "ec-1", jose.ES256)
	v, _ := idpVerifier(t, newJWKSServer(t, rsa, ec).URL, clk)
	forge := func(tok string) string {
		p := strings.Split(tok, ".")
		return p[0] + "." + p[1] + "." + flip(p[2])
	}
	hs := mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{
		"iss": testIssuer, "aud": testAudience, "sub": "ann", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	expired := buyerClaims("ann", now.Add(-2*time.Hour), time.Hour)
	wrongIssuer := buyerClaims("ann", now, time.Hour)
	wrongIssuer.Issuer = "https://evil.example/"

	for name, c := range map[string]struct {
		tok string
		bad bool
	}{
		"forged HS256":             {forge(hs), true},
		"forged RS256":             {forge(rsa.sign(t, buyerClaims("ann", now, time.Hour))), true},
		"forged ES256":             {forge(ec.sign(t, buyerClaims("ann", now, time.Hour))), true},
		"expired RS256, forged":    {forge(rsa.sign(t, expired)), false},
		"wrong issuer, forged":     {forge(rsa.sign(t, wrongIssuer)), false},
		"unknown kid":              {newIdPKey(t, "made-up", jose.RS256).sign(t, buyerClaims("ann", now, time.Hour)), false},
		"not a token":              {"abc.def.ghi", false},
		"HS256 with a bad payload": {strings.Split(hs, ".")[0] + ".e30." + strings.Split(hs, ".")[2], true},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := v.VerifyAt(c.tok, now)
			if seckill.ErrorCode(err) != seckill.EUNAUTHORIZED {
				t.Fatalf("VerifyAt = %v; want unauthorized", err)
			}
			if got := errors.Is(err, seckill.ErrBadSignature); got != c.bad {
				t.Fatalf("errors.Is(%v, ErrBadSignature) = %v; want %v", err, got, c.bad)
			}
			if _, ok := v.Known(c.tok, now); ok {
				t.Fatal("Known answers a refused token")
			}
		})
	}

	good := rsa.sign(t, buyerClaims("bob", now, time.Hour))
	if _, ok := v.Known(good, now); ok {
		t.Fatal("Known answers a token never verified")
	}
	if uid, err := v.VerifyAt(good, now); err != nil || uid != "bob" {
		t.Fatalf("VerifyAt(good) = %q, %v", uid, err)
	}
	if uid, ok := v.Known(good, now); !ok || uid != "bob" {
		t.Fatalf("Known(good) = %q, %v after it was verified; want bob", uid, ok)
	}
	if _, ok := v.Known(good, now.Add(2*time.Hour)); ok {
		t.Fatal("Known answers a verified token past its expiry")
	}
}
