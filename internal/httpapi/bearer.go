package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// staticToken is one fixed bearer token that some routes admit: the
// admin's, the shop server's service token, the metrics scraper's. It is
// kept as its SHA-256 digest, and a request's token is compared digest to
// digest, which keeps the comparison constant-time in the token's length
// too. The zero staticToken admits nobody.
type staticToken struct {
	hash [sha256.Size]byte
	set  bool
}

func newStaticToken(token string) staticToken {
	if token == "" {
		return staticToken{}
	}
	return staticToken{hash: sha256.Sum256([]byte(token)), set: true}
}

// carriedBy reports whether r's bearer token is this one. A buyer JWT
// never matches by accident: it is compared as an opaque string.
func (t staticToken) carriedBy(r *http.Request) bool {
	tok, ok := bearerToken(r)
	if !ok || !t.set {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], t.hash[:]) == 1
}
