// Package jwt verifies the buyer tokens of the API and signs HS256 ones.
//
// A buyer token is a standard JWT whose `sub` claim is the user id. It is
// signed HS256 with a shared secret, or RS256, ES256 or EdDSA by the
// shop's identity provider, whose keys come from its JWKS (KeySet). Only
// registered claims are read, nothing specific to this project.
// Verification is strict (one key type per algorithm, `exp` required,
// `iss`, `aud` and the lifetime pinned when configured, canonical
// base64url) and cheap: a token is
// verified once and then answered from a cache until it expires, and the
// first sight of a token in the form issuers send (see hs256Headers)
// skips the library's header decoding and the allocations of its HMAC,
// and claims written plainly skip encoding/json (decodePlainClaims).
package jwt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"slices"
	"strings"
	"sync"
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

// segments decodes the token's base64url segments: canonical spellings
// only (no padding, zero trailing bits), so that one signature has one
// spelling and a token changed in its last character's spare bits is
// refused, not taken for the original.
var segments = base64.RawURLEncoding.Strict()

// hs256Headers are the header segments HS256 issuers send: the JSON
// objects {"alg":"HS256","typ":"JWT"} (golang-jwt, jsonwebtoken, jose),
// {"typ":"JWT","alg":"HS256"} and {"alg":"HS256"}, base64url-encoded. A
// token with one of them is verified without decoding its header; any
// other header goes through the library's parser.
var hs256Headers = func() []string {
	var hs []string
	for _, h := range []string{`{"alg":"HS256","typ":"JWT"}`, `{"typ":"JWT","alg":"HS256"}`, `{"alg":"HS256"}`} {
		hs = append(hs, base64.RawURLEncoding.EncodeToString([]byte(h)))
	}
	return hs
}()

// Verifier checks buyer tokens. It is safe for concurrent use.
type Verifier struct {
	secret []byte
	key    any // secret, boxed once: boxing a slice per call allocates
	// keys are the identity provider's public keys; nil refuses every
	// token but HS256 ones.
	keys *KeySet
	// maxLifetime, when positive, refuses tokens whose exp is further
	// than this from their iat, and tokens without iat.
	maxLifetime time.Duration
	// issuer and audience are pinned when set (the validator checks
	// them; judge names a missing one).
	issuer, audience string
	parser           *gojwt.Parser
	// validator judges the claims of a token verified without parser, by
	// the parser's own rules.
	validator *gojwt.Validator
	// keyFunc is built once: a closure per call would allocate on the hot path.
	keyFunc gojwt.Keyfunc
	now     func() time.Time
	// verified remembers tokens that passed, until they expire: a buyer
	// hammering "buy" sends the same token again and again, and a hit costs
	// a map lookup instead of base64, JSON and an HMAC or a public-key
	// signature check, whatever the token's algorithm.
	verified *ttlcache.Cache[string]
	// macs holds HMAC-SHA256 states keyed with secret, and their buffers.
	macs sync.Pool
}

// The cache holds at most cacheShards × cacheShardMax tokens (a few
// hundred bytes each).
const (
	cacheShards   = 16
	cacheShardMax = 4096
)

