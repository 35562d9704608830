// Package claimid mints and verifies reservation ids signed for their
// buyer, so that a claim the stock store forgot can be told from an id
// nobody was given (internal/lostclaim). The API mints them; the lost-claim
// resolver verifies them.
package claimid

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"hash"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
)

// encoding is the reservation id's alphabet, as seckill.NewReservationID
// spells it (TestMinter parses a minted id with seckill.SaleIDOfReservation).
var encoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// Minter mints reservation ids that prove whom they were issued to, so
// that a claim the stock store forgot (Redis lost acknowledged writes) can
// still be told from an id nobody was given. Such an id has the shape of
// seckill.NewReservationID's, "<sale id>.<26 base32 chars>", over 16 bytes: a
// 48-bit millisecond timestamp, 48 random bits, the quantity (0 when over
// 255), and a 24-bit HMAC-SHA256 tag of all that, the sale id and the
// buyer's id. The API only ever shows an id to the buyer it claimed for,
// so an id whose tag verifies for a buyer is one that buyer was told
// "claimed" under (a 24-bit tag makes a guess succeed once in 16 million;
// one that does only records a failed order of the guesser's own, and
// internal/lostclaim limits each buyer's lookups of ids no store has, so
// 16 million guesses take tens of thousands of buyer-hours).
type Minter struct {
	key []byte
	// macs are HMACs keyed with key, reused: keying one costs two hash
	// blocks and a few allocations, on every claim.
	macs sync.Pool
}

// claimMAC is one reusable HMAC with its scratch space.
type claimMAC struct {
	h   hash.Hash
	msg []byte
	sum []byte
}

// NewMinter returns the minter of ids signed with key, which every API
// node of a deployment must share.
func NewMinter(key []byte) *Minter { return &Minter{key: append([]byte(nil), key...)} }

// New returns a fresh reservation id for qty units of sale, for userID.
func (c *Minter) New(saleID, userID string, qty int64, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:12])
	if qty > 0 && qty <= 255 {
		b[12] = byte(qty)
	}
	c.tag(b[:13], saleID, userID, b[13:])
	return saleID + "." + encoding.EncodeToString(b[:])
}

// Verify reports whether id was minted by New for userID, and if so when
// it was issued and for how many units (0 when New could not carry it).
func (c *Minter) Verify(id, userID string) (issued time.Time, qty int64, ok bool) {
	saleID, valid := seckill.SaleIDOfReservation(id)
	if !valid {
		return time.Time{}, 0, false
	}
	b, err := encoding.DecodeString(id[len(saleID)+1:])
	// 26 characters carry 130 bits for 128: the decoder ignores the last
	// character's low 2 bits, so only the canonical spelling is this id
	// (an alias would verify, then be looked up under another key).
	if err != nil || len(b) != 16 || encoding.EncodeToString(b) != id[len(saleID)+1:] {
		return time.Time{}, 0, false
	}
	var want [3]byte
	c.tag(b[:13], saleID, userID, want[:])
	if !hmac.Equal(want[:], b[13:16]) {
		return time.Time{}, 0, false
	}
	ms := int64(binary.BigEndian.Uint64(append(b[:6:6], 0, 0)) >> 16)
	return time.UnixMilli(ms), int64(b[12]), true
}

func (c *Minter) tag(body []byte, saleID, userID string, out []byte) {
	m, _ := c.macs.Get().(*claimMAC)
	if m == nil {
		m = &claimMAC{h: hmac.New(sha256.New, c.key)}
	} else {
		m.h.Reset()
	}
	defer c.macs.Put(m)
	// Lengths first, so no two (sale, user) pairs hash alike.
	m.msg = append(m.msg[:0], body...)
	m.msg = binary.BigEndian.AppendUint16(m.msg, uint16(len(saleID)))
	m.msg = binary.BigEndian.AppendUint16(m.msg, uint16(len(userID)))
	m.msg = append(m.msg, saleID...)
	m.msg = append(m.msg, userID...)
	m.h.Write(m.msg)
	m.sum = m.h.Sum(m.sum[:0])
	copy(out, m.sum)
}
