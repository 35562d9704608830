package seckill

// A lottery's entries are kept twice: in the stock store, which answers
// a buyer's repeat and holds the draw's input, and in the database, which
// keeps them across a stock store that loses writes (a Redis restarted
// without its data, the embedded store after any restart). A buyer is told
// "entered" only once the database holds the entry, and where the two
// disagree the database wins: docs/fairness.md, "Entries are kept".

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

// EntriesReplaced is the entries of kept that differ from the ones asked
// to be kept (kept[i] answers asked[i]): those the stock store must be
// told of.
func EntriesReplaced(asked, kept []LotteryEntry) []LotteryEntry {
	var out []LotteryEntry
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
	inStock := make(map[string]LotteryEntry, len(stock))
	for _, e := range stock {
		inStock[e.UserID] = e
	}
	inDB := make(map[string]bool, len(kept))
	for _, e := range kept {
		inDB[e.UserID] = true
		if s, ok := inStock[e.UserID]; !ok || s != e {
			toStock = append(toStock, e)
		}
	}
	for _, e := range stock {
		if !inDB[e.UserID] {
			toKeep = append(toKeep, e)
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
