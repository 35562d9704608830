// Package webhook owns order events over HTTP: the JSON a shop receives,
// its signature (Stripe's scheme: a Seckill-Signature header of
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>"), and
// the sender that POSTs one event to the shop's URL.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// SignatureHeader carries the signature of a webhook's body.
const SignatureHeader = "Seckill-Signature"

// MinSecretBytes is the shortest secret accepted for signing.
const MinSecretBytes = 32

// Sign returns the Seckill-Signature value of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no valid t= and v1= in the signature header")
	ErrBadSignature = errors.New("no v1 signature matches")
	ErrStale        = errors.New("signature timestamp too far from now")
)

// Verify checks a Seckill-Signature value against body: its t within
// tolerance of now, and one of its v1 values (there may be several, while
// a secret is rotated) the HMAC of any of secrets.
func Verify(header string, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == "t" && ts == "":
			ts = v
		case k == "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	for _, secret := range secrets {
		want := mac(secret, ts, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return nil
			}
		}
	}
	return ErrBadSignature
}

// Body is the JSON of an event as the shop receives it.
type Body struct {
	ID            string `json:"id"`
	Type          string `json:"type"`
	OrderID       string `json:"order_id"`
	ReservationID string `json:"reservation_id"`
	SaleID        string `json:"sale_id"`
	UserID        string `json:"user_id"`
	Qty           int64  `json:"qty"`
	AmountCents   int64  `json:"amount_cents"`
	Currency      string `json:"currency"`
	At            string `json:"at"` // RFC 3339, UTC, milliseconds
}

// Encode is the body of e.
func Encode(e seckill.OrderEvent) ([]byte, error) {
	return json.Marshal(Body{
		ID: e.ID, Type: string(e.Type), OrderID: e.OrderID, ReservationID: e.ReservationID,
		SaleID: e.SaleID, UserID: e.UserID, Qty: e.Qty, AmountCents: e.AmountCents, Currency: e.Currency,
		At: e.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
	})
}

// Sender POSTs events to one URL, signed.
type Sender struct {
	URL    string
	Secret []byte
	Client *http.Client
	// Now stamps the signature; time.Now when nil.
	Now func() time.Time
}

// NewSender checks url and secret and returns their sender.
func NewSender(url string, secret []byte, client *http.Client) (*Sender, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("order webhook url %q: want http:// or https://", url)
	}
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("order webhook secret: %d bytes, want at least %d", len(secret), MinSecretBytes)
	}
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &Sender{URL: url, Secret: secret, Client: client}, nil
}

// StatusError is a receiver's answer that is not 2xx.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("receiver answered %d", e.Code) }

// Deliver POSTs e and returns nil when the receiver answered 2xx.
func (s *Sender) Deliver(ctx context.Context, e seckill.OrderEvent) error {
	body, err := Encode(e)
	if err != nil {
		return err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "seckill-webhook/1")
	req.Header.Set(SignatureHeader, Sign(s.Secret, now(), body))
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	// Drained (a little) so the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if !seckill.DeliveredStatus(resp.StatusCode) {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}
