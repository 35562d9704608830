package jwt

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/seckill-dev/seckill/internal/startstop"
)

// Defaults of a KeySet.
const (
	// DefaultUnknownKeyInterval is the least time between two fetches
	// prompted by a token naming a key the set does not hold: a flood of
	// made-up kids costs the identity provider one request per interval.
	DefaultUnknownKeyInterval = 10 * time.Second
	// DefaultRefreshInterval is how often Start's loop fetches the set anyway, to
	// learn of keys the provider withdrew.
	DefaultRefreshInterval = 15 * time.Minute
	// DefaultFetchTimeout bounds one fetch of the JWKS.
	DefaultFetchTimeout = 5 * time.Second
	// maxJWKSBytes bounds the document read: providers publish a handful
	// of keys, a few KiB.
	maxJWKSBytes = 1 << 20
	// maxKidBytes bounds the kid looked up: longer ones are refused
	// without a fetch.
	maxKidBytes = 256
	// minRSABits is the smallest RSA modulus accepted (NIST SP 800-131A).
	minRSABits = 2048
)

// Asymmetric algorithms a KeySet serves keys for: each names exactly one
// key type (see algOf), so a key is never used with another algorithm.
const (
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// KeySetConfig configures a KeySet.
type KeySetConfig struct {
	URL string // the provider's JWKS, e.g. https://idp.example/.well-known/jwks.json
	// Client fetches the set; nil uses one with FetchTimeout.
	Client *http.Client
	// FetchTimeout bounds one fetch; 0 is DefaultFetchTimeout.
	FetchTimeout time.Duration
	// UnknownKeyInterval: see DefaultUnknownKeyInterval; 0 is the default.
	UnknownKeyInterval time.Duration
	// RefreshInterval is how often Start's loop fetches the set; 0 is
	// DefaultRefreshInterval.
	RefreshInterval time.Duration
	Logger          *slog.Logger // nil: discard
	Now             func() time.Time
}

// KeySet holds the public keys of the shop's identity provider, read from
// its JWKS and chosen by kid. Lookups read an immutable map behind an
// atomic pointer. The set is fetched again when a token names an unknown
// kid (at most once per UnknownKeyInterval) and every RefreshInterval
// once started; a
// fetch that fails, or yields no usable key, keeps the keys held.
type KeySet struct {
	cfg    KeySetConfig
	worker startstop.Worker
	keys   atomic.Pointer[map[string]publicKey]
	gen    atomic.Uint64 // bumped each time a fetch drops a kid
	fetchN atomic.Int64  // fetches attempted

	mu       sync.Mutex
	lastTry  time.Time     // the last fetch prompted by an unknown kid
	inflight chan struct{} // closed when the fetch under way ends
	removed  []func()      // called after a fetch dropped a kid
}

// publicKey is a key of the set and the one algorithm it verifies.
type publicKey struct {
	alg string
	key any
}

// NewKeySet returns an empty KeySet for cfg.URL: call Refresh (or Run) to
// fill it. Lookups of an empty set fetch it, rate-limited.
func NewKeySet(cfg KeySetConfig) (*KeySet, error) {
	if cfg.URL == "" {
		return nil, errors.New("jwks: empty URL")
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.FetchTimeout}
	}
	if cfg.UnknownKeyInterval <= 0 {
		cfg.UnknownKeyInterval = DefaultUnknownKeyInterval
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &KeySet{cfg: cfg}
	s.keys.Store(&map[string]publicKey{})
	return s, nil
}

// Len is the number of usable keys held.
func (s *KeySet) Len() int { return len(*s.keys.Load()) }

// Fetches is the number of fetches attempted so far.
func (s *KeySet) Fetches() int64 { return s.fetchN.Load() }

// onRemoved registers f to run after a fetch dropped a kid: tokens it
// signed must not be answered from a cache any more.
func (s *KeySet) onRemoved(f func()) {
	s.mu.Lock()
	s.removed = append(s.removed, f)
	s.mu.Unlock()
}

// Refresh fetches the set now. On failure the keys held are kept.
func (s *KeySet) Refresh(ctx context.Context) error {
	return s.refresh(ctx, false)
}

// Start fetches the set every RefreshInterval (at once if it holds no
// key yet), on a goroutine of its own, until Stop or ctx ends. Failures
// are logged; the keys held stay.
func (s *KeySet) Start(ctx context.Context) {
	s.worker.Start(ctx, func(ctx context.Context) {
		wait := s.cfg.RefreshInterval
		if s.Len() == 0 {
			wait = 0
		}
		for startstop.Sleep(ctx, wait) == nil {
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("JWKS fetch failed; keeping the keys held", "url", s.cfg.URL, "keys", s.Len(), "err", err)
			}
			wait = s.cfg.RefreshInterval
		}
	})
}

// Stop ends the refresh loop Start began.
func (s *KeySet) Stop(ctx context.Context) error { return s.worker.StopNamed(ctx, "jwks") }

var (
	errUnknownKey = errors.New("jwks: no key with this kid")
	errKeyAlg     = errors.New("jwks: the key named by kid is not for this algorithm")
)

