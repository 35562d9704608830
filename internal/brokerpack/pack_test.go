package brokerpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestPackRoundTrip(t *testing.T) {
	msgs := []PackedMessage{
		{Message: seckill.Message{ID: "r1", Body: []byte(`{"a":1}`)}, Attempt: 1},
		{Message: seckill.Message{ID: "r2", Body: nil}, Attempt: 4},
		{Message: seckill.Message{ID: "", Body: []byte("x")}, Attempt: 2},
	}
	body := EncodePack("ns1", msgs)
	if !IsPack(body) || PackLen(body) != 3 {
		t.Fatalf("IsPack=%v PackLen=%d; want true, 3", IsPack(body), PackLen(body))
	}
	p, err := DecodePack("ignored", body)
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace != "ns1" || len(p.Events) != 3 {
		t.Fatalf("got namespace %q, %d events", p.Namespace, len(p.Events))
	}
	for i, e := range p.Events {
		if e.ID != msgs[i].ID || !bytes.Equal(e.Body, msgs[i].Body) || e.Attempt != msgs[i].Attempt {
			t.Errorf("event %d = %+v; want %+v", i, e, msgs[i])
		}
	}
}

func TestDecodePackLegacyBody(t *testing.T) {
	p, err := DecodePack("r9", []byte(`{"reservation_id":"r9"}`))
	if err != nil || p.Namespace != "" || len(p.Events) != 1 || p.Events[0].ID != "r9" || p.Events[0].Attempt != 1 {
		t.Fatalf("DecodePack(legacy) = %+v, %v; want one event r9 at attempt 1, no namespace", p, err)
	}
}

func TestDecodePackRejectsDamage(t *testing.T) {
	body := EncodePack("ns", []PackedMessage{{Message: seckill.Message{ID: "r1", Body: []byte("abc")}, Attempt: 1}})
	for n := len(packMagic); n < len(body); n++ {
		if _, err := DecodePack("x", body[:n]); !errors.Is(err, ErrBadPack) {
			t.Errorf("truncated to %d bytes: err %v; want ErrBadPack", n, err)
		}
	}
	if _, err := DecodePack("x", append(bytes.Clone(body), 0)); !errors.Is(err, ErrBadPack) {
		t.Errorf("trailing byte: err %v; want ErrBadPack", err)
	}
}

func TestPackIDNamesTheEventsAndAttempts(t *testing.T) {
	a := []PackedMessage{{Message: seckill.Message{ID: "r1"}, Attempt: 1}, {Message: seckill.Message{ID: "r2"}, Attempt: 1}}
	b := []PackedMessage{{Message: seckill.Message{ID: "r1"}, Attempt: 1}, {Message: seckill.Message{ID: "r2"}, Attempt: 2}}
	c := []PackedMessage{{Message: seckill.Message{ID: "r1r"}, Attempt: 1}, {Message: seckill.Message{ID: "2"}, Attempt: 1}}
	same := []PackedMessage{{Message: seckill.Message{ID: "r1"}, Attempt: 1}, {Message: seckill.Message{ID: "r2"}, Attempt: 1}}
	if PackID(a) != PackID(same) {
		t.Errorf("equal packs, ids %s and %s: PackID not stable", PackID(a), PackID(same))
	}
	if PackID(a) == PackID(b) || PackID(a) == PackID(c) {
		t.Errorf("distinct packs share an id: %s %s %s", PackID(a), PackID(b), PackID(c))
	}
}

func TestSplitPacksBounds(t *testing.T) {
	many := make([]PackedMessage, 2*MaxPackEvents+1)
	for i := range many {
		many[i] = PackedMessage{Message: seckill.Message{ID: fmt.Sprint(i)}, Attempt: 1}
	}
	runs := SplitPacks(many)
	if len(runs) != 3 || len(runs[0]) != MaxPackEvents || len(runs[2]) != 1 {
		t.Errorf("split %d events into %d runs; want 3 of at most %d", len(many), len(runs), MaxPackEvents)
	}
	big := []PackedMessage{
		{Message: seckill.Message{ID: "a", Body: []byte(strings.Repeat("x", MaxPackBytes/2))}},
		{Message: seckill.Message{ID: "b", Body: []byte(strings.Repeat("x", MaxPackBytes/2))}},
	}
	if runs := SplitPacks(big); len(runs) != 2 {
		t.Errorf("two half-limit bodies in %d runs; want 2", len(runs))
	}
}

