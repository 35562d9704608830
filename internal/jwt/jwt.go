// Package jwt verifies and signs the HS256 buyer tokens of the API.
//
// A buyer token is a standard JWT whose `sub` claim is the user id. Any
// issuer holding the shared secret can mint tokens: only registered claims
// are read, nothing specific to this project. Verification is strict
// (HS256 only, `exp` required) and cheap: one parser is built once and
// reused by every call, so it can run on every buy request.
package jwt

import (
	"encoding/json"
	"errors"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ttlcache"
)

// Leeway is the clock skew tolerated on `exp` and `nbf`, so a token minted
// on a host whose clock runs a little ahead still works.
const Leeway = 30 * time.Second

// MaxTokenBytes bounds the token size accepted before any decoding, so a
// huge Authorization header costs no base64 or JSON work. Real buyer tokens
// are a few hundred bytes.
const MaxTokenBytes = 4096

var validMethods = []string{gojwt.SigningMethodHS256.Alg()}

// Verifier checks buyer tokens. It is safe for concurrent use.
type Verifier struct {
	secret []byte
	key    any // secret, boxed once: boxing a slice per call allocates
	parser *gojwt.Parser
	// keyFunc is built once: a closure per call would allocate on the hot path.
	keyFunc gojwt.Keyfunc
	now     func() time.Time
	// verified remembers tokens that passed, until they expire: a buyer
	// hammering "buy" sends the same token again and again, and a hit costs
	// a map lookup instead of base64, JSON and an HMAC.
	verified *ttlcache.Cache[string]
}

// The cache holds at most cacheShards × cacheShardMax tokens (a few
// hundred bytes each).
const (
	cacheShards   = 16
	cacheShardMax = 4096
)

// NewVerifier returns a Verifier for tokens signed with secret. An empty
// secret yields a Verifier that rejects every token, so a misconfigured
// node fails closed.
func NewVerifier(secret []byte) *Verifier {
	return newVerifier(secret, nil)
}

// newVerifier lets tests pin the clock.
func newVerifier(secret []byte, now func() time.Time) *Verifier {
	opts := []gojwt.ParserOption{
		// Pinning the method defeats alg=none and the RS256→HS256 switch
		// (a public key used as an HMAC secret).
		gojwt.WithValidMethods(validMethods),
		gojwt.WithExpirationRequired(),
		gojwt.WithLeeway(Leeway),
	}
	if now != nil {
		opts = append(opts, gojwt.WithTimeFunc(now))
	} else {
		now = time.Now
	}
	v := &Verifier{
		secret:   append([]byte(nil), secret...),
		parser:   gojwt.NewParser(opts...),
		now:      now,
		verified: ttlcache.New[string](cacheShards, cacheShardMax),
	}
	v.key = v.secret
	v.keyFunc = func(t *gojwt.Token) (any, error) {
		// WithValidMethods already checked the alg name; checking the type
		// too costs nothing and survives a future change of options.
		if _, ok := t.Method.(*gojwt.SigningMethodHMAC); !ok {
			return nil, errors.New("unexpected signing method")
		}
		return v.key, nil
	}
	return v
}

// Verify checks token and returns the user id it carries. Every failure is
// a *seckill.Error with code EUNAUTHORIZED whose message is safe to show.
func (v *Verifier) Verify(token string) (userID string, err error) {
	if len(v.secret) == 0 {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Buyer tokens are not accepted by this server.")
	}
	if token == "" {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "A bearer token is required.")
	}
	if len(token) > MaxTokenBytes {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Invalid token.")
	}
	now := v.now()
	if user, _, ok := v.verified.Get(token, now); ok {
		return user, nil
	}
	var claims strictClaims
	if _, err := v.parser.ParseWithClaims(token, &claims, v.keyFunc); err != nil {
		if errors.Is(err, gojwt.ErrTokenExpired) {
			return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Token has expired.")
		}
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Invalid token.")
	}
	if !seckill.ValidUserID(claims.Subject) {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Invalid token subject.")
	}
	// WithExpirationRequired guarantees ExpiresAt; a not-before in the
	// future was refused above, so from here on only expiry can change the
	// answer: the token is kept until it expires, plus the leeway.
	v.verified.Put(token, claims.Subject, claims.ExpiresAt.Add(Leeway), now)
	return claims.Subject, nil
}

// strictClaims are the registered claims, with their times held to RFC
// 7519's NumericDate: a JSON number. The library also takes a string of
// digits ("exp":"1893456000"), which no conforming issuer sends; a token
// carrying one is refused rather than trusted to mean what it seems.
type strictClaims struct {
	gojwt.RegisteredClaims
}

var errDateNotNumber = errors.New("exp, nbf and iat must be JSON numbers")

func (c *strictClaims) UnmarshalJSON(b []byte) error {
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

// Sign returns an HS256 token for userID that expires ttl after now. It is
// used by the `seckill token` command and by tests; production buyers get
// their tokens from whatever issuer shares the secret.
func Sign(secret []byte, userID string, ttl time.Duration, now time.Time) (string, error) {
	switch {
	case len(secret) == 0:
		return "", errors.New("jwt: empty secret")
	case !seckill.ValidUserID(userID):
		return "", errors.New("jwt: invalid user id")
	case ttl <= 0:
		return "", errors.New("jwt: ttl must be positive")
	}
	claims := gojwt.RegisteredClaims{
		Subject:   userID,
		IssuedAt:  gojwt.NewNumericDate(now),
		ExpiresAt: gojwt.NewNumericDate(now.Add(ttl)),
	}
	s, err := gojwt.NewWithClaims(gojwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", err
	}
	return s, nil
}
