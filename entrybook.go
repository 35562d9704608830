package seckill

// A lottery's entries are kept twice: in the stock store, which answers
// a buyer's repeat and holds the draw's input, and in the database, which
// keeps them across a stock store that loses writes (a Redis restarted
// without its data, the embedded store after any restart). A buyer is told
// "entered" only once the database holds the entry, and where the two
// disagree the database wins: docs/fairness.md, "Entries are kept".

// EntriesToKeep is the entries that results (answers of one batch) hold:
// every result that is not refused, new or the buyer's earlier entry.
// Results[i] is the entry of want[i], at index at[i]: KeptAnswers puts the
// database's answer back in its place.
func EntriesToKeep(results []EntryResult) (want []LotteryEntry, at []int) {
	for i, r := range results {
		if r.Refused == "" && r.Entry.ID != "" {
			want = append(want, r.Entry)
			at = append(at, i)
		}
	}
	return want, at
}

// KeptAnswers answers results with the entries the database kept:
// kept[k] is the database's entry of the buyer of results[at[k]], the one
// the stock store answered or, when the buyer already had another (the
// stock store lost it), that one. A result whose entry the database
// replaced is no longer new: the buyer had entered before. fix is the
// entries the stock store must be told of.
func KeptAnswers(results []EntryResult, at []int, kept []LotteryEntry) (answers []EntryResult, fix []LotteryEntry) {
	answers = results
	for k, i := range at {
		if kept[k] == results[i].Entry {
			continue
		}
		if fix == nil {
			answers = append([]EntryResult(nil), results...)
		}
		answers[i] = EntryResult{Entry: kept[k]}
		fix = append(fix, kept[k])
	}
	return answers, fix
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
