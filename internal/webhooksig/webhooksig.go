// Package webhooksig signs and verifies webhook bodies with Stripe's
// scheme: a header "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." +
// body)>". A header may carry several v1 values (one per secret while a
// secret is being rotated); any one that matches a secret is enough. The
// timestamp bounds replays: a header further than the tolerance from now
// is refused, whatever it signs.
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header is the name of the signature header.
const Header = "Seckill-Signature"

// DefaultTolerance is how far a signature's timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// MinSecretBytes is the shortest secret the engine accepts.
const MinSecretBytes = 32

// maxSignatures bounds the v1 values of one header checked, so a hostile
// header of thousands of them costs no more than a few HMACs.
const maxSignatures = 8

// Why a header was refused. They say nothing a caller may not learn.
var (
	ErrNoHeader  = errors.New("no signature header")
	ErrMalformed = errors.New("signature header is malformed")
	ErrExpired   = errors.New("signature timestamp is outside the tolerance")
	ErrMismatch  = errors.New("no signature matches")
)

// Sign returns a header value signing body at t, with one v1 value per
// secret (several while a secret is rotated).
func Sign(body []byte, t time.Time, secrets ...[]byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(ts)
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

// mac is HMAC-SHA256(secret, ts + "." + body).
func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks header against body: its timestamp within tolerance of
// now (either way), and one of its v1 values the HMAC of body under one of
// secrets. Other schemes (v0 and the like) are ignored, as Stripe does.
func Verify(header string, body []byte, now time.Time, tolerance time.Duration, secrets ...[]byte) error {
	if header == "" {
		return ErrNoHeader
	}
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrMalformed
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				continue // not one of ours; another may match
			}
			if len(sigs) < maxSignatures {
				sigs = append(sigs, sig)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts == "" || ts[0] == '+' || ts[0] == '-' {
		return ErrMalformed
	}
	if len(sigs) == 0 {
		return ErrMismatch
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrExpired
	}
	for _, s := range secrets {
		want := mac(s, ts, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return ErrMismatch
}
