package jwt

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
)

var (
	secret = []byte("0123456789abcdef0123456789abcdef")
	t0     = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// mint signs arbitrary claims with method and key, as a foreign issuer would.
func mint(t testing.TB, method gojwt.SigningMethod, key any, claims gojwt.Claims) string {
	t.Helper()
	s, err := gojwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func wantUnauthorized(t *testing.T, v *Verifier, token string) {
	t.Helper()
	uid, err := v.Verify(token)
	if err == nil {
		t.Fatalf("Verify accepted the token (user %q), want an error", uid)
	}
	if got := seckill.ErrorCode(err); got != seckill.EUNAUTHORIZED {
		t.Fatalf("error code = %q, want %q (err %v)", got, seckill.EUNAUTHORIZED, err)
	}
	if uid != "" {
		t.Fatalf("user id = %q alongside an error, want empty", uid)
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	tok, err := Sign(secret, "user-42", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	v := newVerifier(secret, at(t0.Add(59*time.Minute)))
	uid, err := v.Verify(tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if uid != "user-42" {
		t.Fatalf("user id = %q, want %q", uid, "user-42")
	}
}

func TestVerifyRealClock(t *testing.T) {
	tok, err := Sign(secret, "u1", time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if uid, err := NewVerifier(secret).Verify(tok); err != nil || uid != "u1" {
		t.Fatalf("Verify = %q, %v; want u1, nil", uid, err)
	}
}

func TestExpiry(t *testing.T) {
	tok, err := Sign(secret, "u1", time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	exp := t0.Add(time.Minute)

	// Within the leeway: accepted.
	if _, err := newVerifier(secret, at(exp.Add(Leeway-time.Second))).Verify(tok); err != nil {
		t.Fatalf("token inside the leeway rejected: %v", err)
	}
	// Past it: rejected, with a message saying why.
	v := newVerifier(secret, at(exp.Add(Leeway+time.Second)))
	wantUnauthorized(t, v, tok)
	if _, err := v.Verify(tok); !strings.Contains(seckill.ErrorMessage(err), "expired") {
		t.Fatalf("message = %q, want it to say expired", seckill.ErrorMessage(err))
	}
}

func TestForeignIssuerStandardClaims(t *testing.T) {
	// Another issuer adds iss, aud, jti and its own claims: all ignored.
	claims := gojwt.MapClaims{
		"sub":   "buyer@example.com",
		"exp":   t0.Add(time.Hour).Unix(),
		"iat":   t0.Unix(),
		"nbf":   t0.Add(-time.Minute).Unix(),
		"iss":   "https://idp.example.com",
		"aud":   []string{"shop"},
		"jti":   "abc",
		"roles": []string{"buyer"},
	}
	tok := mint(t, gojwt.SigningMethodHS256, secret, claims)
	uid, err := newVerifier(secret, at(t0)).Verify(tok)
	if err != nil || uid != "buyer@example.com" {
		t.Fatalf("Verify = %q, %v; want buyer@example.com, nil", uid, err)
	}
}

func TestRejects(t *testing.T) {
	v := newVerifier(secret, at(t0))
	exp := t0.Add(time.Hour).Unix()
	good := gojwt.MapClaims{"sub": "u1", "exp": exp}

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	noneTok := mint(t, gojwt.SigningMethodNone, gojwt.UnsafeAllowNoneSignatureType, good)
	goodTok := mint(t, gojwt.SigningMethodHS256, secret, good)
	parts := strings.Split(goodTok, ".")

	cases := map[string]string{
		"empty":              "",
		"garbage":            "not-a-token",
		"two segments":       parts[0] + "." + parts[1],
		"four segments":      goodTok + ".x",
		"alg none (library)": noneTok,
		// Hand-made alg=none with the signature of a real token kept, and
		// with an empty signature.
		"alg none keeps sig":  b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + "." + parts[2],
		"alg none empty sig":  b64(`{"alg":"none","typ":"JWT"}`) + "." + parts[1] + ".",
		"alg None mixed case": b64(`{"alg":"None","typ":"JWT"}`) + "." + parts[1] + ".",
		"no alg":              b64(`{"typ":"JWT"}`) + "." + parts[1] + "." + parts[2],
		// Algorithm switching: same secret, other HMAC; and an RS256 token.
		"HS512 same secret": mint(t, gojwt.SigningMethodHS512, secret, good),
		"HS384 same secret": mint(t, gojwt.SigningMethodHS384, secret, good),
		"RS256":             mint(t, gojwt.SigningMethodRS256, rsaKey, good),
		// Header swapped to HS256 over an RS256 signature.
		"header swap": b64(`{"alg":"HS256","typ":"JWT"}`) + "." + parts[1] + "." +
			strings.Split(mint(t, gojwt.SigningMethodRS256, rsaKey, good), ".")[2],
		"other secret":    mint(t, gojwt.SigningMethodHS256, []byte("another-secret-another-secret-!!"), good),
		"tampered claims": parts[0] + "." + b64(`{"sub":"admin","exp":`+itoa(exp)+`}`) + "." + parts[2],
		"tampered sig":    parts[0] + "." + parts[1] + "." + flip(parts[2]),
		"no exp":          mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1"}),
		"exp as string":   mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": "tomorrow"}),
		// RFC 7519 NumericDate is a JSON number; the library alone would
		// take a numeric string.
		"exp numeric string": mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": itoa(exp)}),
		"nbf numeric string": mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": exp, "nbf": itoa(t0.Add(-time.Hour).Unix())}),
		"iat numeric string": mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": exp, "iat": itoa(t0.Unix())}),
		"expired":            mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": t0.Add(-time.Hour).Unix()}),
		"not yet valid":      mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": exp, "nbf": t0.Add(time.Hour).Unix()}),
		"no sub":             mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"exp": exp}),
		"empty sub":          mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "", "exp": exp}),
		"numeric sub":        mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": 42, "exp": exp}),
		"long sub":           mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": strings.Repeat("a", seckill.MaxUserIDBytes+1), "exp": exp}),
		"newline sub":        mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1\nforged log line", "exp": exp}),
		"NUL sub":            mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u\x001", "exp": exp}),
		"DEL sub":            mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u\x7f1", "exp": exp}),
		"C1 control sub":     mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u\u00851", "exp": exp}),
		"oversized":          goodTok + strings.Repeat("A", MaxTokenBytes),
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) { wantUnauthorized(t, v, tok) })
	}
	// The untampered token is accepted, so the cases above fail for the
	// reason they name and not because the setup is broken.
	if uid, err := v.Verify(goodTok); err != nil || uid != "u1" {
		t.Fatalf("control token: Verify = %q, %v; want u1, nil", uid, err)
	}
}

func TestSubjectLimits(t *testing.T) {
	v := newVerifier(secret, at(t0))
	for _, sub := range []string{
		strings.Repeat("a", seckill.MaxUserIDBytes),
		"用户-1",
		"user with spaces",
	} {
		tok, err := Sign(secret, sub, time.Hour, t0)
		if err != nil {
			t.Fatalf("Sign(%q): %v", sub, err)
		}
		if uid, err := v.Verify(tok); err != nil || uid != sub {
			t.Fatalf("Verify = %q, %v; want %q, nil", uid, err, sub)
		}
	}
}

func TestEmptySecretFailsClosed(t *testing.T) {
	// A token signed with an empty key must not pass a verifier whose
	// secret was left unset.
	tok := mint(t, gojwt.SigningMethodHS256, []byte{}, gojwt.MapClaims{"sub": "u1", "exp": t0.Add(time.Hour).Unix()})
	wantUnauthorized(t, newVerifier(nil, at(t0)), tok)
	if _, err := Sign(nil, "u1", time.Hour, t0); err == nil {
		t.Fatal("Sign with an empty secret succeeded")
	}
}

func TestSignRejectsBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		user string
		ttl  time.Duration
	}{
		"empty user":   {"", time.Hour},
		"control user": {"a\tb", time.Hour},
		"long user":    {strings.Repeat("x", seckill.MaxUserIDBytes+1), time.Hour},
		"zero ttl":     {"u1", 0},
		"negative ttl": {"u1", -time.Second},
	} {
		if _, err := Sign(secret, c.user, c.ttl, t0); err == nil {
			t.Errorf("%s: Sign succeeded, want an error", name)
		}
	}
}

