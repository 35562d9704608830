package webhooksig_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/seckill-dev/seckill/internal/webhooksig"
)

var (
	body   = []byte(`{"id":"evt_1","type":"payment.succeeded","reservation_id":"s1.01ARZ3NDEKTSV4RRFFQ69G5FAV","amount_cents":1200,"currency":"EUR"}`)
	secret = []byte("whsec_0123456789abcdef0123456789abcdef")
	other  = []byte("whsec_fedcba9876543210fedcba9876543210")
)

// Stripe's own library signs; we verify. And we sign; Stripe's verifies.
// The two agree on the scheme, so a shop may sign with stripe-go (or any
// library of Stripe's scheme) and seckill's own deliveries verify there.
func TestCompatibleWithStripe(t *testing.T) {
	now := time.Now()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{
		Payload: body, Secret: string(secret), Timestamp: now,
	})
	if err := webhooksig.Verify(signed.Header, body, now, webhooksig.DefaultTolerance, secret); err != nil {
		t.Fatalf("Verify(stripe's header %q) = %v", signed.Header, err)
	}
	if err := webhooksig.Verify(signed.Header, body, now, webhooksig.DefaultTolerance, other); !errors.Is(err, webhooksig.ErrMismatch) {
		t.Fatalf("Verify(stripe's header, other secret) = %v, want ErrMismatch", err)
	}
	// Stripe's ComputeSignature is the v1 value we compute.
	ours := webhooksig.Sign(body, now, secret)
	want := "t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=" + hexOf(webhook.ComputeSignature(now, body, string(secret)))
	if ours != want {
		t.Fatalf("Sign = %q, stripe computes %q", ours, want)
	}
	if err := webhook.ValidatePayloadWithTolerance(body, ours, string(secret), webhooksig.DefaultTolerance); err != nil {
		t.Fatalf("stripe's ValidatePayload(our header) = %v", err)
	}
	// Rotation: a header with the old and the new secret's values
	// verifies under either, in both libraries.
	both := webhooksig.Sign(body, now, other, secret)
	for _, s := range [][]byte{secret, other} {
		if err := webhooksig.Verify(both, body, now, webhooksig.DefaultTolerance, s); err != nil {
			t.Fatalf("Verify(two v1, secret %q) = %v", s, err)
		}
		if err := webhook.ValidatePayloadWithTolerance(body, both, string(s), webhooksig.DefaultTolerance); err != nil {
			t.Fatalf("stripe's ValidatePayload(two v1, secret %q) = %v", s, err)
		}
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&15])
	}
	return s.String()
}

func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good := webhooksig.Sign(body, now, secret)
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] = 'U' // "EUR" → "EUU"
	cases := []struct {
		name   string
		header string
		body   []byte
		at     time.Time
		want   error
	}{
		{"good", good, body, now, nil},
		{"good, 4m59s later", good, body, now.Add(4*time.Minute + 59*time.Second), nil},
		{"good, clock 4m59s behind", good, body, now.Add(-4*time.Minute - 59*time.Second), nil},
		{"replayed 5m01s later", good, body, now.Add(5*time.Minute + time.Second), webhooksig.ErrExpired},
		{"from 5m01s in the future", good, body, now.Add(-5*time.Minute - time.Second), webhooksig.ErrExpired},
		{"tampered body", good, tampered, now, webhooksig.ErrMismatch},
		{"other secret", webhooksig.Sign(body, now, other), body, now, webhooksig.ErrMismatch},
		{"timestamp changed", strings.Replace(good, "t=1800000000", "t=1800000001", 1), body, now, webhooksig.ErrMismatch},
		{"no header", "", body, now, webhooksig.ErrNoHeader},
		{"no t", good[strings.Index(good, "v1="):], body, now, webhooksig.ErrMalformed},
		{"two t", "t=1800000000," + good, body, now, webhooksig.ErrMalformed},
		{"no v1", "t=1800000000", body, now, webhooksig.ErrMismatch},
		{"v0 only", strings.Replace(good, "v1=", "v0=", 1), body, now, webhooksig.ErrMismatch},
		{"junk part", good + ",junk", body, now, webhooksig.ErrMalformed},
		{"negative t", "t=-5,v1=00", body, now, webhooksig.ErrMalformed},
		{"bad v1 then good v1", "t=1800000000,v1=zz,v1=" + good[strings.Index(good, "v1=")+3:], body, now, nil},
		{"spaces", strings.ReplaceAll(good, ",", ", "), body, now, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := webhooksig.Verify(c.header, c.body, c.at, webhooksig.DefaultTolerance, secret)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

// A header stuffed with v1 values checks only the first few: the ninth,
// even if right, is not looked at.
func TestVerifyBoundsTheWork(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good := webhooksig.Sign(body, now, secret)
	junk := strings.Repeat(",v1="+strings.Repeat("00", 32), 8)
	h := "t=1800000000" + junk + good[strings.Index(good, ","):]
	if err := webhooksig.Verify(h, body, now, webhooksig.DefaultTolerance, secret); !errors.Is(err, webhooksig.ErrMismatch) {
		t.Fatalf("Verify(8 junk v1 then the good one) = %v, want ErrMismatch", err)
	}
	h = "t=1800000000" + junk[:len(junk)/8*7] + good[strings.Index(good, ","):]
	if err := webhooksig.Verify(h, body, now, webhooksig.DefaultTolerance, secret); err != nil {
		t.Fatalf("Verify(7 junk v1 then the good one) = %v", err)
	}
}
