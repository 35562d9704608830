package seckill

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// TestClaimTagUnchanged: the tag is HMAC-SHA256 over the id's body, the two
// lengths and the sale and user ids, as every earlier version minted it
// (ids in flight across an upgrade must still verify), whether the HMAC is
// fresh or reused.
func TestClaimTagUnchanged(t *testing.T) {
	key := []byte("claim-key")
	c := NewClaimIDs(key)
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
