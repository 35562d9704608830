package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// TestSenderPostsSignedJSON: the receiver gets every field, and a
// signature that verifies; a non-2xx answer is a StatusError.
func TestSenderPostsSignedJSON(t *testing.T) {
	var (
		gotBody []byte
		gotSig  string
		status  = http.StatusNoContent
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		gotBody, gotSig = buf.Bytes(), r.Header.Get(webhooksig.Header)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	s, err := NewSender(srv.URL, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 9, 0, 0, 123e6, time.UTC)
	e := seckill.OrderEvent{ID: "tea.X.paid", Type: seckill.EventOrderPaid, OrderID: "o-tea.X", ReservationID: "tea.X",
		SaleID: "tea", UserID: "alice", Qty: 2, AmountCents: 1980, Currency: "EUR", At: at}
	if err := s.Deliver(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := webhooksig.Verify(gotSig, gotBody, time.Now(), time.Minute, secret); err != nil {
		t.Errorf("the receiver's signature does not verify: %v", err)
	}
	var b map[string]any
	if err := json.Unmarshal(gotBody, &b); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "tea.X.paid", "type": "order.paid", "order_id": "o-tea.X", "reservation_id": "tea.X",
		"sale_id": "tea", "user_id": "alice", "qty": 2.0, "amount_cents": 1980.0, "currency": "EUR", "at": "2026-12-06T09:00:00.123Z"}
	for k, v := range want {
		if b[k] != v {
			t.Errorf("%s = %v, want %v", k, b[k], v)
		}
	}
	if len(b) != len(want) {
		t.Errorf("body has %d fields, want %d: %s", len(b), len(want), gotBody)
	}
	status = http.StatusInternalServerError
	var se *StatusError
	if err := s.Deliver(t.Context(), e); !errors.As(err, &se) || se.Code != 500 {
		t.Errorf("Deliver to a 500 = %v, want StatusError 500", err)
	}
	status = http.StatusFound
	if err := s.Deliver(t.Context(), e); !errors.As(err, &se) || se.Code != 302 {
		t.Errorf("Deliver to a redirect = %v, want StatusError 302 (not followed)", err)
	}
}

func TestNewSenderRefusesShortSecretsAndOddURLs(t *testing.T) {
	if _, err := NewSender("https://shop.example/hook", []byte("short"), nil); err == nil {
		t.Error("a 5-byte secret was accepted")
	}
	if _, err := NewSender("ftp://shop.example/hook", secret, nil); err == nil {
		t.Error("an ftp url was accepted")
	}
}

func TestDeliveredStatusIsAny2xx(t *testing.T) {
	for code, want := range map[int]bool{199: false, 200: true, 202: true, 204: true, 299: true, 301: false, 404: false, 500: false} {
		if got := DeliveredStatus(code); got != want {
			t.Errorf("DeliveredStatus(%d) = %v, want %v", code, got, want)
		}
	}
}
