package ticket

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

func TestAdmissionTicketsSayWhyTheyAreRefused(t *testing.T) {
	tk := New([]byte("k1"))
	ticket := tk.Issue("s1", "alice", t0.Add(time.Minute))
	exp, rest, _ := strings.Cut(ticket, ".")
	later := strconv.FormatInt(t0.Add(time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name       string
		tickets    *Signer
		ticket     string
		sale, user string
		at         time.Time
		want       Problem
	}{
		{"valid", tk, ticket, "s1", "alice", t0, ""},
		{"valid to its last second", tk, ticket, "s1", "alice", t0.Add(time.Minute - time.Nanosecond), ""},
		{"expired", tk, ticket, "s1", "alice", t0.Add(time.Minute), Expired},
		{"another buyer", tk, ticket, "s1", "bob", t0, WrongBuyer},
		{"another sale", tk, ticket, "s2", "alice", t0, WrongSale},
		{"another key", New([]byte("k2")), ticket, "s1", "alice", t0, BadSignature},
		{"expiry pushed back", tk, later + "." + rest, "s1", "alice", t0.Add(2 * time.Minute), BadSignature},
		{"expiry not a number", tk, "x" + exp[1:] + "." + rest, "s1", "alice", t0, BadSignature},
		{"the old format, without tags", tk, exp + "." + ticket[strings.LastIndexByte(ticket, '.')+1:], "s1", "alice", t0, BadSignature},
		{"garbage", tk, "x", "s1", "alice", t0, BadSignature},
		{"none", tk, "", "s1", "alice", t0, Missing},
	} {
		if got := tc.tickets.Check(tc.ticket, tc.sale, tc.user, tc.at); got != tc.want {
			t.Errorf("%s: Check = %q, want %q", tc.name, got, tc.want)
		}
		if got := tc.tickets.Verify(tc.ticket, tc.sale, tc.user, tc.at); got != (tc.want == "") {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want == "")
		}
	}
}
