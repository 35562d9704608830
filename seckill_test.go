package seckill_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestReservationIDRoundTrip(t *testing.T) {
	now := time.Date(2026, 8, 20, 9, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for _, sale := range []string{"a", "tea-2026_08", strings.Repeat("x", 64)} {
		for range 100 {
			id := seckill.NewReservationID(sale, now)
			if seen[id] {
				t.Fatalf("duplicate reservation id %s", id)
			}
			seen[id] = true
			got, ok := seckill.SaleIDOfReservation(id)
			if !ok || got != sale {
				t.Fatalf("SaleIDOfReservation(%q) = %q, %v; want %q", id, got, ok, sale)
			}
			if !seckill.IsReservationOf(id, sale) || seckill.IsReservationOf(id, sale+"x") || seckill.IsReservationOf(id, sale[1:]) {
				t.Fatalf("IsReservationOf(%q) does not tell sale %q from its neighbours", id, sale)
			}
		}
	}
	// Later ids sort after earlier ones.
	a := seckill.NewReservationID("s", now)
	b := seckill.NewReservationID("s", now.Add(time.Millisecond))
	if !(a < b) {
		t.Fatalf("ids do not sort by time: %s !< %s", a, b)
	}
}

func TestSaleIDOfReservationRejects(t *testing.T) {
	for _, id := range []string{
		"", ".", "s.", ".0123456789ABCDEFGHJKMNPQRS", "s.0123456789ABCDEFGHJKMNPQR",
		"s.0123456789ABCDEFGHJKMNPQRSS", "s.0123456789abcdefghjkmnpqrs", "s{x}.0123456789ABCDEFGHJKMNPQRS",
		"s/x.0123456789ABCDEFGHJKMNPQRS", "s.0123456789ABCDEFGHJKMNPQR\x00",
	} {
		if sale, ok := seckill.SaleIDOfReservation(id); ok {
			t.Errorf("SaleIDOfReservation(%q) accepted, sale %q", id, sale)
		}
		if len(id) != 28 && seckill.IsReservationOf(id, "s") {
			t.Errorf("IsReservationOf(%q, s) accepted an id of the wrong length", id)
		}
	}
}

// Each byte as an id's last character: accepted exactly when it is one of
// the alphabet's 32.
func TestSaleIDOfReservationAlphabet(t *testing.T) {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	id := []byte(seckill.NewReservationID("s", time.Now()))
	accepted := 0
	for c := range 256 {
		id[len(id)-1] = byte(c)
		_, ok := seckill.SaleIDOfReservation(string(id))
		if want := strings.IndexByte(alphabet, byte(c)) >= 0; ok != want {
			t.Errorf("last byte %#x: accepted %v, want %v", c, ok, want)
		}
		if ok {
			accepted++
		}
	}
	if accepted != len(alphabet) {
		t.Errorf("%d bytes accepted, want %d", accepted, len(alphabet))
	}
}

func BenchmarkSaleIDOfReservation(b *testing.B) {
	id := seckill.NewReservationID("tea-2026_08", time.Now())
	for b.Loop() {
		if _, ok := seckill.SaleIDOfReservation(id); !ok {
			b.Fatal(id)
		}
	}
}

func TestSaleValidate(t *testing.T) {
	start := time.Date(2026, 8, 20, 9, 0, 0, 0, time.UTC)
	good := func() seckill.Sale {
		return seckill.Sale{ID: "tea", Name: "Tea gift set", PriceCents: 9900, Stock: 200, PurchaseLimit: 1, StartAt: start, EndAt: start.Add(time.Hour)}
	}
	tests := []struct {
		name   string
		mutate func(*seckill.Sale)
		ok     bool
	}{
		{"good", func(*seckill.Sale) {}, true},
		{"free", func(s *seckill.Sale) { s.PriceCents = 0 }, true},
		{"id with brace", func(s *seckill.Sale) { s.ID = "a{b}" }, false},
		{"id too long", func(s *seckill.Sale) { s.ID = strings.Repeat("a", 65) }, false},
		{"empty name", func(s *seckill.Sale) { s.Name = "" }, false},
		{"control char in name", func(s *seckill.Sale) { s.Name = "tea\x00" }, false},
		{"invalid utf-8 name", func(s *seckill.Sale) { s.Name = "tea\xff" }, false},
		{"negative price", func(s *seckill.Sale) { s.PriceCents = -1 }, false},
		{"zero stock", func(s *seckill.Sale) { s.Stock = 0 }, false},
		{"huge stock", func(s *seckill.Sale) { s.Stock = 1 << 62 }, false},
		{"zero limit", func(s *seckill.Sale) { s.PurchaseLimit = 0 }, false},
		{"end before start", func(s *seckill.Sale) { s.EndAt = s.StartAt.Add(-time.Second) }, false},
		{"end equals start", func(s *seckill.Sale) { s.EndAt = s.StartAt }, false},
		{"missing start", func(s *seckill.Sale) { s.StartAt = time.Time{} }, false},
		{"two years", func(s *seckill.Sale) { s.EndAt = s.StartAt.Add(2 * 365 * 24 * time.Hour) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			tt.mutate(&s)
			err := s.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && seckill.ErrorCode(err) != seckill.EINVALID {
				t.Fatalf("code %q, want %q", seckill.ErrorCode(err), seckill.EINVALID)
			}
		})
	}
}

// TestSaleEditApply: an edit sets exactly its given fields on a copy (a
// new stock is all unsold), and an edit that makes the sale invalid is
// refused.
func TestSaleEditApply(t *testing.T) {
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	orig := &seckill.Sale{ID: "tea", Name: "Tea gift set", PriceCents: 1999, Currency: "EUR", Stock: 200, Unsold: 200,
		PurchaseLimit: 1, StartAt: start, EndAt: start.Add(time.Hour)}
	keep := *orig
	name, price, currency, stock, limit := "Green tea", int64(2999), "USD", int64(300), int64(2)
	end := start.Add(2 * time.Hour)
	got, err := seckill.SaleEdit{Name: &name, PriceCents: &price, Currency: &currency, Stock: &stock, PurchaseLimit: &limit, EndAt: &end}.Apply(orig)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := keep
	want.Name, want.PriceCents, want.Currency, want.Stock, want.Unsold, want.PurchaseLimit, want.EndAt = name, price, currency, stock, stock, limit, end
	if *got != want {
		t.Errorf("Apply = %+v; want %+v", *got, want)
	}
	if *orig != keep {
		t.Errorf("Apply changed the sale it was given: %+v", *orig)
	}
	if got, err := (seckill.SaleEdit{}).Apply(orig); err != nil || *got != keep {
		t.Errorf("empty edit: Apply = %+v, %v; want the sale unchanged", got, err)
	}
	zero := int64(0)
	if _, err := (seckill.SaleEdit{Stock: &zero}).Apply(orig); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("edit to stock 0: Apply error = %v; want EINVALID", err)
	}
}

