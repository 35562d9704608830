package sqlstore

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill"
)

// TestCopyEntriesIsIdempotentAndReadsBack: a lottery's entries copied in
// several batches read back by buyer (with what they won) and by id;
// copying again adds nothing and takes a reservation won since; another
// sale's entries are apart; a buyer id differing only in case, or by a
// trailing space (one key under MySQL's PAD SPACE collations), is another
// buyer.
func TestCopyEntriesIsIdempotentAndReadsBack(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		st := NewEntryStore(db)
		entries := make([]seckill.LotteryEntry, entryBatch+7) // two statements
		for i := range entries {
			entries[i] = seckill.LotteryEntry{ID: seckill.NewEntryID(), UserID: fmt.Sprintf("buyer-%d", i), Qty: int64(1 + i%3)}
		}
		entries[1].UserID = "Buyer-0"
		entries[2].UserID = "buyer-0 "
		won := map[string]string{"buyer-0": "r-0", "buyer-5": "r-5"}
		if err := st.CopyEntries(ctx, "draw", entries, won); err != nil {
			t.Fatal(err)
		}
		other := []seckill.LotteryEntry{{ID: seckill.NewEntryID(), UserID: "buyer-0", Qty: 2}}
		if err := st.CopyEntries(ctx, "other", other, nil); err != nil {
			t.Fatal(err)
		}
		if n, w, err := st.EntryCounts(ctx, "draw"); err != nil || n != int64(len(entries)) || w != 2 {
			t.Fatalf("EntryCounts = %d, %d, %v; want %d, 2", n, w, err, len(entries))
		}
		won["buyer-9"] = "r-9" // the waiting list gave a unit since
		if err := st.CopyEntries(ctx, "draw", entries, won); err != nil {
			t.Fatal(err)
		}
		if n, w, err := st.EntryCounts(ctx, "draw"); err != nil || n != int64(len(entries)) || w != 3 {
			t.Fatalf("EntryCounts after copying again = %d, %d, %v; want %d, 3", n, w, err, len(entries))
		}
		for _, c := range []struct {
			user, res string
			e         seckill.LotteryEntry
		}{{"buyer-0", "r-0", entries[0]}, {"Buyer-0", "", entries[1]}, {"buyer-0 ", "", entries[2]}, {"buyer-9", "r-9", entries[9]}} {
			e, res, ok, err := st.ArchivedEntry(ctx, "draw", c.user)
			if err != nil || !ok || e != c.e || res != c.res {
				t.Errorf("ArchivedEntry(%s) = %+v %q %v %v; want %+v %q", c.user, e, res, ok, err, c.e, c.res)
			}
		}
		if _, _, ok, err := st.ArchivedEntry(ctx, "draw", "nobody"); ok || err != nil {
			t.Errorf("ArchivedEntry(nobody) = %v, %v", ok, err)
		}
		got, err := st.ArchivedEntries(ctx, "draw")
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(entries)
		slices.SortFunc(want, func(a, b seckill.LotteryEntry) int { return strings.Compare(a.ID, b.ID) })
		if !slices.Equal(got, want) {
			t.Errorf("ArchivedEntries: %d entries, not the %d copied by id", len(got), len(want))
		}
		if got, _ := st.ArchivedEntries(ctx, "other"); !slices.Equal(got, other) {
			t.Errorf("ArchivedEntries(other) = %+v", got)
		}
		if got, err := st.ArchivedWon(ctx, "draw"); err != nil || !maps.Equal(got, won) {
			t.Errorf("ArchivedWon = %v, %v; want %v", got, err, won)
		}
		if got, err := st.ArchivedWon(ctx, "other"); err != nil || len(got) != 0 {
			t.Errorf("ArchivedWon(other) = %v, %v; want none", got, err)
		}
	})
}