func TestJudge(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	mk := func(n int) *PackDelivery { return &PackDelivery{Msg: seckill.Message{ID: fmt.Sprint("r", n)}, N: n} }
	acked, retried, last, quiet := mk(1), mk(2), mk(3), mk(1)
	acked.Ack()
	retried.Retry(errors.New("boom"))
	last.Retry(errors.New("final"))
	v := Judge([]*PackDelivery{acked, retried, last, quiet}, policy, true)
	if v.Abandon || len(v.Dead) != 1 || v.Dead[0].Attempts != 3 || v.Dead[0].Reason != "final" {
		t.Fatalf("verdict %+v; want one dead letter at attempt 3", v)
	}
	if r := v.Retry[200*time.Millisecond]; len(r) != 1 || r[0].ID != "r2" || r[0].Attempt != 3 {
		t.Errorf("retries after 200ms = %+v; want r2 at attempt 3", r)
	}
	if r := v.Retry[100*time.Millisecond]; len(r) != 1 || r[0].ID != "r1" || r[0].Attempt != 2 {
		t.Errorf("retries after 100ms = %+v; want the unsettled r1 at attempt 2", r)
	}
	stopping := mk(1)
	if v := Judge([]*PackDelivery{mk(1), stopping}, policy, false); !v.Abandon {
		t.Errorf("unsettled while stopping: verdict %+v; want the pack abandoned", v)
	}
}

// TestJudgeReleased: a released delivery comes back after the first
// back-off with the attempt it had, under a pack id of its own (a
// broker's duplicate window would drop a copy named like the message it
// copies), even at its last attempt.
func TestJudgeReleased(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for _, n := range []int{1, 3} {
		d := &PackDelivery{Msg: seckill.Message{ID: "r1"}, N: n}
		d.Release()
		v := Judge([]*PackDelivery{d}, policy, true)
		r := v.Retry[100*time.Millisecond]
		if v.Abandon || len(v.Dead) != 0 || len(r) != 1 || r[0].ID != "r1" || r[0].Attempt != n {
			t.Fatalf("released at attempt %d: verdict %+v; want r1 back after 100ms at attempt %d", n, v, n)
		}
		original := []PackedMessage{{Message: d.Msg, Attempt: n}}
		if PackID(r) == PackID(original) {
			t.Errorf("released copy named %s like the message it copies", PackID(r))
		}
		d2 := &PackDelivery{Msg: seckill.Message{ID: "r1"}, N: n}
		d2.Release()
		if again := Judge([]*PackDelivery{d2}, policy, true).Retry[100*time.Millisecond]; PackID(again) == PackID(r) {
			t.Errorf("two releases of one message share the id %s", PackID(r))
		}
	}
}