// Config configures a Verifier. A Verifier with neither Secret nor Keys
// rejects every token, so a misconfigured node fails closed.
type Config struct {
	// Secret is the HS256 shared secret; empty refuses HS256 tokens.
	Secret []byte
	// Keys are the identity provider's public keys (RS256, ES256, EdDSA,
	// chosen by kid); nil refuses tokens signed otherwise than HS256.
	Keys *KeySet
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be among the token's aud.
	Audience string
	// MaxLifetime, when positive, refuses a token whose exp is more than
	// this after its iat, and a token without iat (it cannot show it is
	// short-lived). Zero or negative: no limit.
	MaxLifetime time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// NewVerifier returns a Verifier for HS256 tokens signed with secret, with
// no issuer, audience or lifetime rule. An empty secret yields a Verifier
// that rejects every token.
func NewVerifier(secret []byte) *Verifier {
	return New(Config{Secret: secret})
}

// newVerifier lets tests pin the clock.
func newVerifier(secret []byte, now func() time.Time) *Verifier {
	return New(Config{Secret: secret, Now: now})
}

// New returns a Verifier for cfg.
func New(cfg Config) *Verifier {
	methods := []string{}
	if len(cfg.Secret) > 0 {
		methods = append(methods, gojwt.SigningMethodHS256.Alg())
	}
	if cfg.Keys != nil {
		methods = append(methods, algRS256, algES256, algEdDSA)
	}
	opts := []gojwt.ParserOption{
		// Pinning the methods defeats alg=none and HS384/HS512; the
		// keyFunc pins each method to its own kind of key (the
		// RS256→HS256 switch: a public key used as an HMAC secret).
		gojwt.WithValidMethods(methods),
		gojwt.WithExpirationRequired(),
		gojwt.WithLeeway(Leeway),
		gojwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, gojwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, gojwt.WithAudience(cfg.Audience))
	}
	if cfg.MaxLifetime > 0 {
		// An iat in the future would stretch the lifetime unseen.
		opts = append(opts, gojwt.WithIssuedAt())
	}
	now := cfg.Now
	if now != nil {
		opts = append(opts, gojwt.WithTimeFunc(now))
	} else {
		now = time.Now
	}
	v := &Verifier{
		secret:      append([]byte(nil), cfg.Secret...),
		keys:        cfg.Keys,
		maxLifetime: cfg.MaxLifetime,
		issuer:      cfg.Issuer,
		audience:    cfg.Audience,
		parser:      gojwt.NewParser(opts...),
		validator:   gojwt.NewValidator(opts...),
		now:         now,
		verified:    ttlcache.New[string](cacheShards, cacheShardMax),
	}
	v.key = v.secret
	v.keyFunc = v.chooseKey
	v.macs.New = func() any { return &macState{mac: hmac.New(sha256.New, v.secret)} }
	if v.keys != nil {
		// A withdrawn key's tokens are refused at once, not when they
		// leave the cache.
		v.keys.onRemoved(v.verified.Clear)
	}
	return v
}

// chooseKey is the parser's key function. It judges the claims first, so
// a token with a wrong issuer, audience or lifetime, or expired, costs no
// signature check and prompts no JWKS fetch. Each method gets only its own
// kind of key: HS256 the shared secret, never a JWKS key; RS256, ES256
// and EdDSA the JWKS key its kid names, and only if that key is of the
// method's type.
func (v *Verifier) chooseKey(t *gojwt.Token) (any, error) {
	claims, ok := t.Claims.(*strictClaims)
	if !ok {
		return nil, errors.New("unexpected claims type")
	}
	if err := v.judge(claims); err != nil {
		return nil, err
	}
	switch t.Method.Alg() {
	case gojwt.SigningMethodHS256.Alg():
		// WithValidMethods already checked the alg name; checking the
		// type too costs nothing and survives a change of options.
		if _, ok := t.Method.(*gojwt.SigningMethodHMAC); !ok || len(v.secret) == 0 {
			return nil, errors.New("unexpected signing method")
		}
		return v.key, nil
	case algRS256, algES256, algEdDSA:
		if v.keys == nil {
			return nil, errors.New("unexpected signing method")
		}
		kid, _ := t.Header["kid"].(string)
		return v.keys.key(kid, t.Method.Alg())
	}
	return nil, errors.New("unexpected signing method")
}

// judge checks claims by the parser's rules and the lifetime rule.
func (v *Verifier) judge(c *strictClaims) error {
	// The validator calls a missing iss or aud a missing claim, like a
	// missing exp; the buyer is told which.
	if v.issuer != "" && c.Issuer == "" {
		return errIssuer
	}
	if v.audience != "" && len(c.Audience) == 0 {
		return errAudience
	}
	if err := v.validator.Validate(c); err != nil {
		return err
	}
	if v.maxLifetime <= 0 {
		return nil
	}
	if c.IssuedAt == nil {
		return errNoIssuedAt
	}
	if c.ExpiresAt.Sub(c.IssuedAt.Time) > v.maxLifetime {
		return errTooLong
	}
	return nil
}

