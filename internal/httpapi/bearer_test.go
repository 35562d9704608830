package httpapi

import (
	"net/http/httptest"
	"testing"
)

// TestStaticToken: a static token admits a request carrying exactly it,
// and nothing else; the zero token admits nobody, not even an empty one.
func TestStaticToken(t *testing.T) {
	const tok = "metrics-token-0123456789abcdefghij"
	for _, c := range []struct {
		name, token, header string
		want                bool
	}{
		{"the token", tok, "Bearer " + tok, true},
		{"another", tok, "Bearer " + tok + "x", false},
		{"a prefix", tok, "Bearer " + tok[:10], false},
		{"not bearer", tok, "Basic " + tok, false},
		{"no header", tok, "", false},
		{"unset, no header", "", "", false},
		{"unset, an empty bearer", "", "Bearer ", false},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		if got := newStaticToken(c.token).carriedBy(r); got != c.want {
			t.Errorf("%s: carriedBy = %v, want %v", c.name, got, c.want)
		}
	}
}