func FuzzDecodePack(f *testing.F) {
	f.Add(EncodePack("ns", []PackedMessage{{Message: seckill.Message{ID: "r1", Body: []byte("{}")}, Attempt: 1}}))
	f.Add([]byte("SKP1"))
	f.Add([]byte(`{"reservation_id":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePack("id", body)
		if err != nil {
			return
		}
		again, err := DecodePack("id", EncodePack(p.Namespace, p.Events))
		if IsPack(body) && (err != nil || len(again.Events) != len(p.Events)) {
			t.Fatalf("re-encoded pack does not decode alike: %v", err)
		}
	})
}

// TestEventLayouts: an event reads back the same from the compact layout
// and from JSON (what relays of earlier versions and external brokers
// carry), and EventJSON turns a compact body into the JSON one.
func TestEventLayouts(t *testing.T) {
	e := seckill.ReservationEvent{
		ReservationID: seckill.NewReservationID("tea", time.Now()), SaleID: "tea", UserID: "ålice@example", Qty: 3,
		ReservedAt: time.UnixMilli(1_790_000_000_123).UTC(),
	}
	t.Run("without a key", func(t *testing.T) { testEventLayouts(t, e) })
	e.KeyDigest = seckill.IdempotencyDigest("k-1")
	t.Run("with a key", func(t *testing.T) { testEventLayouts(t, e) })
}

// TestEventOfBeforeKeysDecodes: bodies written before events carried a key
// digest (an upgrade's backlog) read as events without one.
func TestEventOfBeforeKeysDecodes(t *testing.T) {
	const id = "tea.01KBX6Z8T3G1V4B2C5D8E9F0AB"
	// The compact layout of before, written out: no digest after the time.
	old := []byte("SKE1\x1e" + id + "\x03tea\x05alice\x02")
	old = binary.AppendVarint(old, 1_790_000_000_123)
	oldJSON := []byte(`{"reservation_id":"` + id + `","sale_id":"tea","user_id":"alice","qty":2,"reserved_at":"2026-01-02T03:04:05.123Z"}`)
	for name, body := range map[string][]byte{"compact": old, "json": oldJSON} {
		got, err := DecodeReservationEvent(body)
		if err != nil || got.ReservationID != id || got.UserID != "alice" || got.Qty != 2 || got.KeyDigest != "" {
			t.Errorf("%s: decoded %+v, %v; want %s of alice, qty 2, no key digest", name, got, err, id)
		}
	}
}

func testEventLayouts(t *testing.T, e seckill.ReservationEvent) {
	js, err := EventMessage(e)
	if err != nil {
		t.Fatal(err)
	}
	compact := CompactEvent(e)
	if compact.ID != e.ReservationID || len(compact.Body) >= len(js.Body) {
		t.Errorf("compact message %q (%d bytes); want id %s, fewer bytes than the JSON's %d", compact.ID, len(compact.Body), e.ReservationID, len(js.Body))
	}
	for name, body := range map[string][]byte{"compact": compact.Body, "json": js.Body} {
		got, err := DecodeReservationEvent(body)
		if err != nil || got != e {
			t.Errorf("%s: decoded %+v, %v; want %+v", name, got, err, e)
		}
	}
	if got := EventJSON(compact.Body); string(got) != string(js.Body) {
		t.Errorf("EventJSON(compact) = %s; want %s", got, js.Body)
	}
	if got := EventJSON([]byte("raw")); string(got) != "raw" {
		t.Errorf("EventJSON of a non-event = %q; want it unchanged", got)
	}
	for _, bad := range [][]byte{compact.Body[:len(compact.Body)-1], append(append([]byte{}, compact.Body...), 0), []byte("SKE1\xff"), []byte(`{"qty":`)} {
		if _, err := DecodeReservationEvent(bad); !errors.Is(err, ErrBadEvent) {
			t.Errorf("DecodeReservationEvent(%q) = %v; want ErrBadEvent", bad, err)
		}
	}
}

// FuzzDecodeReservationEvent: any body decodes or fails with ErrBadEvent,
// and a compact body that decodes encodes to one that decodes alike.
func FuzzDecodeReservationEvent(f *testing.F) {
	e := seckill.ReservationEvent{ReservationID: "tea.x", SaleID: "tea", UserID: "u", Qty: 1, ReservedAt: time.UnixMilli(5).UTC()}
	js, _ := EventMessage(e)
	f.Add(CompactEvent(e).Body)
	f.Add(js.Body)
	f.Add([]byte("SKE1"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := DecodeReservationEvent(body)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("error %v is not ErrBadEvent", err)
			}
			return
		}
		if strings.HasPrefix(string(body), "SKE1") {
			again := CompactEvent(got).Body
			if back, err := DecodeReservationEvent(again); err != nil || back != got {
				t.Fatalf("re-encoded %q decodes as %+v, %v; want %+v", again, back, err, got)
			}
		}
	})
}
