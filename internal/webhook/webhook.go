// Package webhook owns order events over HTTP: the JSON a shop receives
// and the sender that POSTs one event to the shop's URL, signed by
// internal/webhooksig (Stripe's scheme).
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

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
	if len(secret) < webhooksig.MinSecretBytes {
		return nil, fmt.Errorf("order webhook secret: %d bytes, want at least %d", len(secret), webhooksig.MinSecretBytes)
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
	req.Header.Set(webhooksig.Header, webhooksig.Sign(body, now(), s.Secret))
	resp, err := s.Client.Do(req)
	if err != nil {
		return err
	}
	// Drained (a little) so the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if !DeliveredStatus(resp.StatusCode) {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

// DeliveredStatus reports whether an HTTP status means the receiver took
// the event: any 2xx. Anything else, redirects included, is tried again.
func DeliveredStatus(code int) bool { return code >= 200 && code <= 299 }
