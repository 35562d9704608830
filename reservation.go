package seckill

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ReserveRequest is one buyer's attempt to claim Qty units of a sale.
type ReserveRequest struct {
	// ReservationID is a fresh id the caller proposes (NewReservationID). It
	// is used only if this request reserves units.
	ReservationID string
	UserID        string
	Qty           int64
	// IdempotencyKey is optional. The same user sending the same key gets
	// the earlier answer back, and never a second unit.
	IdempotencyKey string
	// RateChecks are the rate limits the request must pass, decided by
	// the stock store in the same call as the reservation (no round trip
	// of their own): a request refused by one is OutcomeRateLimited and
	// counts against none; an allowed one counts against all, whatever
	// the reservation's outcome. At most MaxRateChecks.
	RateChecks []RateCheck
}

// RateCheck is one rate limit of a reservation request: Key names what is
// limited ("ip:…", "user:…"), counted per sale under Limit.
type RateCheck struct {
	Key   string
	Limit RateLimit
}

// MaxRateChecks bounds ReserveRequest.RateChecks.
const MaxRateChecks = 4

// Limits on outside input that reaches the stock store.
const (
	MaxUserIDBytes         = 128
	MaxIdempotencyKeyBytes = 128
)

// Outcome is the decision the stock store took for one request.
type Outcome uint8

const (
	OutcomeReserved      Outcome = iota + 1 // units reserved now
	OutcomeReplayed                         // idempotent replay of an earlier reservation
	OutcomeSoldOut                          // not enough stock left
	OutcomeLimitExceeded                    // per-user limit would be exceeded
	OutcomeNotStarted                       // before the window, or not preheated yet
	OutcomeEnded                            // after the window
	OutcomeKeyReused                        // idempotency key reused with another qty
	OutcomeRateLimited                      // refused by one of the request's RateChecks
	// OutcomeAdmissionRequired: the sale is a lottery or a queue, and the
	// request did not come through its admission.
	OutcomeAdmissionRequired
)

var outcomeNames = [...]string{
	OutcomeReserved:          "reserved",
	OutcomeReplayed:          "replayed",
	OutcomeSoldOut:           ESOLDOUT,
	OutcomeLimitExceeded:     EPURCHASELIMIT,
	OutcomeNotStarted:        ENOTSTARTED,
	OutcomeEnded:             EENDED,
	OutcomeKeyReused:         EKEYREUSED,
	OutcomeRateLimited:       ERATELIMITED,
	OutcomeAdmissionRequired: EADMISSION,
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && outcomeNames[o] != "" {
		return outcomeNames[o]
	}
	return "unknown"
}

// Claimed reports whether the buyer holds units after this outcome.
func (o Outcome) Claimed() bool { return o == OutcomeReserved || o == OutcomeReplayed }

// ReserveResult is the stock store's answer to one ReserveRequest.
type ReserveResult struct {
	Outcome Outcome
	// ReservationID is set when Outcome.Claimed(): the id of the (possibly
	// earlier) reservation that holds the units.
	ReservationID string
	// Qty is the quantity held by that reservation.
	Qty int64
	// For OutcomeRateLimited: the index in RateChecks of the limit that
	// refused, and how long until it would allow a request.
	RateLimitedBy int
	RetryAfter    time.Duration
}

// StockLevel is a sale's live stock as held in the stock store.
type StockLevel struct {
	Total    int64
	Reserved int64
	// Heals counts the times the engine rebuilt the sale's state in the
	// stock store from the database after the store lost writes.
	Heals int64
}

// StockWatch is what the engine's loss watcher reads of a sale in the
// stock store on every tick (internal/heal).
type StockWatch struct {
	Loaded   bool
	Total    int64
	Reserved int64
	// Seq counts the reserve batches that reserved: it only grows, unless
	// the store lost writes.
	Seq int64
	// Healing is set while the engine rebuilds the sale's state from the
	// database, since HealingSince; claims are refused meanwhile
	// (ETRYLATER).
	Healing      bool
	HealingSince time.Time
	// Buckets is the sale's number of stock buckets (1 unless it is
	// spread over several shards).
	Buckets int64
	Heals   int64
}

// Remaining is the number of units still available.
func (l StockLevel) Remaining() int64 { return max(l.Total-l.Reserved, 0) }

