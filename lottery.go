package seckill

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The lottery draw's rule is public, so anyone with the entry list and the
// revealed seed recomputes the winners: docs/fairness.md, "The rule".

// DrawSeedBytes is the length of a draw's secret seed.
const DrawSeedBytes = 32

// LotteryEntry is one buyer's entry in a lottery.
type LotteryEntry struct {
	ID     string `json:"entry_id"`
	UserID string `json:"-"` // never published
	Qty    int64  `json:"qty"`
}

// NewDrawSeed returns a fresh secret seed, hex encoded.
func NewDrawSeed() string {
	var b [DrawSeedBytes]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NewEntryID returns a fresh entry id: "e" and 26 base32 characters.
func NewEntryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "e" + reservationEncoding.EncodeToString(b[:])
}

// ValidEntryID reports whether id has NewEntryID's shape.
func ValidEntryID(id string) bool {
	if len(id) != 27 || id[0] != 'e' {
		return false
	}
	for i := 1; i < len(id); i++ {
		if !reservationDigit[id[i]] {
			return false
		}
	}
	return true
}

// DrawCommitment is the published commitment to a seed given in hex: the
// hex SHA-256 of the seed's bytes ("" when seedHex is not hex).
func DrawCommitment(seedHex string) string {
	seed, err := hex.DecodeString(seedHex)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// DrawRank is an entry's rank under a seed given in hex: HMAC-SHA256 with
// the seed's bytes as the key, of the entry id.
func DrawRank(seedHex, entryID string) []byte {
	seed, _ := hex.DecodeString(seedHex)
	return drawRank(seed, entryID)
}

func drawRank(seed []byte, entryID string) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(entryID))
	return m.Sum(nil)
}

// DrawOrder returns entries in draw order under seedHex; entries is not
// changed.
func DrawOrder(seedHex string, entries []LotteryEntry) []LotteryEntry {
	type ranked struct {
		rank []byte
		e    LotteryEntry
	}
	seed, _ := hex.DecodeString(seedHex)
	rs := make([]ranked, len(entries))
	for i, e := range entries {
		rs[i] = ranked{drawRank(seed, e.ID), e}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := bytes.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return strings.Compare(a.e.ID, b.e.ID)
	})
	out := make([]LotteryEntry, len(rs))
	for i, r := range rs {
		out[i] = r.e
	}
	return out
}

// DrawWinners walks order (draw order) giving units: an entry wins when
// its qty fits in the units left. The rest are the waiting list, in
// order.
func DrawWinners(order []LotteryEntry, units int64) (winners, waiting []LotteryEntry) {
	for i, e := range order {
		if units <= 0 {
			return winners, append(waiting, order[i:]...)
		}
		if e.Qty <= units {
			units -= e.Qty
			winners = append(winners, e)
		} else {
			waiting = append(waiting, e)
		}
	}
	return winners, waiting
}

// Award is what the draw makes of a drawn winner's reservation.
type Award int

const (
	AwardWon    Award = iota + 1 // her units are reserved
	AwardPassed                  // refused (no units left for her): she stays on the waiting list
	AwardWait                    // the stock store does not hold the sale: the draw stops and runs again
)

// AwardOf decides a drawn winner's reservation by its outcome. A draw is
// due only once the sale has started, so "not started" means the stock
// store does not hold the sale (never loaded, or lost and not yet put
// back): passing her over would publish a winner who reads "lost", so the
// draw waits for the sale instead.
func AwardOf(o Outcome) Award {
	switch {
	case o.Claimed():
		return AwardWon
	case o == OutcomeNotStarted:
		return AwardWait
	}
	return AwardPassed
}

// DrawPublished is what GET /api/v1/sales/{id}/draw publishes.
type DrawPublished struct {
	Commitment string   `json:"commitment"`
	Seed       string   `json:"seed,omitempty"` // after the draw only
	Stock      int64    `json:"stock"`
	Entrants   int64    `json:"entrants"`
	Drawn      bool     `json:"drawn"`
	Winners    []string `json:"winners"` // entry ids, in draw order
}

// VerifyDraw recomputes a published draw from its entry list and returns
// the winners it computed.
func VerifyDraw(d DrawPublished, entries []LotteryEntry) ([]LotteryEntry, error) {
	if !d.Drawn || d.Seed == "" {
		return nil, fmt.Errorf("the draw has not run: no seed to verify")
	}
	if DrawCommitment(d.Seed) != d.Commitment {
		return nil, fmt.Errorf("the seed does not match the commitment: SHA-256(seed) = %s, published %s", DrawCommitment(d.Seed), d.Commitment)
	}
	if int64(len(entries)) != d.Entrants {
		return nil, fmt.Errorf("the entry list has %d entries, the draw counted %d", len(entries), d.Entrants)
	}
	winners, _ := DrawWinners(DrawOrder(d.Seed, entries), d.Stock)
	if len(winners) != len(d.Winners) {
		return winners, fmt.Errorf("recomputed %d winners, published %d", len(winners), len(d.Winners))
	}
	for i, w := range winners {
		if w.ID != d.Winners[i] {
			return winners, fmt.Errorf("winner %d: recomputed %s, published %s", i+1, w.ID, d.Winners[i])
		}
	}
	return winners, nil
}

// EntryStatus is a lottery entrant's result.
type EntryStatus string

const (
	EntryEntered EntryStatus = "entered" // the draw has not run yet
	EntryWon     EntryStatus = "won"
	EntryLost    EntryStatus = "lost"
)

// EntryStatusOf: entered until the draw ran, then won or lost.
func EntryStatusOf(drawn, won bool) EntryStatus {
	switch {
	case !drawn:
		return EntryEntered
	case won:
		return EntryWon
	}
	return EntryLost
}

// DrawRecord is a lottery's draw as the database keeps it.
type DrawRecord struct {
	SaleID   string
	Seed     string    // hex; secret until DrawnAt is set
	DrawnAt  time.Time // zero until the draw finished
	Entrants int64
	Stock    int64
	Winners  []string // entry ids in draw order
}

// Drawn reports whether the draw has finished.
func (d DrawRecord) Drawn() bool { return !d.DrawnAt.IsZero() }

// Published is what the public may see of d: the seed only once drawn.
func (d DrawRecord) Published() DrawPublished {
	p := DrawPublished{Commitment: DrawCommitment(d.Seed), Drawn: d.Drawn(), Winners: []string{}}
	if p.Drawn {
		p.Seed, p.Stock, p.Entrants, p.Winners = d.Seed, d.Stock, d.Entrants, d.Winners
	}
	return p
}

// EntryRequest is one buyer's entry into a lottery.
type EntryRequest struct {
	EntryID string // a fresh id (NewEntryID), used only if the buyer has none
	UserID  string
	Qty     int64
	// RateChecks are decided in the entry's own stock-store call, as a
	// claim's are (ReserveRequest.RateChecks): refused by one, the entry is
	// not recorded and counts against none.
	RateChecks []RateCheck
}

// EntryResult answers an EntryRequest.
type EntryResult struct {
	Refused string       // ENOTSTARTED or EENDED by the stock store's clock, or ERATELIMITED
	Entry   LotteryEntry // this entry, or the buyer's earlier one
	New     bool         // this request made the entry
	// For ERATELIMITED: the index of the refusing RateCheck, and when it
	// would allow a request.
	RateLimitedBy int
	RetryAfter    time.Duration
}

// Enterer records lottery entries (internal/combiner, internal/repeats in front).
type Enterer interface {
	Enter(ctx context.Context, s *Sale, req EntryRequest) (EntryResult, error)
}
