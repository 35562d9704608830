package brokerpack

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// sameEvent reports whether a and b hold the same fields, times equal to
// the nanosecond and in the same zone offset.
func sameEvent(a, b seckill.ReservationEvent) bool {
	_, oa := a.ReservedAt.Zone()
	_, ob := b.ReservedAt.Zone()
	return a.ReservationID == b.ReservationID && a.SaleID == b.SaleID && a.UserID == b.UserID &&
		a.Qty == b.Qty && a.ReservedAt.Equal(b.ReservedAt) && oa == ob && a.KeyDigest == b.KeyDigest
}

// TestEventJSONFastPaths: the events the relay publishes take the fast
// paths both ways, and the bodies that must not (escapes, other spacing,
// numbers and times json.Marshal does not write) still read as
// encoding/json reads them.
func TestEventJSONFastPaths(t *testing.T) {
	plain := seckill.ReservationEvent{
		ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea", UserID: "user-42", Qty: 2,
		ReservedAt: time.UnixMilli(1_790_000_000_123).UTC(),
	}
	keyed := plain
	keyed.KeyDigest = seckill.IdempotencyDigest("k-1")
	for _, e := range []seckill.ReservationEvent{plain, keyed} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendEventJSON(nil, e)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("appendEventJSON = %s, %v; want %s, true", got, ok, want)
		}
		if m, err := EventMessage(e); err != nil || !bytes.Equal(m.Body, want) || m.ID != e.ReservationID {
			t.Errorf("Message() = %+v, %v; want the JSON %s", m, err, want)
		}
		if back, ok := decodeEventJSON(want); !ok || back != e {
			t.Errorf("decodeEventJSON(%s) = %+v, %v; want %+v, true", want, back, ok, e)
		}
	}

	for _, e := range []seckill.ReservationEvent{
		{ReservationID: "tea.x", SaleID: "tea", UserID: `a"b`, Qty: 1},
		{ReservationID: "tea.x", SaleID: "tea", UserID: "a<b>&c", Qty: 1},
		{ReservationID: "tea.x", SaleID: "tea", UserID: "ålice", Qty: 1},
		{ReservationID: "tea.x", SaleID: "tea", UserID: "u", Qty: 1, ReservedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if got, ok := appendEventJSON(nil, e); ok {
			t.Errorf("appendEventJSON(%+v) = %s; want it left to encoding/json", e, got)
		}
	}

	for _, body := range []string{
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"a\"b","qty":1,"reserved_at":"2026-01-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":01,"reserved_at":"2026-01-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":-0,"reserved_at":"2026-01-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1e2,"reserved_at":"2026-01-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05Z"} `,
		`{"reservation_id": "tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05+02:00"}`,
		`{"sale_id":"tea","reservation_id":"tea.x","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":99999999999999999999,"reserved_at":"2026-01-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-13-02T03:04:05Z"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05Z","key_digest":""}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05Z","key_digest":"a\u0041"}`,
		`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05Z","key_digest":"a","x":1}`,
	} {
		if got, ok := decodeEventJSON([]byte(body)); ok {
			t.Errorf("decodeEventJSON(%s) = %+v; want it left to encoding/json", body, got)
		}
		var want seckill.ReservationEvent
		wantErr := json.Unmarshal([]byte(body), &want)
		got, err := DecodeReservationEvent([]byte(body))
		if (err != nil) != (wantErr != nil) || err == nil && !sameEvent(got, want) {
			t.Errorf("DecodeReservationEvent(%s) = %+v, %v; want %+v, %v", body, got, err, want, wantErr)
		}
	}
}

// FuzzEventJSON: the fast paths agree with encoding/json wherever they
// answer. An event the encoder writes is byte for byte json.Marshal's, and
// a body the decoder reads is one json.Unmarshal reads the same.
func FuzzEventJSON(f *testing.F) {
	f.Add("tea.x", "tea", "u-1", int64(1), int64(1_790_000_000_123), 0, "", []byte(`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05.123Z"}`))
	f.Add("a<b", "", `"`, int64(-5), int64(-62_135_596_800_001), 3600, "d", []byte(`{"reservation_id":"","sale_id":"","user_id":"","qty":-12,"reserved_at":"0001-01-01T00:00:00+01:00"}`))
	f.Add("tea.x", "tea", "u-1", int64(1), int64(1_790_000_000_123), 0, seckill.IdempotencyDigest("k"),
		[]byte(`{"reservation_id":"tea.x","sale_id":"tea","user_id":"u","qty":1,"reserved_at":"2026-01-02T03:04:05.123Z","key_digest":"AAAAAAAAAAAAAAAAAAAAAA"}`))
	f.Fuzz(func(t *testing.T, id, sale, user string, qty, nanos int64, offset int, digest string, body []byte) {
		e := seckill.ReservationEvent{ReservationID: id, SaleID: sale, UserID: user, Qty: qty,
			ReservedAt: time.Unix(0, nanos).In(time.FixedZone("", offset%(24*3600))), KeyDigest: digest}
		if got, ok := appendEventJSON(nil, e); ok {
			want, err := json.Marshal(e)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("appendEventJSON(%+v) = %s; json.Marshal = %s, %v", e, got, want, err)
			}
		}
		if got, ok := decodeEventJSON(body); ok {
			var want seckill.ReservationEvent
			if err := json.Unmarshal(body, &want); err != nil || !sameEvent(got, want) {
				t.Fatalf("decodeEventJSON(%q) = %+v; json.Unmarshal = %+v, %v", body, got, want, err)
			}
		}
	})
}

// BenchmarkEventJSON: one event's JSON written (Message) and read
// (DecodeReservationEvent), as the relay and the order writer do per event
// on an external broker.
func BenchmarkEventJSON(b *testing.B) {
	e := seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea", UserID: "user-123456",
		Qty: 1, ReservedAt: time.UnixMilli(1_790_000_000_123).UTC()}
	m, _ := EventMessage(e)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EventMessage(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeReservationEvent(m.Body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