// key returns the key kid names for alg. An unknown kid prompts a fetch
// unless one was tried in the last UnknownKeyInterval; a fetch under way
// is waited for instead of started again.
func (s *KeySet) key(kid, alg string) (any, error) {
	if kid == "" || len(kid) > maxKidBytes {
		return nil, errUnknownKey
	}
	k, ok := (*s.keys.Load())[kid]
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FetchTimeout)
		err := s.refresh(ctx, true)
		cancel()
		if k, ok = (*s.keys.Load())[kid]; !ok {
			if err != nil && !errors.Is(err, errRateLimited) {
				s.cfg.Logger.Warn("JWKS fetch for an unknown kid failed; keeping the keys held", "url", s.cfg.URL, "err", err)
			}
			return nil, errUnknownKey
		}
	}
	if k.alg != alg {
		return nil, errKeyAlg
	}
	return k.key, nil
}

var errRateLimited = errors.New("jwks: fetched too recently")

// refresh fetches the set, or waits for the fetch under way. limited
// refuses a fetch within UnknownKeyInterval of the last limited one.
func (s *KeySet) refresh(ctx context.Context, limited bool) error {
	s.mu.Lock()
	if ch := s.inflight; ch != nil {
		s.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := s.cfg.Now()
	if limited {
		if !s.lastTry.IsZero() && now.Sub(s.lastTry) < s.cfg.UnknownKeyInterval {
			s.mu.Unlock()
			return errRateLimited
		}
		s.lastTry = now
	}
	ch := make(chan struct{})
	s.inflight = ch
	s.mu.Unlock()

	err := s.fetch(ctx)

	s.mu.Lock()
	s.inflight = nil
	s.mu.Unlock()
	close(ch)
	return err
}

// fetch reads the set and installs its usable keys, unless it has none.
func (s *KeySet) fetch(ctx context.Context) error {
	s.fetchN.Add(1)
	keys, err := s.download(ctx)
	if err != nil {
		return err
	}
	old := *s.keys.Load()
	s.keys.Store(&keys)
	dropped := false
	for kid := range old {
		if _, ok := keys[kid]; !ok {
			dropped = true
			s.cfg.Logger.Info("JWKS key withdrawn: tokens it signed are refused from now on", "kid", kid)
		}
	}
	if dropped {
		s.gen.Add(1)
		s.mu.Lock()
		hooks := s.removed
		s.mu.Unlock()
		for _, f := range hooks {
			f()
		}
	}
	return nil
}

func (s *KeySet) download(ctx context.Context) (map[string]publicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks: %s answered %s", s.cfg.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("jwks: document over %d bytes", maxJWKSBytes)
	}
	keys, skipped, err := parseJWKS(body)
	for _, why := range skipped {
		s.cfg.Logger.Debug("JWKS key skipped", "reason", why)
	}
	return keys, err
}

// parseJWKS reads the usable keys of a JWKS document. Each key is parsed
// by go-jose on its own, so one key of a type this server does not use
// (or malformed) costs only that key. Usable: a kid, not marked for
// encryption, a public key of one of the types algOf knows, and an alg
// that is the key type's own if the JWK names one. A set with no usable
// key is an error: the keys held are kept rather than replaced by none.
func parseJWKS(doc []byte) (keys map[string]publicKey, skipped []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, nil, fmt.Errorf("jwks: %w", err)
	}
	keys = make(map[string]publicKey, len(set.Keys))
	for _, raw := range set.Keys {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(raw); err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		alg, why := algOf(&jwk)
		if why != "" {
			skipped = append(skipped, fmt.Sprintf("kid %q: %s", jwk.KeyID, why))
			continue
		}
		if _, dup := keys[jwk.KeyID]; dup {
			// Two keys under one kid: which one a token means is unclear,
			// so neither is used.
			delete(keys, jwk.KeyID)
			skipped = append(skipped, fmt.Sprintf("kid %q: named twice", jwk.KeyID))
			continue
		}
		keys[jwk.KeyID] = publicKey{alg: alg, key: jwk.Public().Key}
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("jwks: no usable key (RS256, ES256 or EdDSA with a kid) among %d", len(set.Keys))
	}
	return keys, skipped, nil
}

// algOf is the one algorithm jwk's key verifies, or why it is not used.
// Symmetric keys ("oct") are never used: an HS256 token is checked only
// with the configured shared secret.
func algOf(jwk *jose.JSONWebKey) (alg, why string) {
	if jwk.KeyID == "" {
		return "", "no kid"
	}
	if len(jwk.KeyID) > maxKidBytes {
		return "", "kid too long"
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return "", "use is " + jwk.Use
	}
	switch k := jwk.Public().Key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return "", fmt.Sprintf("RSA key of %d bits", k.N.BitLen())
		}
		alg = algRS256
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", "EC key not on P-256"
		}
		alg = algES256
	case ed25519.PublicKey:
		alg = algEdDSA
	default:
		return "", fmt.Sprintf("key type %T is not used", jwk.Key)
	}
	if jwk.Algorithm != "" && jwk.Algorithm != alg {
		return "", "alg " + jwk.Algorithm + " is not " + alg
	}
	return alg, ""
}
