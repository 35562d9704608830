package seckill

// A lottery's entries and a waiting room's places are kept twice: in the
// stock store, which answers a buyer's repeat, holds the draw's input and
// orders the room, and in the database, which keeps them across a stock
// store that loses writes (a Redis restarted without its data, the
// embedded store after any restart). A buyer is told "entered", or their
// position, only once the database holds it, and where the two disagree
// the database wins: docs/fairness.md, "Entries are kept" and "Places are
// kept".

import "time"

// EntryToKeep is the entry an answer holds, the new or the buyer's
// earlier one, which the database must keep before the buyer is told;
// ok is false for a refusal, which holds none.
func EntryToKeep(r EntryResult) (e LotteryEntry, ok bool) {
	return r.Entry, r.Refused == "" && r.Entry.ID != ""
}

// KeptAnswer is the answer to a buyer whose entry r held, once the
// database kept kept: r itself, or, when the database already had another
// entry of the buyer (the stock store lost it and made a new one), that
// one, which is not new: the buyer had entered before.
func KeptAnswer(r EntryResult, kept LotteryEntry) EntryResult {
	if kept == r.Entry {
		return r
	}
	return EntryResult{Entry: kept}
}

// Replaced is the values of kept that differ from the ones asked to be
// kept (kept[i] answers asked[i]): the database's entries or places the
// stock store must be told of.
func Replaced[T comparable](asked, kept []T) []T {
	var out []T
	for i, k := range kept {
		if k != asked[i] {
			out = append(out, k)
		}
	}
	return out
}

// LevelEntries compares a lottery's entries in the stock store with
// those the database keeps and says what each lacks: toStock, the
// database's entries the stock store lacks or holds otherwise (the
// database wins); toKeep, the stock store's entries of buyers the
// database has none of (an entry whose answer failed, which its buyer may
// yet read as entered). Both are in the order of their inputs.
func LevelEntries(stock, kept []LotteryEntry) (toStock, toKeep []LotteryEntry) {
	return level(stock, kept, func(e LotteryEntry) string { return e.UserID })
}

// PlacesToKeep is the places of a waiting room in the stock store whose
// buyers the database keeps none of (a join whose answer failed): a heal
// keeps them, then rebuilds the room from every place the database has.
func PlacesToKeep(stock, kept []QueuePlace) []QueuePlace {
	_, toKeep := level(stock, kept, func(p QueuePlace) string { return p.UserID })
	return toKeep
}

// level compares a buyer's values (one a buyer, by) in the stock store
// and in the database: see LevelEntries.
func level[T comparable](stock, kept []T, by func(T) string) (toStock, toKeep []T) {
	inStock := make(map[string]T, len(stock))
	for _, v := range stock {
		inStock[by(v)] = v
	}
	inDB := make(map[string]bool, len(kept))
	for _, v := range kept {
		inDB[by(v)] = true
		if s, ok := inStock[by(v)]; !ok || s != v {
			toStock = append(toStock, v)
		}
	}
	for _, v := range stock {
		if !inDB[by(v)] {
			toKeep = append(toKeep, v)
		}
	}
	return toStock, toKeep
}

// WonToRestore is the draw's results the database keeps (buyer ->
// reservation won) that the stock store lacks or holds otherwise: what a
// stock store that lost them must be told.
func WonToRestore(inStock, kept map[string]string) map[string]string {
	var out map[string]string
	for user, res := range kept {
		if inStock[user] != res {
			if out == nil {
				out = map[string]string{}
			}
			out[user] = res
		}
	}
	return out
}

// QueuePlace is a buyer's place in a queue sale's waiting room, as the
// database keeps it: its score in the room (QueueScoreBase) and the
// address it counts against ("" unknown).
type QueuePlace struct {
	UserID string
	Score  int64
	IP     string
}

// PlaceToKeep is the place a join's answer holds, new or the buyer's
// earlier one, which the database must keep before the buyer is told; ok
// is false for a refusal.
func PlaceToKeep(r QueueJoinResult) (p QueuePlace, ok bool) {
	return r.Place, r.Refused == "" && !r.RateLimited && r.Place.UserID != ""
}

// RoomCounts is what a waiting room counts besides its places, rebuilt
// from them all: the places each address holds, and the last arrival
// number given after the start (0: none).
func RoomCounts(places []QueuePlace) (perIP map[string]int64, arrivals int64) {
	perIP = map[string]int64{}
	for _, p := range places {
		if p.IP != "" {
			perIP[p.IP]++
		}
		if p.Score > QueueScoreBase {
			arrivals = max(arrivals, p.Score-QueueScoreBase)
		}
	}
	return perIP, arrivals
}

// EntryFromCopy reports whether a buyer's lottery entry that the stock
// store does not hold is read from the database's copy, which has every
// entry ever answered: once the sale has ended (its keys go after the
// archive), or while the store does not hold the sale whole (storeReady
// false: never loaded, lost, or being healed), when her entry may be one
// the heal has yet to put back. Otherwise she has none, and the database
// is not asked: a buyer who never entered costs no database read.
func EntryFromCopy(ended, storeReady bool) bool { return ended || !storeReady }

// PlaceMissed is the error code answering a buyer whose place the stock
// store does not hold: ETRYLATER while the store does not hold the sale
// whole and the database keeps her place (the heal puts the room back, and
// a rank needs the whole room), else ENOTFOUND.
func PlaceMissed(storeReady, kept bool) string {
	if !storeReady && kept {
		return ETRYLATER
	}
	return ENOTFOUND
}

// EntriesSettled reports whether a lottery's draw, which closed the
// entries sinceClose ago, may read them with untilEnd left before the sale
// ends: once every entry answered "entered" is in the database, where the
// draw reads what a loss of Redis's last writes would take. An entry is
// answered only after the database holds it. Its script ran before the
// close, and each of its two batched stages (the script, then the write)
// ends within the request budget of its start, so the last answered entry
// was written within two budgets of the close. A sale that ends sooner is
// drawn once one budget is left before its end, for the winners' claims:
// a draw that never runs would fail every entrant, where reading early
// misses only an entry that Redis also lost in that instant. A budget of
// zero reads at once.
func EntriesSettled(sinceClose, untilEnd, budget time.Duration) bool {
	return budget <= 0 || sinceClose >= 2*budget || untilEnd <= budget
}
