package seckill_test

import (
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestJudgeStockStore(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	loaded := func(reserved, seq int64) seckill.StockWatch {
		return seckill.StockWatch{Loaded: true, Total: 100, Reserved: reserved, Seq: seq}
	}
	healing := func(since time.Duration) seckill.StockWatch {
		w := loaded(10, 5)
		w.Healing, w.HealingSince = true, at.Add(-since)
		return w
	}
	for _, c := range []struct {
		name string
		prev seckill.StockWatch
		seen bool
		now  seckill.StockWatch
		sold int64
		want seckill.StockLoss
		// preheated: this node preheated the sale (StockCheck.Preheated)
		preheated bool
	}{
		{"not preheated, nothing sold: nothing to compare", seckill.StockWatch{}, false, seckill.StockWatch{}, 0, seckill.StockNotLoaded, false},
		{"keys gone from a preheated sale before any look, nothing sold", seckill.StockWatch{}, false, seckill.StockWatch{}, 0, seckill.StockVanished, true},
		{"a preheated sale loaded, nothing sold", seckill.StockWatch{}, false, loaded(0, 0), 0, seckill.StockFine, true},
		{"keys gone after being seen loaded", loaded(10, 5), true, seckill.StockWatch{}, 0, seckill.StockVanished, false},
		{"keys gone while the database sold units", seckill.StockWatch{}, false, seckill.StockWatch{}, 3, seckill.StockVanished, false},
		{"reserved below sold", loaded(10, 5), true, loaded(8, 6), 9, seckill.StockBelowSold, false},
		{"reserved equal to sold is fine", loaded(10, 5), true, loaded(9, 6), 9, seckill.StockFine, false},
		{"the sequence went back", loaded(10, 7), true, loaded(12, 6), 9, seckill.StockSeqBack, false},
		{"a first look cannot see the sequence go back", seckill.StockWatch{}, false, loaded(12, 6), 9, seckill.StockFine, false},
		{"a heal past its time died with its node", loaded(10, 5), true, healing(time.Minute), 9, seckill.StockHealStale, false},
		{"a heal in its time is left alone", loaded(10, 5), true, healing(time.Second), 9, seckill.StockFine, false},
		{"vanished comes before a stale heal", loaded(10, 5), true, seckill.StockWatch{Healing: true}, 9, seckill.StockVanished, false},
	} {
		check := seckill.StockCheck{Prev: c.prev, Seen: c.seen, Now: c.now, Sold: c.sold, At: at, StaleHeal: 12 * time.Second, Preheated: c.preheated}
		if got := seckill.JudgeStockStore(check); got != c.want {
			t.Errorf("%s: JudgeStockStore = %d, want %d", c.name, got, c.want)
		}
		if got := seckill.JudgeStockStore(check); (got == seckill.StockFine || got == seckill.StockNotLoaded) != (got.Reason(check) == "") {
			t.Errorf("%s: verdict %d with reason %q", c.name, got, got.Reason(check))
		}
	}
}

func TestHealSharesNeverGiveMoreThanTheDatabaseLeft(t *testing.T) {
	for _, c := range []struct {
		name     string
		stock    int64
		sold     int64
		reserved []int64
		want     []int64
	}{
		{"nothing sold: an even split", 10, 0, []int64{0, 0, 0}, []int64{4, 3, 3}},
		{"records of what was sold", 10, 4, []int64{2, 1, 1}, []int64{2, 2, 2}},
		{"records in flight hold units the database has not sold yet", 10, 4, []int64{4, 2, 1}, []int64{1, 1, 1}},
		{"fewer records than sold: the database's count wins", 10, 7, []int64{1, 0, 0}, []int64{1, 1, 1}},
		{"sold out", 10, 10, []int64{4, 3, 3}, []int64{0, 0, 0}},
		{"more held than stock: nothing, never negative", 10, 9, []int64{6, 6}, []int64{0, 0}},
		{"a negative count is no units", 10, 0, []int64{-3, 0}, []int64{5, 5}},
		{"one bucket", 5, 2, []int64{2}, []int64{3}},
	} {
		got := seckill.HealShares(c.stock, c.sold, c.reserved)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: HealShares(%d, %d, %v) = %v, want %v", c.name, c.stock, c.sold, c.reserved, got, c.want)
		}
		var free int64
		for _, n := range got {
			free += n
		}
		if free > c.stock-c.sold {
			t.Errorf("%s: %d unreserved units, more than the %d the database left", c.name, free, c.stock-c.sold)
		}
	}
}

func TestPreheatHeld(t *testing.T) {
	for _, c := range []struct {
		name                string
		stock, unsold, kept int64
		want                bool
	}{
		{"a new sale, or every order given back: nothing sold", 10, 10, 0, false},
		{"units sold", 10, 7, 0, true},
		{"sold out", 10, 0, 0, true},
		{"nothing sold, but entries or places kept", 10, 10, 3, true},
	} {
		if got := seckill.PreheatHeld(&seckill.Sale{Stock: c.stock, Unsold: c.unsold}, c.kept); got != c.want {
			t.Errorf("%s: PreheatHeld = %v, want %v", c.name, got, c.want)
		}
	}
}
