package seckill

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// AdmissionMode is how a sale decides who may buy (docs/fairness.md).
type AdmissionMode string

const (
	AdmitFirstCome AdmissionMode = "first_come" // the first requests to land take the stock
	AdmitLottery   AdmissionMode = "lottery"    // entries until EntriesCloseAt, then a draw
	AdmitQueue     AdmissionMode = "queue"      // a waiting room lets buyers in at AdmitPerSecond
)

// MaxAdmitPerSecond bounds a queue sale's admission rate.
const MaxAdmitPerSecond = 1_000_000

// Admission is a sale's admission rule. The zero value is first come.
type Admission struct {
	Mode           AdmissionMode `json:"mode"`
	EntriesCloseAt time.Time     `json:"entries_close_at,omitzero"`  // lottery
	AdmitPerSecond int64         `json:"admit_per_second,omitempty"` // queue
}

// Of returns the mode, first come when unset.
func (a Admission) Of() AdmissionMode {
	if a.Mode == "" {
		return AdmitFirstCome
	}
	return a.Mode
}

// FirstCome reports whether the sale is first come, first served.
func (a Admission) FirstCome() bool { return a.Of() == AdmitFirstCome }

// validate checks a against the sale s it belongs to.
func (a Admission) validate(s *Sale) error {
	switch a.Of() {
	case AdmitFirstCome:
		if !a.EntriesCloseAt.IsZero() || a.AdmitPerSecond != 0 {
			return Errorf(EINVALID, "admission: first_come takes no entries_close_at or admit_per_second")
		}
		return nil
	case AdmitLottery:
		switch {
		case a.AdmitPerSecond != 0:
			return Errorf(EINVALID, "admission: a lottery takes no admit_per_second")
		case a.EntriesCloseAt.IsZero():
			return Errorf(EINVALID, "admission: a lottery needs entries_close_at (RFC 3339)")
		case !a.EntriesCloseAt.After(s.StartAt) || !a.EntriesCloseAt.Before(s.EndAt):
			return Errorf(EINVALID, "admission: entries_close_at must be after start_at and before end_at")
		}
	case AdmitQueue:
		switch {
		case !a.EntriesCloseAt.IsZero():
			return Errorf(EINVALID, "admission: a queue takes no entries_close_at")
		case a.AdmitPerSecond < 1 || a.AdmitPerSecond > MaxAdmitPerSecond:
			return Errorf(EINVALID, "admission: admit_per_second must be between 1 and %d", MaxAdmitPerSecond)
		}
	default:
		return Errorf(EINVALID, "admission: mode must be first_come, lottery or queue")
	}
	if s.Buckets > 1 {
		return Errorf(EINVALID, "admission: a %s sale keeps its stock in one bucket", a.Mode)
	}
	return nil
}

// MarshalJSON shows the zero Admission as {"mode":"first_come"}.
func (a Admission) MarshalJSON() ([]byte, error) {
	type plain Admission
	p := plain(a)
	p.Mode = a.Of()
	return json.Marshal(p)
}

// UnmarshalJSON reads {"mode":"first_come"} as the zero Admission.
func (a *Admission) UnmarshalJSON(b []byte) error {
	type plain Admission
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = Admission(p)
	if *a == (Admission{Mode: AdmitFirstCome}) {
		*a = Admission{}
	}
	return nil
}

// EncodeAdmission is a's stored form: "" for first come, else its JSON.
func EncodeAdmission(a Admission) string {
	if a.FirstCome() {
		return ""
	}
	b, _ := json.Marshal(a) // plain fields: it cannot fail
	return string(b)
}

// DecodeAdmission reads EncodeAdmission's form. First come is the zero
// Admission, however it was written.
func DecodeAdmission(s string) (Admission, error) {
	var a Admission
	if s == "" {
		return a, nil
	}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return Admission{}, Errorf(EINVALID, "admission: %v", err)
	}
	a.EntriesCloseAt = a.EntriesCloseAt.UTC()
	if a.FirstCome() {
		return Admission{}, nil
	}
	return a, nil
}

// --- Lottery entry window ---