var (
	errInvalid    = seckill.Errorf(seckill.EUNAUTHORIZED, "Invalid token.")
	errExpired    = seckill.Errorf(seckill.EUNAUTHORIZED, "Token has expired.")
	errNoIssuedAt = seckill.Errorf(seckill.EUNAUTHORIZED, "Token has no iat (issued at): this server limits token lifetime.")
	errTooLong    = seckill.Errorf(seckill.EUNAUTHORIZED, "Token lifetime (exp - iat) is over this server's maximum.")
	errIssuer     = seckill.Errorf(seckill.EUNAUTHORIZED, "Token issuer (iss) is not the one this server accepts.")
	errAudience   = seckill.Errorf(seckill.EUNAUTHORIZED, "Token audience (aud) does not name this server.")
	errKeyUnknown = seckill.Errorf(seckill.EUNAUTHORIZED, "Token is signed by a key (kid) this server does not know.")
)

// Verify checks token and returns the user id it carries. Every failure is
// a *seckill.Error with code EUNAUTHORIZED whose message is safe to show.
func (v *Verifier) Verify(token string) (userID string, err error) {
	return v.VerifyAt(token, v.now())
}

// VerifyAt is Verify at now, for a caller that has read the clock already
// (the reservation route reads it once per request: on this project's
// virtual machines a read costs 150-250 ns, more than the cache lookup
// that answers a known token). A token whose kid the JWKS does not hold
// may wait for a fetch of the JWKS (see KeySet).
func (v *Verifier) VerifyAt(token string, now time.Time) (userID string, err error) {
	if len(v.secret) == 0 && v.keys == nil {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Buyer tokens are not accepted by this server.")
	}
	if token == "" {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "A bearer token is required.")
	}
	if len(token) > MaxTokenBytes {
		return "", errInvalid
	}
	if user, _, ok := v.verified.Get(token, now); ok {
		return user, nil
	}
	var gen uint64
	if v.keys != nil {
		gen = v.keys.gen.Load()
	}
	claims, err := v.parse(token)
	if err != nil {
		return "", refusal(err)
	}
	if !seckill.ValidUserID(claims.Subject) {
		return "", seckill.Errorf(seckill.EUNAUTHORIZED, "Invalid token subject.")
	}
	if v.keys != nil && v.keys.gen.Load() != gen {
		// A key was withdrawn while this token was checked, maybe its
		// own: answer this once, but do not remember it.
		return claims.Subject, nil
	}
	// WithExpirationRequired guarantees ExpiresAt; a not-before in the
	// future was refused above, so from here on only expiry can change the
	// answer: the token is kept until it expires, plus the leeway.
	//
	// The key and the user id are kept in one allocation, the id right
	// after the token: a hit reads the stored token to compare it, and the
	// caller reads the id next, which is then in the same cache line as
	// the token's end instead of a line of its own elsewhere in the heap.
	// With thousands of buyers the cache is out of the CPU's caches, and
	// a line missed costs more than the rest of the lookup.
	kept := token + claims.Subject
	v.verified.Put(kept[:len(token)], kept[len(token):], claims.ExpiresAt.Add(Leeway), now)
	return claims.Subject, nil
}

// Known returns the user id of a token verified before and not expired
// at now, from memory alone: it checks no signature. ok is false for any
// other token.
func (v *Verifier) Known(token string, now time.Time) (userID string, ok bool) {
	user, _, ok := v.verified.Get(token, now)
	return user, ok
}

// refusal is the error a buyer sees for err: what to fix when it is the
// token's claims or key, seckill.ErrBadSignature when its signature was
// checked and is wrong, "Invalid token." for anything else.
func refusal(err error) error {
	switch {
	case errors.Is(err, gojwt.ErrTokenSignatureInvalid):
		return seckill.ErrBadSignature
	case errors.Is(err, gojwt.ErrTokenExpired):
		return errExpired
	case errors.Is(err, errNoIssuedAt):
		return errNoIssuedAt
	case errors.Is(err, errTooLong):
		return errTooLong
	case errors.Is(err, errIssuer), errors.Is(err, gojwt.ErrTokenInvalidIssuer):
		return errIssuer
	case errors.Is(err, errAudience), errors.Is(err, gojwt.ErrTokenInvalidAudience):
		return errAudience
	case errors.Is(err, errUnknownKey):
		return errKeyUnknown
	}
	return errInvalid
}

