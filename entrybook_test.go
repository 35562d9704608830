package seckill_test

import (
	"reflect"
	"testing"

	"github.com/seckill-dev/seckill"
)

func entry(id, user string, qty int64) seckill.LotteryEntry {
	return seckill.LotteryEntry{ID: id, UserID: user, Qty: qty}
}

func TestEntriesToKeep(t *testing.T) {
	ann, bob := entry("e1", "ann", 1), entry("e2", "bob", 2)
	cases := []struct {
		name    string
		results []seckill.EntryResult
		want    []seckill.LotteryEntry
		at      []int
	}{
		{"none", nil, nil, nil},
		{"new and repeat both kept", []seckill.EntryResult{{Entry: ann, New: true}, {Entry: bob}}, []seckill.LotteryEntry{ann, bob}, []int{0, 1}},
		{"refusals hold nothing", []seckill.EntryResult{{Refused: seckill.ERATELIMITED}, {Entry: bob, New: true}, {Refused: seckill.EENDED}},
			[]seckill.LotteryEntry{bob}, []int{1}},
		{"all refused", []seckill.EntryResult{{Refused: seckill.ETRYLATER}, {Refused: seckill.ENOTSTARTED}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, at := seckill.EntriesToKeep(tc.results)
			if !reflect.DeepEqual(want, tc.want) || !reflect.DeepEqual(at, tc.at) {
				t.Fatalf("EntriesToKeep = %v at %v; want %v at %v", want, at, tc.want, tc.at)
			}
		})
	}
}

func TestKeptAnswers(t *testing.T) {
	ann, bob := entry("e1", "ann", 1), entry("e2", "bob", 2)
	annBefore := entry("e9", "ann", 2) // the entry the database kept from before a loss
	refused := seckill.EntryResult{Refused: seckill.ERATELIMITED}
	cases := []struct {
		name    string
		results []seckill.EntryResult
		at      []int
		kept    []seckill.LotteryEntry
		want    []seckill.EntryResult
		fix     []seckill.LotteryEntry
	}{
		{"all kept as answered", []seckill.EntryResult{{Entry: ann, New: true}, refused, {Entry: bob}}, []int{0, 2},
			[]seckill.LotteryEntry{ann, bob}, []seckill.EntryResult{{Entry: ann, New: true}, refused, {Entry: bob}}, nil},
		{"the database's earlier entry wins, and is not new", []seckill.EntryResult{refused, {Entry: ann, New: true}, {Entry: bob, New: true}}, []int{1, 2},
			[]seckill.LotteryEntry{annBefore, bob}, []seckill.EntryResult{refused, {Entry: annBefore}, {Entry: bob, New: true}}, []seckill.LotteryEntry{annBefore}},
		{"nothing to keep", []seckill.EntryResult{refused}, nil, nil, []seckill.EntryResult{refused}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := append([]seckill.EntryResult(nil), tc.results...)
			got, fix := seckill.KeptAnswers(tc.results, tc.at, tc.kept)
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(fix, tc.fix) {
				t.Fatalf("KeptAnswers = %v, fix %v; want %v, fix %v", got, fix, tc.want, tc.fix)
			}
			if !reflect.DeepEqual(tc.results, orig) {
				t.Fatalf("KeptAnswers changed its input: %v, was %v", tc.results, orig)
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
