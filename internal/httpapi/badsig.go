package httpapi

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// DefaultBadSignatureLimit is the tokens with a wrong signature one client
// address may send before its new tokens wait (cmd/seckill's default).
var DefaultBadSignatureLimit = seckill.RateLimit{Rate: 10, Period: time.Minute}

// errBadSignatures answers a token not seen before from an address that
// has sent too many tokens with a wrong signature.
var errBadSignatures = seckill.Errorf(seckill.ERATELIMITED,
	"Too many invalid tokens from this address; retry after the time in Retry-After.")

// sigGate bounds what forged tokens cost. Every route that takes a buyer
// token verifies it before anything else, and a token seen before is a
// cache lookup, but a new one costs a signature check: about 1 µs for
// HS256, 70-170 µs for an identity provider's RS256, ES256 or EdDSA key,
// against some 20 µs for a whole sold-out answer. A client can make up
// tokens with a known kid and a wrong signature at will, each one paying
// that check, and no rate limit sees them: the limits count verified
// buyers and, in the stock store, requests that got past the token.
//
// So each address (an IPv6 /64) may send limit's burst of tokens whose signature
// was checked and failed (seckill.ErrBadSignature); past that, until its
// budget refills, a token from it that this node has not verified before
// is refused 429 without a check. Tokens verified before still pass, so
// buyers behind the same address who signed in earlier are not locked
// out. Honest clients do not send wrong signatures: expired tokens, a
// wrong issuer or audience and a withdrawn key are refused before any
// signature check and are not counted. The state is this node's memory:
// an attacker spread over N nodes gets N budgets, which bounds the cost
// all the same.
type sigGate struct {
	trusted []netip.Prefix
	bad     *memLimits // per address: its tokens with a wrong signature
	refused prometheus.Counter
	counted prometheus.Counter
}

// newSigGate returns a gate for limit, or nil when limit is zero (off).
func newSigGate(limit seckill.RateLimit, trusted []netip.Prefix, reg prometheus.Registerer) (*sigGate, error) {
	bad, err := newMemLimits(limit)
	if bad == nil || err != nil {
		return nil, err
	}
	g := &sigGate{trusted: trusted, bad: bad}
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_bad_signature_tokens_total",
		Help: "Buyer tokens whose signature was checked and was wrong (counted), and new tokens refused unchecked " +
			"because their address had sent too many such (refused).",
	}, []string{"outcome"})
	if err := reg.Register(v); err != nil {
		return nil, err
	}
	g.counted, g.refused = v.WithLabelValues("counted"), v.WithLabelValues("refused")
	return g, nil
}

// refusing reports whether r's address may not have another token checked
// at now, and for how long. The caller counts a refusal (refuse).
func (g *sigGate) refusing(r *http.Request, now time.Time) (time.Duration, bool) {
	if g.bad.refused.past(now) {
		return 0, false // nobody is refused: no address to read
	}
	key, ok := g.key(r)
	if !ok {
		return 0, false
	}
	return g.bad.refusing(key, now)
}

// refuse is the error answering a token refused unchecked for retry.
func (g *sigGate) refuse(retry time.Duration) error {
	g.refused.Inc()
	return &retryError{err: errBadSignatures, after: retry}
}

// failed counts a token from r's address whose signature was wrong.
func (g *sigGate) failed(r *http.Request, now time.Time) {
	g.counted.Inc()
	if key, ok := g.key(r); ok {
		g.bad.take(key, now) // refused already: nothing more to count
	}
}

// key is r's address as the gate counts it; ok is false for a peer with
// none (a Unix socket).
func (g *sigGate) key(r *http.Request) (string, bool) {
	addr, ok := clientAddr(r.RemoteAddr, r.Header["X-Forwarded-For"], g.trusted)
	if !ok {
		return "", false
	}
	return ipRateKey(addr), true
}

// knownTokens is a TokenVerifier that can answer a token it verified
// before from memory alone (jwt.Verifier's Known).
type knownTokens interface {
	Known(token string, now time.Time) (userID string, ok bool)
}