// parse verifies token's signature and judges its claims, by the rules of
// v.parser. A token whose header is one of hs256Headers says nothing its
// header segment does not: its signature and claims are checked here, the
// way the parser checks them (the same claims type and json.Unmarshal,
// the same Validator); any other goes through the parser.
func (v *Verifier) parse(token string) (*strictClaims, error) {
	head, rest, _ := strings.Cut(token, ".")
	if len(v.secret) == 0 || !slices.Contains(hs256Headers, head) {
		var claims strictClaims
		if _, err := v.parser.ParseWithClaims(token, &claims, v.keyFunc); err != nil {
			return nil, err
		}
		return &claims, nil
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(sig, '.') >= 0 {
		return nil, gojwt.ErrTokenMalformed
	}
	st := v.macs.Get().(*macState)
	defer v.macs.Put(st)
	st.buf = append(st.buf[:0], token...)
	text := st.buf[:len(head)+1+len(payload)]
	// The canonical encoding of the MAC equals the signature as sent
	// exactly when the signature decodes strictly to the MAC.
	st.mac.Reset()
	st.mac.Write(text)
	st.enc = segments.AppendEncode(st.enc[:0], st.mac.Sum(st.sum[:0]))
	if !hmac.Equal(st.enc, st.buf[len(text)+1:]) {
		return nil, gojwt.ErrTokenSignatureInvalid
	}
	var err error
	if st.payload, err = segments.AppendDecode(st.payload[:0], st.buf[len(head)+1:len(text)]); err != nil {
		return nil, gojwt.ErrTokenMalformed
	}
	claims, ok := decodePlainClaims(st.payload)
	if !ok {
		claims = new(strictClaims)
		if err := json.Unmarshal(st.payload, claims); err != nil {
			return nil, gojwt.ErrTokenMalformed
		}
	}
	if err := v.judge(claims); err != nil {
		return nil, err
	}
	return claims, nil
}

// macState is an HMAC-SHA256 keyed with the Verifier's secret and the
// buffers of one verification, reused through the pool.
type macState struct {
	mac     hash.Hash
	buf     []byte // the token
	sum     [sha256.Size]byte
	enc     []byte // the MAC, base64url
	payload []byte // the decoded claims
}

// strictClaims are the registered claims, with their times held to RFC
// 7519's NumericDate: a JSON number. The library also takes a string of
// digits ("exp":"1893456000"), which no conforming issuer sends; a token
// carrying one is refused rather than trusted to mean what it seems.
type strictClaims struct {
	gojwt.RegisteredClaims
}

var errDateNotNumber = errors.New("exp, nbf and iat must be JSON numbers")

// UnmarshalJSON reads the claims in one pass: RegisteredClaims' fields
// under their own names (matched as encoding/json matches them), the
// times kept raw to see that they are numbers, then read as the library
// reads them. JSON null leaves a time unset, as it does a *NumericDate.
func (c *strictClaims) UnmarshalJSON(b []byte) error {
	var raw struct {
		Issuer        string             `json:"iss"`
		Subject       string             `json:"sub"`
		Audience      gojwt.ClaimStrings `json:"aud"`
		Exp, Nbf, Iat json.RawMessage
		ID            string `json:"jti"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	c.Issuer, c.Subject, c.Audience, c.ID = raw.Issuer, raw.Subject, raw.Audience, raw.ID
	for _, t := range []struct {
		raw json.RawMessage
		to  **gojwt.NumericDate
	}{{raw.Exp, &c.ExpiresAt}, {raw.Nbf, &c.NotBefore}, {raw.Iat, &c.IssuedAt}} {
		*t.to = nil
		switch {
		case len(t.raw) == 0 || string(t.raw) == "null":
			continue
		case t.raw[0] == '"':
			return errDateNotNumber
		}
		d := new(gojwt.NumericDate)
		if err := d.UnmarshalJSON(t.raw); err != nil {
			return err
		}
		*t.to = d
	}
	return nil
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

// DeriveKey derives from an HS256 secret the key of another purpose: the
// nodes of a deployment share the secret already, and since the derived
// key is not the secret, nothing it signs can ever pass as a token's
// signature.
func DeriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
