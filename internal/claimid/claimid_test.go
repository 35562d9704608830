package claimid

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestClaimTagUnchanged: the tag is HMAC-SHA256 over the id's body, the two
// lengths and the sale and user ids, as every earlier version minted it
// (ids in flight across an upgrade must still verify), whether the HMAC is
// fresh or reused.
func TestClaimTagUnchanged(t *testing.T) {
	key := []byte("claim-key")
	c := NewMinter(key)
	body := []byte("0123456789abc")
	for _, ids := range [][2]string{{"tea", "alice"}, {"a-longer-sale-id", "bob"}, {"tea", "alice"}} {
		m := hmac.New(sha256.New, key)
		m.Write(body)
		m.Write([]byte{0, byte(len(ids[0])), 0, byte(len(ids[1]))})
		m.Write([]byte(ids[0] + ids[1]))
		want := m.Sum(nil)[:3]
		got := make([]byte, 3)
		c.tag(body, ids[0], ids[1], got)
		if !bytes.Equal(got, want) {
			t.Errorf("tag of %v = %x, want %x", ids, got, want)
		}
	}
}

func TestMinter(t *testing.T) {
	ids := NewMinter([]byte("secret"))
	now := time.UnixMilli(1_790_000_000_123)
	id := ids.New("tea", "alice", 3, now)
	if sale, ok := seckill.SaleIDOfReservation(id); !ok || sale != "tea" {
		t.Fatalf("seckill.SaleIDOfReservation(%q) = %q, %v; want tea, true", id, sale, ok)
	}
	at, qty, ok := ids.Verify(id, "alice")
	if !ok || !at.Equal(now) || qty != 3 {
		t.Errorf("Verify(own id) = %v, %d, %v; want %v, 3, true", at, qty, ok, now)
	}
	if _, _, ok := ids.Verify(id, "bob"); ok {
		t.Error("an id verified for another buyer")
	}
	if _, _, ok := NewMinter([]byte("other")).Verify(id, "alice"); ok {
		t.Error("an id verified under another key")
	}
	if _, _, ok := ids.Verify(seckill.NewReservationID("tea", now), "alice"); ok {
		t.Error("an unsigned id verified")
	}
	// Every character matters, in every bit: the last one's low bits
	// carry no data, and a spelling that differs only there is not the id.
	alphabet := "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	for i := len("tea."); i < len(id); i++ {
		for _, c := range alphabet {
			if byte(c) == id[i] {
				continue
			}
			bad := id[:i] + string(c) + id[i+1:]
			if _, _, ok := ids.Verify(bad, "alice"); ok {
				t.Errorf("id changed at %d verified: %s", i, bad)
			}
		}
	}
	if _, q, ok := ids.Verify(ids.New("tea", "alice", 1000, now), "alice"); !ok || q != 0 {
		t.Errorf("qty over 255: Verify = %d, %v; want 0, true", q, ok)
	}
	if a, b := ids.New("tea", "alice", 1, now), ids.New("tea", "alice", 1, now); a == b {
		t.Error("two ids alike")
	}
}
