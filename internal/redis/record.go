package redis

import (
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// The records of the res hash, in the form record.lua describes: a
// reservation "<sale>.<26 base32 chars>" under the field of its last 26
// characters, "<qty>:<user>" (reserved at the id's own time) or
// "<qty>@<ms>:<user>", "-" in front once restored; records written before
// that form are under the whole id as "<status>:<qty>:<ms>:<user>".
// The compact form saves 41 of the 133 bytes a record took on Redis 7
// (TestRecordBytes). The idempotency hash stays as it is: its value
// ("<qty>:<26 chars>") fits the allocator's 32-byte class either way, and
// its field is the buyer's and the client's key, which only a hash would
// shorten, at the price of replays that could (rarely) collide.

// recordField is the res field of a reservation id written now.
func recordField(id string) string {
	if i := strings.LastIndexByte(id, '.'); i >= 0 {
		return id[i+1:]
	}
	return id
}

// recordFields are the fields a reservation's record may be under: the
// compact one, then the whole id of a record written before.
func recordFields(id string) []string {
	if f := recordField(id); f != id {
		return []string{f, id}
	}
	return []string{id}
}

// idOfField is the reservation id of a res field of saleID.
func idOfField(saleID, field string) string {
	if strings.IndexByte(field, '.') < 0 {
		return saleID + "." + field
	}
	return field
}

var idEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

// idTime is the millisecond time a reservation id carries (its first 48
// bits), as reserve.lua's id_ms reads it.
func idTime(id string) (time.Time, bool) {
	f := recordField(id)
	if len(f) != 26 {
		return time.Time{}, false
	}
	var b [10]byte
	if n, err := idEncoding.Decode(b[:], []byte(f[:16])); err != nil || n != 10 {
		return time.Time{}, false
	}
	ms := int64(binary.BigEndian.Uint64(append(b[:6:6], 0, 0)) >> 16)
	return time.UnixMilli(ms).UTC(), true
}

// parseRecord decodes the record rec of reservation id, in either form. A
// record that says nothing else right fails, naming it.
func parseRecord(id, rec string) (seckill.ReservationRecord, error) {
	bad := func() (seckill.ReservationRecord, error) {
		return seckill.ReservationRecord{}, fmt.Errorf("reservation %q: malformed record %q", id, rec)
	}
	r := seckill.ReservationRecord{ReservationID: id}
	var qtys, ms string
	if rec != "" && (rec[0] >= '0' && rec[0] <= '9' || rec[0] == '-') {
		rest, restored := strings.CutPrefix(rec, "-")
		head, user, ok := strings.Cut(rest, ":")
		if !ok || user == "" {
			return bad()
		}
		r.Restored, r.UserID = restored, user
		qtys, ms, _ = strings.Cut(head, "@")
		if ms == "" && strings.Contains(head, "@") {
			return bad()
		}
	} else {
		parts := strings.SplitN(rec, ":", 4)
		if len(parts) != 4 || parts[3] == "" {
			return bad()
		}
		switch parts[0] {
		case StatusActive:
		case StatusRestored:
			r.Restored = true
		default:
			return bad()
		}
		qtys, ms, r.UserID = parts[1], parts[2], parts[3]
		if ms == "" {
			return bad()
		}
	}
	qty, err := strconv.ParseInt(qtys, 10, 64)
	if err != nil || qty < 1 {
		return bad()
	}
	r.Qty = qty
	if ms == "" {
		at, ok := idTime(id)
		if !ok {
			return bad()
		}
		r.ReservedAt = at
		return r, nil
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return bad()
	}
	r.ReservedAt = time.UnixMilli(n).UTC()
	return r, nil
}
