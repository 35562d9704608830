package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// TestSignMatchesStripeScheme: the value is t=<unix>,v1=<hex HMAC-SHA256
// of "<t>." + body>, checked against a vector computed independently
// (printf '%s' '1700000000.{"a":1}' | openssl dgst -sha256 -hmac "$secret").
func TestSignMatchesStripeScheme(t *testing.T) {
	got := Sign(secret, time.Unix(1700000000, 0), []byte(`{"a":1}`))
	want := "t=1700000000,v1=f05f2539e3ae1c49aec5f8cfdad75ef6b06480b133973ffbb7ec9e18827af177"
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
	if err := Verify(got, []byte(`{"a":1}`), [][]byte{secret}, time.Unix(1700000000, 0), 5*time.Minute); err != nil {
		t.Errorf("Verify(Sign) = %v", err)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"id":"x"}`)
	now := time.Unix(1700000000, 0)
	good := Sign(secret, now, body)
	other := []byte("another secret of at least 32 bytes!!")
	for _, c := range []struct {
		name    string
		header  string
		body    []byte
		secrets [][]byte
		now     time.Time
		want    error
	}{
		{"good", good, body, [][]byte{secret}, now, nil},
		{"rotated: the second secret", good, body, [][]byte{other, secret}, now, nil},
		{"several v1, one good", Sign(other, now, body) + "," + good[strings.Index(good, "v1="):], body, [][]byte{secret}, now, nil},
		{"tampered body", good, []byte(`{"id":"y"}`), [][]byte{secret}, now, ErrBadSignature},
		{"wrong secret", good, body, [][]byte{other}, now, ErrBadSignature},
		{"stale", good, body, [][]byte{secret}, now.Add(6 * time.Minute), ErrStale},
		{"from the future", good, body, [][]byte{secret}, now.Add(-6 * time.Minute), ErrStale},
		{"no v1", "t=1700000000", body, [][]byte{secret}, now, ErrNoSignature},
		{"empty", "", body, [][]byte{secret}, now, ErrNoSignature},
		{"garbage", "t=abc,v1=zz", body, [][]byte{secret}, now, ErrNoSignature},
	} {
		if err := Verify(c.header, c.body, c.secrets, c.now, 5*time.Minute); !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}

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
		gotBody, gotSig = buf.Bytes(), r.Header.Get(SignatureHeader)
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
	if err := Verify(gotSig, gotBody, [][]byte{secret}, time.Now(), time.Minute); err != nil {
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
