// Package ticket signs and checks the admission tickets of queue sales
// (docs/fairness.md): the waiting room issues one to a buyer it admits, and
// the claim route checks it with no call to any backend.
package ticket

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// Signer signs queue tickets, "<expiry unix>.<sale tag>.<buyer
// tag>.<hex HMAC-SHA256>", under a key every node shares: checking one
// calls no backend. The tags (a hash of the sale id, of the buyer id) only
// say why a ticket is refused: another buyer's ticket is a resold place.
type Signer struct{ key []byte }

// DefaultTTL is how long an admission ticket stays valid.
const DefaultTTL = 5 * time.Minute

// Problem is why an admission ticket was refused ("" when it was
// not): the label of seckill_queue_tickets_refused_total.
type Problem string

const (
	Missing      Problem = "missing"       // a claim on a queue sale with no ticket
	Expired      Problem = "expired"       // genuine, but past its expiry
	WrongBuyer   Problem = "wrong_buyer"   // made out to another buyer (its tag says)
	WrongSale    Problem = "wrong_sale"    // made out for another sale (its tag says)
	BadSignature Problem = "bad_signature" // malformed, forged, or signed with another key
)

// Problems are every Problem, in a fixed order.
var Problems = []Problem{Missing, Expired, WrongBuyer, WrongSale, BadSignature}

// New returns the signer of tickets under key.
func New(key []byte) *Signer {
	return &Signer{key: append([]byte(nil), key...)}
}

func (t *Signer) mac(saleID, userID string, exp int64) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte("ticket\x00" + saleID + "\x00" + userID + "\x00" + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// ticketTag is the 8 hex digits naming id (a sale's or a buyer's) in a
// ticket.
func ticketTag(kind, id string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + id))
	return hex.EncodeToString(h[:4])
}

// Issue returns a ticket for userID on saleID valid until expires.
func (t *Signer) Issue(saleID, userID string, expires time.Time) string {
	exp := expires.Unix()
	return strconv.FormatInt(exp, 10) + "." + ticketTag("sale", saleID) + "." + ticketTag("buyer", userID) + "." + t.mac(saleID, userID, exp)
}

// Check returns why ticket does not admit userID to saleID at now, or ""
// when it does. The signature is checked before the expiry, so a forged
// expiry is a bad signature; the tags are not signed, so a wrong sale or
// buyer is what the ticket says of itself.
func (t *Signer) Check(ticket, saleID, userID string, now time.Time) Problem {
	if ticket == "" {
		return Missing
	}
	parts := strings.Split(ticket, ".")
	if len(parts) != 4 || len(parts[0]) > 12 || len(parts[3]) != 2*sha256.Size {
		return BadSignature
	}
	exp, err := strconv.ParseInt(parts[0], 10, 64)
	switch {
	case err != nil:
		return BadSignature
	case parts[1] != ticketTag("sale", saleID):
		return WrongSale
	case parts[2] != ticketTag("buyer", userID):
		return WrongBuyer
	case !hmac.Equal([]byte(parts[3]), []byte(t.mac(saleID, userID, exp))):
		return BadSignature
	case now.Unix() >= exp:
		return Expired
	}
	return ""
}

// Verify reports whether ticket admits userID to saleID at now.
func (t *Signer) Verify(ticket, saleID, userID string, now time.Time) bool {
	return t.Check(ticket, saleID, userID, now) == ""
}
