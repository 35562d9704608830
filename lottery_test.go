package seckill_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill"
)

// The known answer below was computed outside Go (Python's hmac and
// hashlib), so the rule in docs/fairness.md is checked, not this code
// against itself.
const knownSeed = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func knownEntries() []seckill.LotteryEntry {
	var es []seckill.LotteryEntry
	for i := range 6 {
		es = append(es, seckill.LotteryEntry{ID: fmt.Sprintf("e0000000000000000000000000%d", i), Qty: 1})
	}
	return es
}

func ids(es []seckill.LotteryEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func TestDrawCommitmentIsSHA256OfTheSeedBytes(t *testing.T) {
	if got, want := seckill.DrawCommitment(knownSeed), "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd"; got != want {
		t.Fatalf("commitment = %s, want %s", got, want)
	}
	if got := seckill.DrawCommitment("not hex"); got != "" {
		t.Fatalf("commitment of a non-hex seed = %q, want empty", got)
	}
}

func TestDrawOrderSortsByHMACOfTheEntryID(t *testing.T) {
	in := knownEntries()
	got := ids(seckill.DrawOrder(knownSeed, in))
	want := []string{"e00000000000000000000000005", "e00000000000000000000000001", "e00000000000000000000000000",
		"e00000000000000000000000003", "e00000000000000000000000004", "e00000000000000000000000002"}
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want %v", got, want)
	}
	if in[0].ID != "e00000000000000000000000000" {
		t.Fatal("DrawOrder changed its input")
	}
	// Another seed, another order.
	other := ids(seckill.DrawOrder(strings.Repeat("ff", 32), in))
	if slices.Equal(other, want) {
		t.Fatal("a different seed gave the same order")
	}
}

func TestDrawWinnersWalksTheOrderGivingUnitsThatFit(t *testing.T) {
	e := func(id string, qty int64) seckill.LotteryEntry { return seckill.LotteryEntry{ID: id, Qty: qty} }
	for _, tc := range []struct {
		name          string
		order         []seckill.LotteryEntry
		units         int64
		win, waitList string
	}{
		{"more units than entries", []seckill.LotteryEntry{e("a", 1), e("b", 2)}, 10, "a b", ""},
		{"exactly enough", []seckill.LotteryEntry{e("a", 1), e("b", 2), e("c", 1)}, 3, "a b", "c"},
		{"one that does not fit is passed over, not stopped at", []seckill.LotteryEntry{e("a", 2), e("b", 3), e("c", 1), e("d", 1)}, 3, "a c", "b d"},
		{"no units", []seckill.LotteryEntry{e("a", 1)}, 0, "", "a"},
		{"no entries", nil, 5, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			win, wait := seckill.DrawWinners(tc.order, tc.units)
			if got := strings.Join(ids(win), " "); got != tc.win {
				t.Errorf("winners = %q, want %q", got, tc.win)
			}
			if got := strings.Join(ids(wait), " "); got != tc.waitList {
				t.Errorf("waiting = %q, want %q", got, tc.waitList)
			}
		})
	}
}

func TestVerifyDrawRecomputesThePublishedWinners(t *testing.T) {
	entries := knownEntries()
	good := seckill.DrawPublished{
		Commitment: seckill.DrawCommitment(knownSeed), Seed: knownSeed, Stock: 2, Entrants: 6, Drawn: true,
		Winners: []string{"e00000000000000000000000005", "e00000000000000000000000001"},
	}
	if _, err := seckill.VerifyDraw(good, entries); err != nil {
		t.Fatalf("a true draw did not verify: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*seckill.DrawPublished)
		want string
	}{
		{"another seed", func(d *seckill.DrawPublished) { d.Seed = strings.Repeat("ab", 32) }, "commitment"},
		{"a swapped winner", func(d *seckill.DrawPublished) {
			d.Winners = []string{"e00000000000000000000000005", "e00000000000000000000000002"}
		}, "winner 2"},
		{"an extra winner", func(d *seckill.DrawPublished) { d.Winners = append(d.Winners, "e00000000000000000000000000") }, "recomputed 2 winners, published 3"},
		{"an entrant hidden", func(d *seckill.DrawPublished) { d.Entrants = 7 }, "entry list"},
		{"not drawn", func(d *seckill.DrawPublished) { d.Drawn, d.Seed = false, "" }, "not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := good
			d.Winners = slices.Clone(good.Winners)
			tc.edit(&d)
			_, err := seckill.VerifyDraw(d, entries)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one about %q", err, tc.want)
			}
		})
	}
}

func TestDrawIsUniformOverEntrants(t *testing.T) {
	// 200 draws of 1 unit among 4 entrants under fresh seeds: each should
	// win about 50 times; fewer than 20 would be a broken rank (p < 1e-6).
	entries := knownEntries()[:4]
	wins := map[string]int{}
	for range 200 {
		w, _ := seckill.DrawWinners(seckill.DrawOrder(seckill.NewDrawSeed(), entries), 1)
		wins[w[0].ID]++
	}
	for _, e := range entries {
		if wins[e.ID] < 20 {
			t.Fatalf("wins = %v: entry %s won %d of 200", wins, e.ID, wins[e.ID])
		}
	}
}

func TestEntryStatusOf(t *testing.T) {
	for _, tc := range []struct {
		drawn, won bool
		want       seckill.EntryStatus
	}{
		{false, false, seckill.EntryEntered},
		{false, true, seckill.EntryEntered},
		{true, true, seckill.EntryWon},
		{true, false, seckill.EntryLost},
	} {
		if got := seckill.EntryStatusOf(tc.drawn, tc.won); got != tc.want {
			t.Errorf("EntryStatusOf(%v, %v) = %s, want %s", tc.drawn, tc.won, got, tc.want)
		}
	}
}

func TestEntryIDs(t *testing.T) {
	id := seckill.NewEntryID()
	if !seckill.ValidEntryID(id) || id == seckill.NewEntryID() {
		t.Fatalf("NewEntryID = %q: invalid or repeated", id)
	}
	for _, bad := range []string{"", "x" + id[1:], id + "0", strings.ToLower(id), id[:26] + "I", id[:26] + "\xff", id[:26] + "U"} {
		if seckill.ValidEntryID(bad) {
			t.Errorf("ValidEntryID(%q) = true", bad)
		}
	}
}

func TestAwardOf(t *testing.T) {
	cases := []struct {
		o    seckill.Outcome
		want seckill.Award
	}{
		{seckill.OutcomeReserved, seckill.AwardWon},
		{seckill.OutcomeReplayed, seckill.AwardWon}, // a draw run again
		{seckill.OutcomeNotStarted, seckill.AwardWait},
		{seckill.OutcomeSoldOut, seckill.AwardPassed},
		{seckill.OutcomeLimitExceeded, seckill.AwardPassed},
		{seckill.OutcomeEnded, seckill.AwardPassed},
		{seckill.OutcomeKeyReused, seckill.AwardPassed},
	}
	for _, tc := range cases {
		t.Run(tc.o.String(), func(t *testing.T) {
			if got := seckill.AwardOf(tc.o); got != tc.want {
				t.Fatalf("AwardOf(%s) = %d, want %d", tc.o, got, tc.want)
			}
		})
	}
}