func TestSaleState(t *testing.T) {
	start := time.Date(2026, 8, 20, 9, 0, 0, 0, time.UTC)
	s := seckill.Sale{StartAt: start, EndAt: start.Add(time.Hour)}
	tests := []struct {
		at        time.Time
		remaining int64
		want      seckill.SaleState
	}{
		{start.Add(-time.Second), 200, seckill.SaleScheduled},
		{start, 200, seckill.SaleLive},
		{start, 0, seckill.SaleSoldOut},
		{start.Add(time.Hour), 5, seckill.SaleEnded},
		{start.Add(time.Hour), 0, seckill.SaleEnded},
	}
	for _, tt := range tests {
		if got := s.State(tt.at, tt.remaining); got != tt.want {
			t.Errorf("State(%s, %d) = %s, want %s", tt.at, tt.remaining, got, tt.want)
		}
	}
}

func TestValidUserIDAndKey(t *testing.T) {
	for in, want := range map[string]bool{
		"alice": true, "用户-42": true, "": false, "a\nb": false, "\x00": false,
		strings.Repeat("a", 128): true, strings.Repeat("a", 129): false, "\xff": false,
	} {
		if got := seckill.ValidUserID(in); got != want {
			t.Errorf("ValidUserID(%q) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[string]bool{
		"k-1": true, "": false, "with space": false, "ключ": false, strings.Repeat("k", 129): false,
	} {
		if got := seckill.ValidIdempotencyKey(in); got != want {
			t.Errorf("ValidIdempotencyKey(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestIdempotencyDigestIsValidAndTellsKeysApart: every digest passes the
// check the order writer applies to what a broker carries, and keys that
// differ by one character get different digests.
func TestIdempotencyDigestIsValidAndTellsKeysApart(t *testing.T) {
	seen := map[string]string{}
	for _, key := range []string{"k-1", "k-2", "K-1", strings.Repeat("k", 128), "!", "~~"} {
		d := seckill.IdempotencyDigest(key)
		if !seckill.ValidIdempotencyDigest(d) {
			t.Errorf("IdempotencyDigest(%q) = %q fails ValidIdempotencyDigest", key, d)
		}
		if d != seckill.IdempotencyDigest(key) {
			t.Errorf("IdempotencyDigest(%q) is not stable", key)
		}
		if other, ok := seen[d]; ok {
			t.Errorf("keys %q and %q share the digest %q", other, key, d)
		}
		seen[d] = key
	}
	for in, want := range map[string]bool{
		"": false, "k-1": false, strings.Repeat("A", 22): true, strings.Repeat("A", 21) + "=": false,
		strings.Repeat("A", 21) + "\n": false, strings.Repeat("a", 23): false,
	} {
		if got := seckill.ValidIdempotencyDigest(in); got != want {
			t.Errorf("ValidIdempotencyDigest(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestReplayOfOrder(t *testing.T) {
	for _, tt := range []struct {
		order *seckill.Order
		qty   int64
		want  seckill.Outcome
	}{
		{&seckill.Order{Qty: 2, Status: seckill.OrderPlaced}, 2, seckill.OutcomeReplayed},
		{&seckill.Order{Qty: 2, Status: seckill.OrderCancelled}, 2, seckill.OutcomeReplayed},
		{&seckill.Order{Qty: 2, Status: seckill.OrderPlaced}, 1, seckill.OutcomeKeyReused},
		{&seckill.Order{Qty: 1, Status: seckill.OrderPaid}, 3, seckill.OutcomeKeyReused},
	} {
		if got := seckill.ReplayOfOrder(tt.order, tt.qty); got != tt.want {
			t.Errorf("ReplayOfOrder(qty %d %s, %d) = %v, want %v", tt.order.Qty, tt.order.Status, tt.qty, got, tt.want)
		}
	}
}

func TestErrorCode(t *testing.T) {
	wrapped := fmt.Errorf("reserve: %w", seckill.Errorf(seckill.ESOLDOUT, "gone"))
	if got := seckill.ErrorCode(wrapped); got != seckill.ESOLDOUT {
		t.Fatalf("ErrorCode = %q", got)
	}
	if got := seckill.ErrorMessage(wrapped); got != "gone" {
		t.Fatalf("ErrorMessage = %q", got)
	}
	raw := errors.New("dial tcp 10.0.0.1:3306: secret-host")
	if seckill.ErrorCode(raw) != seckill.EINTERNAL || strings.Contains(seckill.ErrorMessage(raw), "secret") {
		t.Fatal("internal errors must map to EINTERNAL with a generic message")
	}
	if seckill.ErrorCode(nil) != "" {
		t.Fatal("nil error has a code")
	}
}

func TestValidSaleID(t *testing.T) {
	for in, want := range map[string]bool{
		"tea": true, "Tea_2026-08": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "a{b}": false, "a.b": false, "a/b": false,
		"a b": false, "tée": false, "a\x00": false, "a\n": false,
	} {
		if got := seckill.ValidSaleID(in); got != want {
			t.Errorf("ValidSaleID(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestReservationIDFloor(t *testing.T) {
	at := time.UnixMilli(1_790_000_000_123)
	floor := seckill.ReservationIDFloor("tea", at)
	for _, tc := range []struct {
		name  string
		id    string
		above bool
	}{
		{"made at the instant", seckill.NewReservationID("tea", at), true},
		{"made a millisecond later", seckill.NewReservationID("tea", at.Add(time.Millisecond)), true},
		{"made an hour later", seckill.NewReservationID("tea", at.Add(time.Hour)), true},
		{"made a millisecond before", seckill.NewReservationID("tea", at.Add(-time.Millisecond)), false},
	} {
		if got := tc.id >= floor; got != tc.above {
			t.Errorf("%s: %s >= floor %s is %v; want %v", tc.name, tc.id, floor, got, tc.above)
		}
	}
	if _, ok := seckill.SaleIDOfReservation(floor); !ok {
		t.Errorf("floor %q is not shaped as a reservation id", floor)
	}
}
