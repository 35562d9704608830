package seckill_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func entry(id, user string, qty int64) seckill.LotteryEntry {
	return seckill.LotteryEntry{ID: id, UserID: user, Qty: qty}
}

func TestEntryToKeep(t *testing.T) {
	ann := entry("e1", "ann", 1)
	cases := []struct {
		name string
		r    seckill.EntryResult
		ok   bool
	}{
		{"new", seckill.EntryResult{Entry: ann, New: true}, true},
		{"the buyer's earlier entry", seckill.EntryResult{Entry: ann}, true},
		{"rate limited", seckill.EntryResult{Refused: seckill.ERATELIMITED}, false},
		{"try later", seckill.EntryResult{Refused: seckill.ETRYLATER}, false},
		{"closed", seckill.EntryResult{Refused: seckill.EENDED}, false},
		{"no entry", seckill.EntryResult{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := seckill.EntryToKeep(tc.r)
			if ok != tc.ok || (ok && e != tc.r.Entry) {
				t.Fatalf("EntryToKeep = %+v, %v; want %v", e, ok, tc.ok)
			}
		})
	}
}

func TestKeptAnswer(t *testing.T) {
	ann, bob := entry("e1", "ann", 1), entry("e2", "bob", 2)
	annBefore := entry("e9", "ann", 2) // the entry the database kept from before a loss
	cases := []struct {
		name string
		r    seckill.EntryResult
		kept seckill.LotteryEntry
		want seckill.EntryResult
	}{
		{"kept as answered, new", seckill.EntryResult{Entry: ann, New: true}, ann, seckill.EntryResult{Entry: ann, New: true}},
		{"kept as answered, a repeat", seckill.EntryResult{Entry: bob}, bob, seckill.EntryResult{Entry: bob}},
		{"the database's earlier entry wins, and is not new", seckill.EntryResult{Entry: ann, New: true}, annBefore, seckill.EntryResult{Entry: annBefore}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.KeptAnswer(tc.r, tc.kept); got != tc.want {
				t.Fatalf("KeptAnswer = %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestReplaced(t *testing.T) {
	ann, bob, annBefore := entry("e1", "ann", 1), entry("e2", "bob", 2), entry("e9", "ann", 1)
	cases := []struct {
		name        string
		asked, kept []seckill.LotteryEntry
		want        []seckill.LotteryEntry
	}{
		{"all kept", []seckill.LotteryEntry{ann, bob}, []seckill.LotteryEntry{ann, bob}, nil},
		{"one replaced", []seckill.LotteryEntry{ann, bob}, []seckill.LotteryEntry{annBefore, bob}, []seckill.LotteryEntry{annBefore}},
		{"none", nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.Replaced(tc.asked, tc.kept); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Replaced = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestLevelEntries(t *testing.T) {
	ann, bob, cat := entry("e1", "ann", 1), entry("e2", "bob", 2), entry("e3", "cat", 1)
	annOther := entry("e7", "ann", 1)
	cases := []struct {
		name          string
		stock, kept   []seckill.LotteryEntry
		toStock, keep []seckill.LotteryEntry
	}{
		{"level", []seckill.LotteryEntry{ann, bob}, []seckill.LotteryEntry{bob, ann}, nil, nil},
		{"the stock store lost everything", nil, []seckill.LotteryEntry{ann, bob}, []seckill.LotteryEntry{ann, bob}, nil},
		{"the stock store lost some", []seckill.LotteryEntry{bob}, []seckill.LotteryEntry{ann, bob, cat}, []seckill.LotteryEntry{ann, cat}, nil},
		{"an entry whose answer failed is kept", []seckill.LotteryEntry{ann, bob}, []seckill.LotteryEntry{ann}, nil, []seckill.LotteryEntry{bob}},
		{"the database wins a buyer both have", []seckill.LotteryEntry{annOther, cat}, []seckill.LotteryEntry{ann},
			[]seckill.LotteryEntry{ann}, []seckill.LotteryEntry{cat}},
		{"another qty is another entry", []seckill.LotteryEntry{entry("e1", "ann", 2)}, []seckill.LotteryEntry{ann}, []seckill.LotteryEntry{ann}, nil},
		{"both empty", nil, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			toStock, keep := seckill.LevelEntries(tc.stock, tc.kept)
			if !reflect.DeepEqual(toStock, tc.toStock) || !reflect.DeepEqual(keep, tc.keep) {
				t.Fatalf("LevelEntries = %v, %v; want %v, %v", toStock, keep, tc.toStock, tc.keep)
			}
		})
	}
}

func TestWonToRestore(t *testing.T) {
	cases := []struct {
		name          string
		inStock, kept map[string]string
		want          map[string]string
	}{
		{"level", map[string]string{"ann": "r1"}, map[string]string{"ann": "r1"}, nil},
		{"the stock store lost them", nil, map[string]string{"ann": "r1", "bob": "r2"}, map[string]string{"ann": "r1", "bob": "r2"}},
		{"the stock store lost one", map[string]string{"ann": "r1"}, map[string]string{"ann": "r1", "bob": "r2"}, map[string]string{"bob": "r2"}},
		{"the database's reservation wins", map[string]string{"ann": "r9"}, map[string]string{"ann": "r1"}, map[string]string{"ann": "r1"}},
		{"a winner only the stock store has is left", map[string]string{"cat": "r3"}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.WonToRestore(tc.inStock, tc.kept); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("WonToRestore = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestPlacesToKeep(t *testing.T) {
	ann, bob := seckill.QueuePlace{UserID: "ann", Score: 7, IP: "a"}, seckill.QueuePlace{UserID: "bob", Score: seckill.QueueScoreBase + 1}
	annInStock := seckill.QueuePlace{UserID: "ann", Score: 7} // the room does not know addresses
	cases := []struct {
		name        string
		stock, kept []seckill.QueuePlace
		want        []seckill.QueuePlace
	}{
		{"level", []seckill.QueuePlace{annInStock, bob}, []seckill.QueuePlace{bob, ann}, nil},
		{"the room lost everything", nil, []seckill.QueuePlace{ann, bob}, nil},
		{"a place whose answer failed is kept", []seckill.QueuePlace{annInStock, bob}, []seckill.QueuePlace{ann}, []seckill.QueuePlace{bob}},
		{"another place of a kept buyer is not", []seckill.QueuePlace{{UserID: "ann", Score: 99}}, []seckill.QueuePlace{ann}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.PlacesToKeep(tc.stock, tc.kept); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("PlacesToKeep = %v; want %v", got, tc.want)
			}
		})
	}
}

func TestPlaceToKeep(t *testing.T) {
	ann := seckill.QueuePlace{UserID: "ann", Score: 7}
	cases := []struct {
		name string
		r    seckill.QueueJoinResult
		ok   bool
	}{
		{"a place", seckill.QueueJoinResult{Position: 3, Place: ann}, true},
		{"the address's cap", seckill.QueueJoinResult{Refused: seckill.ERATELIMITED}, false},
		{"rate limited", seckill.QueueJoinResult{RateLimited: true}, false},
		{"try later", seckill.QueueJoinResult{Refused: seckill.ETRYLATER}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if p, ok := seckill.PlaceToKeep(tc.r); ok != tc.ok || (ok && p != tc.r.Place) {
				t.Fatalf("PlaceToKeep = %+v, %v; want %v", p, ok, tc.ok)
			}
		})
	}
}

func TestRoomCounts(t *testing.T) {
	base := int64(seckill.QueueScoreBase)
	places := []seckill.QueuePlace{
		{UserID: "ann", Score: 5, IP: "a"},
		{UserID: "bob", Score: 9, IP: "a"},
		{UserID: "cat", Score: base + 3, IP: "b"},
		{UserID: "dan", Score: base + 1},
	}
	perIP, arrivals := seckill.RoomCounts(places)
	if !reflect.DeepEqual(perIP, map[string]int64{"a": 2, "b": 1}) || arrivals != 3 {
		t.Fatalf("RoomCounts = %v, %d; want a:2 b:1, 3 arrivals", perIP, arrivals)
	}
	if perIP, arrivals := seckill.RoomCounts(places[:2]); len(perIP) != 1 || arrivals != 0 {
		t.Fatalf("RoomCounts of early places = %v, %d; want no arrival after the start", perIP, arrivals)
	}
}

func TestEntryFromCopy(t *testing.T) {
	cases := []struct {
		name              string
		ended, storeReady bool
		want              bool
	}{
		{"live sale, store whole: she has none", false, true, false},
		{"live sale, store lost or healing the sale", false, false, true},
		{"ended: the archive's copy", true, true, true},
		{"ended and its keys gone", true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.EntryFromCopy(tc.ended, tc.storeReady); got != tc.want {
				t.Fatalf("EntryFromCopy(%v, %v) = %v, want %v", tc.ended, tc.storeReady, got, tc.want)
			}
		})
	}
}

func TestPlaceMissed(t *testing.T) {
	cases := []struct {
		name             string
		storeReady, kept bool
		want             string
	}{
		{"store whole: no place", true, false, seckill.ENOTFOUND},
		{"store whole, a stale copy is not asked about", true, true, seckill.ENOTFOUND},
		{"store lost or heals the room, her place kept", false, true, seckill.ETRYLATER},
		{"store lost or heals the room, she never joined", false, false, seckill.ENOTFOUND},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.PlaceMissed(tc.storeReady, tc.kept); got != tc.want {
				t.Fatalf("PlaceMissed(%v, %v) = %q, want %q", tc.storeReady, tc.kept, got, tc.want)
			}
		})
	}
}

func TestEntriesSettled(t *testing.T) {
	const budget = 2 * time.Second
	hour := time.Hour
	cases := []struct {
		name                 string
		sinceClose, untilEnd time.Duration
		budget               time.Duration
		want                 bool
	}{
		{"no budget: at once", 0, hour, 0, true},
		{"at the close", 0, hour, budget, false},
		{"one budget on: a write may still land", budget, hour, budget, false},
		{"just short of two budgets", 2*budget - time.Millisecond, hour, budget, false},
		{"two budgets on", 2 * budget, hour, budget, true},
		{"long after", hour, hour, budget, true},
		{"a clock set back before the close", -hour, hour, budget, false},
		{"the sale ends in just over a budget", 0, budget + time.Millisecond, budget, false},
		{"one budget left before the end", 0, budget, budget, true},
		{"past the end", 0, -time.Second, budget, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := seckill.EntriesSettled(tc.sinceClose, tc.untilEnd, tc.budget); got != tc.want {
				t.Fatalf("EntriesSettled(%s, %s, %s) = %v; want %v", tc.sinceClose, tc.untilEnd, tc.budget, got, tc.want)
			}
		})
	}
}
