package servicetest

import (
	"slices"
	"strings"
)

// PageAfter is the keyset page that the ledger's *After reads return, for
// in-memory fakes of them: at most limit of rows, ordered by id, each
// with an id greater than after.
func PageAfter[T any](rows []*T, id func(*T) string, after string, limit int) []*T {
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b *T) int { return strings.Compare(id(a), id(b)) })
	var out []*T
	for _, r := range sorted {
		if id(r) > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out
}
