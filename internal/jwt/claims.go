package jwt

import (
	"strconv"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"
)

// decodePlainClaims reads the claims the way issuers write them, without
// encoding/json: an object with no white space whose members are among
// sub, iss and jti with a string of printable ASCII (no escape) and exp,
// iat and nbf with an integer of at most 15 digits, each member once.
// Those claims decode to exactly what json.Unmarshal into strictClaims
// gives (FuzzPlainClaims holds the two to it); for anything else ok is
// false and the caller decodes with encoding/json, which took three
// quarters of a token's first verification (BenchmarkVerifyFirstSight).
//
// Members named otherwise (another case: encoding/json matches names
// case-insensitively), repeated (encoding/json keeps the last), escaped,
// null or of another type all go the long way.
func decodePlainClaims(b []byte) (c *strictClaims, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, false
	}
	c = new(strictClaims)
	var seen uint8
	r := b[1 : len(b)-1]
	for len(r) > 0 {
		name, rest, ok := plainString(r)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return nil, false
		}
		r = rest[1:]
		var (
			bit  uint8
			text *string             // a string claim's field
			date **gojwt.NumericDate // a time claim's
		)
		switch string(name) {
		case "sub":
			bit, text = 1, &c.Subject
		case "iss":
			bit, text = 2, &c.Issuer
		case "jti":
			bit, text = 4, &c.ID
		case "exp":
			bit, date = 8, &c.ExpiresAt
		case "iat":
			bit, date = 16, &c.IssuedAt
		case "nbf":
			bit, date = 32, &c.NotBefore
		default:
			return nil, false
		}
		if text != nil {
			v, rest, ok := plainString(r)
			if !ok {
				return nil, false
			}
			*text, r = string(v), rest
		} else {
			n := 0
			for n < len(r) && n < 16 && '0' <= r[n] && r[n] <= '9' {
				n++
			}
			// No leading zero (not JSON) and at most 15 digits, which a
			// float64 holds exactly, as the library reads the number.
			if n == 0 || n > 15 || (r[0] == '0' && n > 1) {
				return nil, false
			}
			secs, err := strconv.ParseInt(string(r[:n]), 10, 64)
			if err != nil {
				return nil, false
			}
			*date, r = gojwt.NewNumericDate(time.Unix(secs, 0)), r[n:]
		}
		if seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if len(r) > 0 {
			if r[0] != ',' || len(r) == 1 {
				return nil, false
			}
			r = r[1:]
		}
	}
	return c, true
}

// plainString reads the JSON string at the start of b when it holds only
// printable ASCII other than the quote and the backslash: then its text is
// its value.
func plainString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
}
