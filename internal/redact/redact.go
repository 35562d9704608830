// Package redact hides the secrets in what seckill prints about its
// backends: banners, reports and errors name a URL without its password.
package redact

import "net/url"

// URL is raw with its password hidden; a URL that does not parse is not
// printed at all.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(malformed URL)"
	}
	return u.Redacted()
}

// URLOr is URL(raw), or ifEmpty where raw is empty (a backend left to its
// default, such as the embedded one).
func URLOr(raw, ifEmpty string) string {
	if raw == "" {
		return ifEmpty
	}
	return URL(raw)
}
