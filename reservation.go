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
	ReservationID string // a fresh id (NewReservationID), used only if it reserves
	UserID        string
	Qty           int64
	// IdempotencyKey (optional): the same user's same key gets the earlier
	// answer back, never a second unit.
	IdempotencyKey string
	// RateChecks are decided in the reserve call itself: refused by one, the
	// request counts against none; allowed, against all. At most MaxRateChecks.
	RateChecks []RateCheck
}

// RateCheck is one rate limit of a request: Key ("ip:…", "user:…") counted
// per sale under Limit.
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
	OutcomeReserved          Outcome = iota + 1 // units reserved now
	OutcomeReplayed                             // idempotent replay of an earlier reservation
	OutcomeSoldOut                              // not enough stock left
	OutcomeLimitExceeded                        // per-user limit would be exceeded
	OutcomeNotStarted                           // before the window, or not preheated yet
	OutcomeEnded                                // after the window
	OutcomeKeyReused                            // idempotency key reused with another qty
	OutcomeRateLimited                          // refused by one of the request's RateChecks
	OutcomeAdmissionRequired                    // a lottery or queue sale, not entered through its admission
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
	// ReservationID and Qty are the (maybe earlier) reservation holding the
	// units, when Outcome.Claimed().
	ReservationID string
	Qty           int64
	// For OutcomeRateLimited: the index of the refusing RateCheck, and when
	// it would allow a request.
	RateLimitedBy int
	RetryAfter    time.Duration
}

// StockLevel is a sale's live stock as held in the stock store.
type StockLevel struct {
	Total    int64
	Reserved int64
	Heals    int64 // rebuilds of the sale from the database after lost writes
}

// StockWatch is what the loss watcher (internal/heal) reads of a sale on
// every tick.
type StockWatch struct {
	Loaded   bool
	Total    int64
	Reserved int64
	Seq      int64 // reserving batches: only grows, unless writes were lost
	// Healing: the sale is being rebuilt from the database since
	// HealingSince; claims are refused (ETRYLATER) meanwhile.
	Healing      bool
	HealingSince time.Time
	Buckets      int64
	Heals        int64
}

// Remaining is the number of units still available.
func (l StockLevel) Remaining() int64 { return max(l.Total-l.Reserved, 0) }

// Reserver decides one reservation request: the request combiner
// (internal/combiner) behind the sold-out flag (internal/soldout).
type Reserver interface {
	Reserve(ctx context.Context, saleID string, req ReserveRequest) (ReserveResult, error)
}

// StockStore is the live inventory (internal/redis).
type StockStore interface {
	// Preheat loads a sale once; it never resets a loaded one.
	Preheat(ctx context.Context, s *Sale) (created bool, err error)
	// Reserve decides one sale's batch atomically and in order (per stock
	// bucket), recording each reservation in the outbox in the same step.
	// A sale not preheated answers OutcomeNotStarted.
	Reserve(ctx context.Context, saleID string, reqs []ReserveRequest) ([]ReserveResult, error)
	// Stock is the live stock; ErrNotFound when not preheated.
	Stock(ctx context.Context, saleID string) (StockLevel, error)
}

// Reservation ids are "<sale id>.<26 base32>": the sale id finds the keys
// from the id alone; 48 bits of milliseconds and 80 random bits sort by time.
var reservationEncoding = base32.NewEncoding(reservationAlphabet).WithPadding(base32.NoPadding)

const reservationAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// reservationDigit marks the bytes of reservationAlphabet: the relay checks
// every reservation id it reads, and a table is a fifth of the cost of a
// search of the alphabet per character.
var reservationDigit = func() (t [256]bool) {
	for i := range len(reservationAlphabet) {
		t[reservationAlphabet[i]] = true
	}
	return t
}()

// NewReservationID returns a fresh reservation id for a sale.
func NewReservationID(saleID string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return saleID + "." + reservationEncoding.EncodeToString(b[:])
}

// ReservationIDFloor is the least id of saleID made at t or later.
func ReservationIDFloor(saleID string, t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(max(t.UnixMilli(), 0))<<16)
	return saleID + "." + reservationEncoding.EncodeToString(b[:])
}

// SaleIDOfReservation parses a reservation id from outside into its sale id.
func SaleIDOfReservation(id string) (string, bool) {
	i := strings.LastIndexByte(id, '.')
	if i < 0 || len(id)-i-1 != 26 || !ValidSaleID(id[:i]) {
		return "", false
	}
	for j := i + 1; j < len(id); j++ {
		if !reservationDigit[id[j]] {
			return "", false
		}
	}
	return id[:i], true
}

// IsReservationOf is the cheap check for ids already parsed at an edge; ids
// from outside are parsed with SaleIDOfReservation, once, at that edge.
func IsReservationOf(id, saleID string) bool {
	return len(id) == len(saleID)+27 && id[len(saleID)] == '.' && id[:len(saleID)] == saleID
}

// ValidUserID: 1 to MaxUserIDBytes of UTF-8 without control characters, as
// user ids end up in Redis fields, SQL rows and log lines.
func ValidUserID(id string) bool { return printable(id, MaxUserIDBytes) }

// ValidIdempotencyKey: 1 to MaxIdempotencyKeyBytes printable ASCII characters.
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

// ReplayOfOrder is the answer to a retry of qty units whose Idempotency-Key
// made order o: a replay of it when the qty is the same, else
// OutcomeKeyReused, as the stock store answers while it remembers the key.
// A cancelled order is replayed too: a key names one claim for good.
func ReplayOfOrder(o *Order, qty int64) Outcome {
	if o.Qty == qty {
		return OutcomeReplayed
	}
	return OutcomeKeyReused
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