func TestVerifierCopiesSecret(t *testing.T) {
	s := append([]byte(nil), secret...)
	v := newVerifier(s, at(t0))
	s[0] ^= 0xff
	tok, _ := Sign(secret, "u1", time.Hour, t0)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("mutating the caller's slice changed the verifier: %v", err)
	}
}

func TestVerifyConcurrent(t *testing.T) {
	v := NewVerifier(secret)
	now := time.Now()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := "u" + itoa(int64(i))
			tok, err := Sign(secret, user, time.Minute, now)
			if err != nil {
				t.Error(err)
				return
			}
			for range 200 {
				if uid, err := v.Verify(tok); err != nil || uid != user {
					t.Errorf("Verify = %q, %v; want %q", uid, err, user)
					return
				}
				if _, err := v.Verify(tok[:len(tok)-2]); err == nil {
					t.Error("truncated token accepted")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkVerify(b *testing.B) {
	v := NewVerifier(secret)
	tok, err := Sign(secret, "user-1234567", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// flip changes the first character of a base64url string to another valid one.
func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// TestCacheHonoursExpiry: a token verified once is answered from the cache
// afterwards, but never past its expiry (plus leeway).
func TestCacheHonoursExpiry(t *testing.T) {
	secret := []byte("cache-secret-0123456789abcdef")
	now := time.Date(2026, 8, 20, 9, 0, 0, 0, time.UTC)
	clock := now
	v := newVerifier(secret, func() time.Time { return clock })
	tok, err := Sign(secret, "alice", time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if user, err := v.Verify(tok); err != nil || user != "alice" {
			t.Fatalf("Verify = %q, %v", user, err)
		}
	}
	clock = now.Add(time.Minute + Leeway + time.Second)
	if _, err := v.Verify(tok); err == nil {
		t.Fatal("an expired token was accepted from the cache")
	}
	// A token that differs in one character is never a cache hit.
	clock = now
	forged := tok[:len(tok)-2] + string("AB"[len(tok)%2]) + tok[len(tok)-1:]
	if forged != tok {
		if _, err := v.Verify(forged); err == nil {
			t.Fatal("a tampered token passed")
		}
	}
}

// TestCacheAnswersEachTokenItsOwn: with many tokens cached, a hit gives
// each one its own subject (the id is kept beside the token in one
// allocation), every request still checks expiry against its own time,
// and a token that is not one of them byte for byte (another secret, the
// claims or the signature changed) is verified afresh and refused while
// the genuine one sits in the cache.
func TestCacheAnswersEachTokenItsOwn(t *testing.T) {
	clock := t0
	v := newVerifier(secret, func() time.Time { return clock })
	toks := make([]string, 500)
	for i := range toks {
		tok, err := Sign(secret, fmt.Sprint("user-", i), time.Duration(i+1)*time.Minute, t0)
		if err != nil {
			t.Fatal(err)
		}
		toks[i] = tok
	}
	for round := range 2 { // the first verifies and caches, the second hits
		for i, tok := range toks {
			// A copy of the bytes, as each request brings its own.
			if uid, err := v.VerifyAt(string([]byte(tok)), t0); err != nil || uid != fmt.Sprint("user-", i) {
				t.Fatalf("round %d, token %d: VerifyAt = %q, %v", round, i, uid, err)
			}
		}
	}
	if n := v.verified.Len(); n != len(toks) {
		t.Fatalf("cache holds %d tokens, want %d", n, len(toks))
	}
	// Expiry, per request: token i lives i+1 minutes plus the leeway.
	clock = t0.Add(10*time.Minute + Leeway)
	for i, tok := range toks {
		uid, err := v.VerifyAt(tok, clock)
		if alive := i >= 10; alive != (err == nil) {
			t.Fatalf("token %d at t0+10m+leeway: VerifyAt = %q, %v; want accepted %v", i, uid, err, alive)
		}
	}
	clock = t0
	exp := t0.Add(time.Hour).Unix()
	genuine := mint(t, gojwt.SigningMethodHS256, secret, gojwt.MapClaims{"sub": "u1", "exp": exp})
	if uid, err := v.Verify(genuine); err != nil || uid != "u1" {
		t.Fatalf("Verify = %q, %v", uid, err)
	}
	parts := strings.Split(genuine, ".")
	for name, tok := range map[string]string{
		"other secret":    mint(t, gojwt.SigningMethodHS256, []byte("another-secret-another-secret-!!"), gojwt.MapClaims{"sub": "u1", "exp": exp}),
		"tampered claims": parts[0] + "." + b64(`{"sub":"u2","exp":`+itoa(exp)+`}`) + "." + parts[2],
		"tampered sig":    parts[0] + "." + parts[1] + "." + flip(parts[2]),
		"prefix":          genuine[:len(genuine)-1],
		"longer":          genuine + "A",
	} {
		t.Run(name, func(t *testing.T) { wantUnauthorized(t, v, tok) })
	}
	if uid, err := v.Verify(genuine); err != nil || uid != "u1" {
		t.Fatalf("the genuine token after the forgeries: Verify = %q, %v", uid, err)
	}
}

func TestCacheIsBounded(t *testing.T) {
	secret := []byte("cache-secret-0123456789abcdef")
	v := NewVerifier(secret)
	for i := range cacheShards*cacheShardMax + 5000 {
		tok, _ := Sign(secret, fmt.Sprint("u", i), time.Hour, time.Now())
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	total := v.verified.Len()
	if total > cacheShards*cacheShardMax {
		t.Fatalf("cache holds %d tokens, more than its bound %d", total, cacheShards*cacheShardMax)
	}
}

// TestSignatureSpareBitsRefused: the 43rd character of an HS256 signature
// carries 2 bits the 32 bytes do not use. A token whose last character
// differs only there decodes, leniently, to the same signature: the
// library alone accepts it as the token it was copied from. It is
// refused, as any other change to the token is.
func TestSignatureSpareBitsRefused(t *testing.T) {
	tok, err := Sign(secret, "u1", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	lenient := gojwt.NewParser(gojwt.WithValidMethods(validMethods), gojwt.WithTimeFunc(at(t0)))
	keyFunc := func(*gojwt.Token) (any, error) { return secret, nil }
	tried := 0
	for spare := 1; spare < 4; spare++ {
		alias := tok[:len(tok)-1] + string(alphabet[last^spare])
		if _, err := lenient.Parse(alias, keyFunc); err != nil {
			t.Fatalf("the lenient library refused the alias %q (%v): the test no longer shows what it means to", alias, err)
		}
		tried++
		wantUnauthorized(t, newVerifier(secret, at(t0)), alias)
	}
	if tried != 3 {
		t.Fatalf("tried %d aliases, want 3", tried)
	}
	if uid, err := newVerifier(secret, at(t0)).Verify(tok); err != nil || uid != "u1" {
		t.Fatalf("the token itself: Verify = %q, %v", uid, err)
	}
}

// libraryVerdict is what the library's own parser, with the Verifier's
// options, says of token at now: the user, or whether it refused it as
// expired or otherwise.
func libraryVerdict(token string, now time.Time) (user string, expired, ok bool) {
	p := gojwt.NewParser(gojwt.WithValidMethods(validMethods), gojwt.WithExpirationRequired(),
		gojwt.WithLeeway(Leeway), gojwt.WithStrictDecoding(), gojwt.WithTimeFunc(at(now)))
	var claims twoPassClaims
	_, err := p.ParseWithClaims(token, &claims, func(*gojwt.Token) (any, error) { return secret, nil })
	if err != nil {
		return "", errors.Is(err, gojwt.ErrTokenExpired), false
	}
	if !seckill.ValidUserID(claims.Subject) {
		return "", false, false
	}
	return claims.Subject, false, true
}

// twoPassClaims are strictClaims as they were first written: the times
// checked in a pass of their own, then the library's RegisteredClaims read
// by encoding/json.
type twoPassClaims struct {
	gojwt.RegisteredClaims
}

func (c *twoPassClaims) UnmarshalJSON(b []byte) error {
	var times struct {
		Exp, Nbf, Iat json.RawMessage
	}
	if err := json.Unmarshal(b, &times); err != nil {
		return err
	}
	for _, raw := range []json.RawMessage{times.Exp, times.Nbf, times.Iat} {
		if len(raw) > 0 && raw[0] == '"' {
			return errDateNotNumber
		}
	}
	return json.Unmarshal(b, &c.RegisteredClaims)
}

// agree fails t when v and the library judge token differently.
func agree(t *testing.T, token string) {
	t.Helper()
	wantUser, wantExpired, wantOK := libraryVerdict(token, t0)
	user, err := newVerifier(secret, at(t0)).Verify(token)
	switch {
	case wantOK && (err != nil || user != wantUser):
		t.Fatalf("token %q: Verify = %q, %v; the library accepts it for %q", token, user, err, wantUser)
	case !wantOK && err == nil:
		t.Fatalf("token %q: Verify accepted it for %q; the library refuses it", token, user)
	case !wantOK && wantExpired != strings.Contains(seckill.ErrorMessage(err), "expired"):
		t.Fatalf("token %q: refused with %q; the library's refusal is expired=%v", token, seckill.ErrorMessage(err), wantExpired)
	}
}

// signedToken signs header.claims (both raw JSON) with secret.
func signedToken(header, claims string) string {
	text := b64(header) + "." + b64(claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(text))
	return text + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// TestAgreesWithLibrary: tokens verified without the library's parser (a
// header of hs256Headers) get its verdict, whatever their claims; other
// headers go through it.
func TestAgreesWithLibrary(t *testing.T) {
	exp, past, soon := itoa(t0.Add(time.Hour).Unix()), itoa(t0.Add(-time.Hour).Unix()), itoa(t0.Add(-Leeway/2).Unix())
	headers := []string{
		`{"alg":"HS256","typ":"JWT"}`, `{"typ":"JWT","alg":"HS256"}`, `{"alg":"HS256"}`,
		`{"alg":"HS256","typ":"JWT","kid":"k1"}`, `{"alg":"HS256","typ":"JWT"} `, `{"alg":"HS512","typ":"JWT"}`,
		`{"alg":"none"}`, `{"alg":"hs256"}`, `{"ALG":"HS256"}`, `["alg","HS256"]`, `{"alg":"HS256","alg":"none"}`,
	}
	claims := []string{
		`{"sub":"u1","exp":` + exp + `}`,
		`{"exp":` + exp + `,"sub":"u1","iat":` + itoa(t0.Unix()) + `}`,
		`{"sub":"u1","exp":` + past + `}`,
		`{"sub":"u1","exp":` + soon + `}`, // within the leeway
		`{"sub":"u1","exp":` + exp + `.75}`,
		`{"sub":"u1","exp":1e11}`,
		`{"sub":"u1","exp":-1}`,
		`{"sub":"u1","exp":null}`,
		`{"sub":"u1"}`,
		`{"sub":"u1","exp":"` + exp + `"}`,
		`{"sub":"u1","exp":` + exp + `,"nbf":` + exp + `}`,
		`{"sub":"u1","exp":` + exp + `,"nbf":` + itoa(t0.Add(Leeway/2).Unix()) + `}`,
		`{"sub":"u1","exp":` + exp + `,"aud":"shop"}`,
		`{"sub":"u1","exp":` + exp + `,"aud":["a","b"]}`,
		`{"sub":"u1","exp":` + exp + `,"aud":7}`,
		`{"sub":"u1","exp":` + exp + `,"iss":7}`,
		`{"sub":"u1","exp":` + exp + `,"jti":{}}`,
		`{"sub":7,"exp":` + exp + `}`,
		`{"sub":"","exp":` + exp + `}`,
		`{"sub":"u1","sub":"u2","exp":` + exp + `}`,
		`{"SUB":"u1","EXP":` + exp + `}`,
		`{"sub":"u1","exp":` + exp + `,"exp":` + past + `}`,
		`{"sub":"u1","exp":` + past + `,"exp":` + exp + `}`,
		`{"sub":"u1","exp":` + exp + `,"exp":null}`,
		`{"sub":"u1","exp":null,"exp":` + exp + `}`,
		`{"sub":"u1","Exp":` + exp + `,"nbf":null,"iat":null}`,
		`{"sub":"u1","exp":` + exp + `,"nbf":"0"}`,
		`{"sub":"u1","exp":` + exp + `,"iat":true}`,
		`{"sub":"u1","exp":[` + exp + `]}`,
		`{"sub":"u1","exp":{}}`,
		`{"sub":null,"exp":` + exp + `}`,
		`{"sub":"u1","exp":` + exp + `,"aud":null,"iss":null,"jti":null}`,
		`{"sub":"u1","exp":` + exp + `,"aud":[7]}`,
		`{"sub":"u1","exp":` + exp + `,"\u0065xp":` + past + `}`,
		`{"sub":"u1","\u017Fub":"u2","exp":` + exp + `}`,
		`{"sub":"u1","exp":` + exp + `} `,
		`{"sub":"u1","exp":` + exp + `}x`,
		`{"sub":"u1","exp":` + exp + `,"x":{"y":[1,2,{"z":null}]}}`,
		`{"sub":"u\u0031","exp":` + exp + `}`,
		`[]`, `null`, `"u1"`, ``, `{`,
	}
	for _, h := range headers {
		for _, c := range claims {
			agree(t, signedToken(h, c))
		}
	}
	// Changed after signing: each of the three segments, and the dots.
	good := signedToken(headers[0], claims[0])
	parts := strings.Split(good, ".")
	for _, tok := range []string{
		parts[0] + "." + b64(`{"sub":"u2","exp":`+exp+`}`) + "." + parts[2],
		parts[0] + "." + parts[1] + "." + flip(parts[2]),
		parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1],
		parts[0] + "." + parts[1] + "." + parts[2] + "A",
		parts[0] + "." + parts[1] + "." + parts[2] + "=",
		parts[0] + "." + parts[1] + "." + parts[2] + ".",
		parts[0] + "." + parts[1] + "=." + parts[2],
		parts[0] + "." + parts[1],
		parts[0] + ".." + parts[2],
		"." + parts[1] + "." + parts[2],
	} {
		agree(t, tok)
	}
}

// FuzzAgreesWithLibrary: for any claims JSON under any header, signed or
// not, the Verifier and the library's parser give the same verdict.
func FuzzAgreesWithLibrary(f *testing.F) {
	exp := itoa(t0.Add(time.Hour).Unix())
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"u1","exp":`+exp+`}`, true)
	f.Add(`{"alg":"HS256"}`, `{"sub":"u1","exp":`+exp+`,"aud":["x"]}`, true)
	f.Add(`{"alg":"HS256","typ":"JWT"}`, `{"sub":"u1","exp":1}`, false)
	f.Fuzz(func(t *testing.T, header, claims string, signed bool) {
		tok := signedToken(header, claims)
		if !signed {
			tok = tok[:strings.LastIndexByte(tok, '.')+1] + flip(tok[strings.LastIndexByte(tok, '.')+1:])
		}
		agree(t, tok)
	})
}

// BenchmarkVerifyFirstSight is a token's first verification, which the
// cache does not answer: the library's parser against the Verifier's own
// path for the headers of hs256Headers.
func BenchmarkVerifyFirstSight(b *testing.B) {
	v := NewVerifier(secret)
	toks := make([]string, 1024)
	for i := range toks {
		tok, err := Sign(secret, "user-"+itoa(int64(i)), time.Hour, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		toks[i] = tok
	}
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			var claims strictClaims
			if _, err := v.parser.ParseWithClaims(toks[i%len(toks)], &claims, v.keyFunc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verifier", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := v.parse(toks[i%len(toks)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestDeriveKey(t *testing.T) {
	secret := []byte("deployment secret")
	k := DeriveKey(secret, "seckill reservation ids v1")
	if !bytes.Equal(k, DeriveKey(secret, "seckill reservation ids v1")) {
		t.Fatal("DeriveKey is not deterministic")
	}
	if bytes.Equal(k, secret) || bytes.Equal(k, DeriveKey(secret, "other purpose")) || bytes.Equal(k, DeriveKey([]byte("other secret"), "seckill reservation ids v1")) {
		t.Fatal("DeriveKey: want a key of its own per secret and purpose")
	}
	// The reservation ids of running deployments are signed with it: it
	// must not change. HMAC-SHA256(secret, purpose):
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("seckill reservation ids v1"))
	if want := m.Sum(nil); !bytes.Equal(k, want) {
		t.Fatalf("DeriveKey = %x, want %x", k, want)
	}
}
