package seckill

import (
	"fmt"
	"time"
)

// StockCheck is one look of the heal watcher (internal/heal) at a live sale.
// Sold is read before the stock store, so a claim between the reads shows in
// Reserved only, never in Sold alone.
type StockCheck struct {
	Prev      StockWatch // the last state seen; meaningful when Seen
	Seen      bool
	Now       StockWatch
	Sold      int64
	At        time.Time
	StaleHeal time.Duration // an older heal died with its node
	// Preheated: this node preheated the sale or saw it preheated, so the
	// stock store held it, whether or not a look saw it loaded since.
	Preheated bool
}

// StockLoss is what a StockCheck shows of lost writes.
type StockLoss uint8

const (
	StockFine      StockLoss = iota // nothing shows a loss
	StockNotLoaded                  // not preheated yet: nothing to compare
	StockVanished                   // the sale's keys are gone, though it was preheated, loaded or sold units
	// StockBelowSold: reserved below sold. A restore between the reads looks
	// the same for a moment: look again before healing.
	StockBelowSold
	StockSeqBack   // the reserve sequence went backwards
	StockHealStale // a heal began and was left unfinished
)

// JudgeStockStore applies the loss rules to one look at a sale, in order.
func JudgeStockStore(c StockCheck) StockLoss {
	switch {
	case !c.Now.Loaded && (c.Preheated || c.Seen && c.Prev.Loaded || c.Sold > 0):
		return StockVanished
	case !c.Now.Loaded:
		return StockNotLoaded
	case c.Now.Reserved < c.Sold:
		return StockBelowSold
	case c.Seen && c.Prev.Loaded && c.Now.Seq < c.Prev.Seq:
		return StockSeqBack
	case c.Now.Healing && c.At.Sub(c.Now.HealingSince) > c.StaleHeal:
		return StockHealStale
	}
	return StockFine
}

// Reason says l of c in words, for the heal's log line and alert.
func (l StockLoss) Reason(c StockCheck) string {
	switch l {
	case StockVanished:
		return "the sale's keys vanished"
	case StockBelowSold:
		return fmt.Sprintf("reserved %d is below the %d units the database sold", c.Now.Reserved, c.Sold)
	case StockSeqBack:
		return fmt.Sprintf("the reserve sequence went back from %d to %d", c.Prev.Seq, c.Now.Seq)
	case StockHealStale:
		return "a heal was left unfinished"
	}
	return ""
}

// HealShares is how many unreserved units each of a healed sale's buckets
// gets: what the database has not sold and no bucket holds, spread evenly
// (the first buckets one more). reserved[b] is bucket b's reserved units
// once the heal restored its records. Their sum never exceeds stock − sold:
// a record the database does not know yet holds its unit all the same.
func HealShares(stock, sold int64, reserved []int64) []int64 {
	held := int64(0)
	for _, r := range reserved {
		held += max(r, 0)
	}
	free := max(stock-max(held, sold), 0)
	k := int64(len(reserved))
	out := make([]int64, k)
	for b := range out {
		out[b] = free / k
		if int64(b) < free%k {
			out[b]++
		}
	}
	return out
}

// PreheatHeld reports whether a preheat that finds sale s missing from
// the stock store must load it held, as a heal left unfinished, rather
// than fresh: s is the database's row, and it counts units sold
// (persisted orders that were not given back). A fresh load would sell
// them again until the heal watcher noticed; held, the sale refuses
// claims (try later) until it is rebuilt from the database. This is a
// sale the stock store lost while no node that had it loaded was there
// to see it go: Redis restarted empty with the whole fleet, or a node
// joined before the others healed it. kept counts what else the database
// keeps of the sale that only a sale loaded before has (a lottery's
// entries, a waiting room's places): a sale that sold nothing yet but took
// entries or gave places was loaded too, and a fresh load would forget
// them until the draw.
func PreheatHeld(s *Sale, kept int64) bool { return s.Unsold < s.Stock || kept > 0 }