// EntryWindow decides whether a lottery entry made at now is accepted:
// nil, or ENOTSTARTED before the start, EENDED once entries closed.
func EntryWindow(s *Sale, now time.Time) error {
	switch {
	case s.Admission.Of() != AdmitLottery:
		return Errorf(EADMISSION, "this sale is %s: it takes no entries", s.Admission.Of())
	case now.Before(s.StartAt):
		return Errorf(ENOTSTARTED, "entries open at %s", s.StartAt.UTC().Format(time.RFC3339))
	case !now.Before(s.Admission.EntriesCloseAt):
		return Errorf(EENDED, "entries closed at %s", s.Admission.EntriesCloseAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// DrawDue reports whether a lottery sale's draw should run at now.
func DrawDue(s *Sale, now time.Time) bool {
	return s.Admission.Of() == AdmitLottery && !now.Before(s.Admission.EntriesCloseAt)
}

// --- Queue decisions ---

// DefaultQueueOpensBefore is how long before the start a queue sale's
// waiting room opens.
const DefaultQueueOpensBefore = 15 * time.Minute

// QueueWindow decides whether a buyer may join the waiting room at now: it
// opens opensBefore the start and closes when the sale ends.
func QueueWindow(s *Sale, now time.Time, opensBefore time.Duration) error {
	switch {
	case s.Admission.Of() != AdmitQueue:
		return Errorf(EADMISSION, "this sale is %s: it has no queue", s.Admission.Of())
	case now.Before(s.StartAt.Add(-opensBefore)):
		return Errorf(ENOTSTARTED, "the queue opens at %s", s.StartAt.Add(-opensBefore).UTC().Format(time.RFC3339))
	case !now.Before(s.EndAt):
		return Errorf(EENDED, "the sale has ended")
	}
	return nil
}

// QueueAdmitted is how many positions are admitted by now: the first at the
// start, then rate a second.
func QueueAdmitted(start, now time.Time, rate int64) int64 {
	if now.Before(start) || rate < 1 {
		return 0
	}
	d := now.Sub(start)
	return d.Nanoseconds()/int64(time.Second)*rate + (d.Nanoseconds()%int64(time.Second))*rate/int64(time.Second) + 1
}

// QueueStanding is what a buyer in the waiting room is told.
type QueueStanding struct {
	Position   int64 // 1-based
	Ahead      int64 // positions in front not yet admitted
	ETASeconds int64 // until admission; 0 once admitted
	Admitted   bool
}

// QueueStandingAt decides where position stands at now.
func QueueStandingAt(position int64, start, now time.Time, rate int64) QueueStanding {
	n := QueueAdmitted(start, now, rate)
	st := QueueStanding{Position: position, Admitted: position <= n}
	if st.Admitted {
		return st
	}
	st.Ahead = position - 1 - n
	if rate > 0 {
		wait := time.Duration(position-n) * time.Second / time.Duration(rate)
		if now.Before(start) {
			wait += start.Sub(now)
		}
		st.ETASeconds = int64((wait + time.Second - 1) / time.Second)
	}
	return st
}

// QueueScoreBase: early joiners get random scores below it (random order),
// later ones QueueScoreBase plus their arrival number, behind them.
const QueueScoreBase = 1 << 40

// --- Admission tickets ---

// AdmissionTickets signs queue tickets, "<expiry unix>.<hex HMAC-SHA256>",
// under a key every node shares: checking one calls no backend.
type AdmissionTickets struct{ key []byte }

// DefaultTicketTTL is how long an admission ticket stays valid.
const DefaultTicketTTL = 5 * time.Minute

// NewAdmissionTickets returns the signer of tickets under key.
func NewAdmissionTickets(key []byte) *AdmissionTickets {
	return &AdmissionTickets{key: append([]byte(nil), key...)}
}

func (t *AdmissionTickets) mac(saleID, userID string, exp int64) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte("ticket\x00" + saleID + "\x00" + userID + "\x00" + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// Issue returns a ticket for userID on saleID valid until expires.
func (t *AdmissionTickets) Issue(saleID, userID string, expires time.Time) string {
	exp := expires.Unix()
	return strconv.FormatInt(exp, 10) + "." + t.mac(saleID, userID, exp)
}

// Verify reports whether ticket admits userID to saleID at now.
func (t *AdmissionTickets) Verify(ticket, saleID, userID string, now time.Time) bool {
	exps, mac, ok := strings.Cut(ticket, ".")
	if !ok || len(exps) > 12 || len(mac) != 2*sha256.Size {
		return false
	}
	exp, err := strconv.ParseInt(exps, 10, 64)
	if err != nil || now.Unix() >= exp {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(t.mac(saleID, userID, exp)))
}

// QueueJoin is one buyer's request for a place in the waiting room.
type QueueJoin struct {
	UserID string
	IP     string // "" when unknown: no per-address cap
}

// QueueJoinResult answers a QueueJoin.
type QueueJoinResult struct {
	Refused  string // ERATELIMITED: the address holds its most places
	Position int64  // 1-based, as of the join
}
