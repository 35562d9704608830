package httpapi

import (
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
)

// earlyFlags remembers, per sale, the start before which the stock store
// refused a claim "not started", and when it said so: the claims that
// follow are answered from memory while seckill.StillEarly holds, so a
// crowd pressing "buy" before the start costs no stock-store call. Only a
// sale the sale cache knows, whose start is ahead, is learned, so a flood
// of made-up ids adds nothing; a flag is dropped once it no longer holds.
type earlyFlags struct{ m sync.Map } // sale id -> earlyFlag

type earlyFlag struct{ startAt, learnedAt time.Time }

// learn notes that the stock store refused a claim of the sale starting
// at startAt as not started, at now.
func (f *earlyFlags) learn(saleID string, startAt, now time.Time) {
	if seckill.StillEarly(now, startAt, now) {
		f.m.Store(saleID, earlyFlag{startAt: startAt, learnedAt: now})
	}
}

// early reports whether a claim of the sale at now is answered "not
// started" from memory.
func (f *earlyFlags) early(saleID string, now time.Time) bool {
	v, ok := f.m.Load(saleID)
	if !ok {
		return false
	}
	fl := v.(earlyFlag)
	if seckill.StillEarly(now, fl.startAt, fl.learnedAt) {
		return true
	}
	f.m.CompareAndDelete(saleID, v)
	return false
}

// forget drops the sale's flag: the sale was changed here (its start may
// have moved), so the next claim asks the stock store.
func (f *earlyFlags) forget(saleID string) { f.m.Delete(saleID) }