// Reserver decides one reservation request for a sale. In the engine it is
// the request combiner in front of the stock store, with the sold-out flag
// in front of that; the HTTP API calls it. Errors that are an *Error (e.g.
// EOVERLOADED, EUNAVAILABLE) keep their code.
type Reserver interface {
	Reserve(ctx context.Context, saleID string, req ReserveRequest) (ReserveResult, error)
}

// StockStore is the live inventory: Redis in production, an in-process
// Redis-compatible server in the embedded default, both through the same
// client and the same Lua scripts (internal/redis).
type StockStore interface {
	// Preheat loads a sale's stock, limit and window. It is idempotent and
	// never resets a sale that is already loaded: created reports whether
	// this call loaded it.
	Preheat(ctx context.Context, s *Sale) (created bool, err error)
	// Reserve decides a batch of requests for one sale atomically and in
	// order, recording each reservation and appending it to the sale's
	// outbox in the same step. (A sale split into stock buckets keeps that
	// within each bucket: requests of buyers in different buckets are
	// decided at once, in no order between them.) results[i] answers reqs[i]. A sale that is
	// not preheated answers OutcomeNotStarted for every request.
	Reserve(ctx context.Context, saleID string, reqs []ReserveRequest) ([]ReserveResult, error)
	// Stock returns the live stock of a sale; ErrNotFound when the sale is
	// not preheated.
	Stock(ctx context.Context, saleID string) (StockLevel, error)
}

// Reservation ids are "<sale id>.<26 base32 chars>": the sale id lets any
// node find the reservation's Redis keys from the id alone, and the random
// part is a 48-bit millisecond timestamp plus 80 random bits, so ids sort by
// time and never collide in practice.
var reservationEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// NewReservationID returns a fresh reservation id for a sale.
func NewReservationID(saleID string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return saleID + "." + reservationEncoding.EncodeToString(b[:])
}

// ReservationIDFloor is the least reservation id of saleID made at t or
// later: ids sort by the time they were made (to the millisecond).
func ReservationIDFloor(saleID string, t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(max(t.UnixMilli(), 0))<<16)
	return saleID + "." + reservationEncoding.EncodeToString(b[:])
}

// SaleIDOfReservation returns the sale id encoded in a reservation id, and
// false when id is not a well-formed reservation id.
func SaleIDOfReservation(id string) (string, bool) {
	i := strings.LastIndexByte(id, '.')
	if i < 0 || len(id)-i-1 != 26 || !ValidSaleID(id[:i]) {
		return "", false
	}
	for _, c := range id[i+1:] {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", c) {
			return "", false
		}
	}
	return id[:i], true
}

// IsReservationOf reports whether id has the shape of a reservation id of
// saleID: the sale id, a dot and 26 characters. It is the cheap invariant
// check for code inside the process, which holds ids an edge minted or
// parsed already; ids from outside (a URL, a broker message, a database
// row) are parsed with SaleIDOfReservation, once, at that edge.
func IsReservationOf(id, saleID string) bool {
	return len(id) == len(saleID)+27 && id[len(saleID)] == '.' && id[:len(saleID)] == saleID
}

// ValidUserID reports whether id can identify a buyer: 1 to MaxUserIDBytes
// bytes of valid UTF-8 without control characters. User ids come from
// token subjects and end up in Redis fields, SQL rows and log lines.
func ValidUserID(id string) bool { return printable(id, MaxUserIDBytes) }

// ValidIdempotencyKey reports whether key is acceptable as an
// Idempotency-Key: 1 to MaxIdempotencyKeyBytes printable ASCII characters.
func ValidIdempotencyKey(key string) bool {
	if len(key) == 0 || len(key) > MaxIdempotencyKeyBytes {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// IdempotencyDigest is what the event and the order keep of an
// Idempotency-Key: the first 128 bits of its SHA-256, base64url. The
// database never holds a client's key, and a digest has one size.
func IdempotencyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// IdempotencyDigestLen is the length of every IdempotencyDigest.
const IdempotencyDigestLen = 22

// ValidIdempotencyDigest reports whether d can be an IdempotencyDigest.
func ValidIdempotencyDigest(d string) bool {
	if len(d) != IdempotencyDigestLen {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func printable(s string, maxBytes int) bool {
	if len(s) == 0 || len(s) > maxBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
