package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// A ticket lets an EventSource, which cannot send an Authorization header,
// open one sale's live feed for a short while without the admin token
// appearing in a URL (and so in logs, history and proxies). It is
//
//	<expiry, Unix seconds>.<base64url HMAC-SHA256(key, "<sale id>\n<expiry>")>
//
// where key is derived from the admin token: changing the token voids every
// ticket. A leaked ticket opens feeds of one sale's counters (never a
// buyer's record) until it expires, TicketTTL after it was made; a feed
// opened by then runs until its client leaves or the node stops, since the
// ticket is checked when a feed opens (an EventSource reconnecting with
// the same URL must get in within the TTL, or fetch a new ticket).

var (
	errTicketMalformed = errors.New("ticket: malformed")
	errTicketExpired   = errors.New("ticket: expired")
	errTicketForged    = errors.New("ticket: bad signature")
)

// ticketMACLen is the length of the encoded MAC: 32 bytes, unpadded.
var ticketMACLen = base64.RawURLEncoding.EncodedLen(sha256.Size)

// maxTicketLen bounds what is parsed at all: a 12-digit expiry, a dot and
// the MAC.
var maxTicketLen = 12 + 1 + ticketMACLen

type ticketSigner struct {
	key       []byte
	ttl       time.Duration
	tokenHash [sha256.Size]byte // of the admin token, for constant-time checks
}

func newTicketSigner(adminToken string, ttl time.Duration) *ticketSigner {
	// A derived key, so the MAC key is never the token itself.
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte("seckill/web/sse-ticket/v1"))
	return &ticketSigner{key: m.Sum(nil), ttl: ttl, tokenHash: sha256.Sum256([]byte(adminToken))}
}

// sign returns a ticket for saleID valid until now+ttl (to the second,
// rounded up, so it is never shorter than ttl).
func (s *ticketSigner) sign(saleID string, now time.Time) (ticket string, expires time.Time) {
	exp := now.Add(s.ttl + time.Second - 1).Unix()
	e := strconv.FormatInt(exp, 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(s.mac(saleID, e)), time.Unix(exp, 0)
}

// verify checks that ticket was signed for saleID and has not expired.
func (s *ticketSigner) verify(ticket, saleID string, now time.Time) error {
	exp, macText, err := parseTicket(ticket)
	if err != nil {
		return err
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(macText)
	if err != nil {
		return errTicketMalformed
	}
	// Signature before expiry: an expired ticket is only reported as such
	// when it is genuine.
	if !hmac.Equal(got, s.mac(saleID, strconv.FormatInt(exp, 10))) {
		return errTicketForged
	}
	if now.Unix() >= exp {
		return errTicketExpired
	}
	return nil
}

func (s *ticketSigner) mac(saleID, exp string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(saleID))
	m.Write([]byte{'\n'})
	m.Write([]byte(exp))
	return m.Sum(nil)
}

// parseTicket splits a ticket into its expiry and encoded MAC. The expiry
// is canonical decimal (no sign, no leading zero), so one expiry has one
// spelling and the MAC covers exactly what was parsed.
func parseTicket(t string) (exp int64, mac string, err error) {
	if len(t) > maxTicketLen {
		return 0, "", errTicketMalformed
	}
	e, mac, ok := strings.Cut(t, ".")
	if !ok || len(e) == 0 || len(e) > 12 || e[0] == '0' || len(mac) != ticketMACLen {
		return 0, "", errTicketMalformed
	}
	for i := 0; i < len(e); i++ {
		if e[i] < '0' || e[i] > '9' {
			return 0, "", errTicketMalformed
		}
	}
	exp, err = strconv.ParseInt(e, 10, 64)
	if err != nil {
		return 0, "", errTicketMalformed
	}
	return exp, mac, nil
}
