package sqlstore

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

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
			e, res, ok, err := st.KeptEntry(ctx, "draw", c.user)
			if err != nil || !ok || e != c.e || res != c.res {
				t.Errorf("KeptEntry(%s) = %+v %q %v %v; want %+v %q", c.user, e, res, ok, err, c.e, c.res)
			}
		}
		if _, _, ok, err := st.KeptEntry(ctx, "draw", "nobody"); ok || err != nil {
			t.Errorf("KeptEntry(nobody) = %v, %v", ok, err)
		}
		got, err := st.KeptEntries(ctx, "draw")
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(entries)
		slices.SortFunc(want, func(a, b seckill.LotteryEntry) int { return strings.Compare(a.ID, b.ID) })
		if !slices.Equal(got, want) {
			t.Errorf("KeptEntries: %d entries, not the %d copied by id", len(got), len(want))
		}
		if got, _ := st.KeptEntries(ctx, "other"); !slices.Equal(got, other) {
			t.Errorf("KeptEntries(other) = %+v", got)
		}
		if got, err := st.KeptWon(ctx, "draw"); err != nil || !maps.Equal(got, won) {
			t.Errorf("KeptWon = %v, %v; want %v", got, err, won)
		}
		if got, err := st.KeptWon(ctx, "other"); err != nil || len(got) != 0 {
			t.Errorf("KeptWon(other) = %v, %v; want none", got, err)
		}
	})
}

// TestKeepEntriesKeepsTheFirstEntryOfEachBuyer: entries kept as they are
// made (two statements' worth) read back as kept; keeping them again, or
// another entry of a buyer who has one (a stock store that lost the first
// made it), answers the buyer's first entry and changes nothing; new
// buyers in the same batch are written; a buyer id differing by a
// trailing space is another buyer; the archiver's copy then only adds
// what the draw gave.
func TestKeepEntriesKeepsTheFirstEntryOfEachBuyer(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		st := NewEntryStore(db)
		first := make([]seckill.LotteryEntry, entryBatch+3)
		for i := range first {
			first[i] = seckill.LotteryEntry{ID: seckill.NewEntryID(), UserID: fmt.Sprintf("buyer-%d", i), Qty: int64(1 + i%2)}
		}
		kept, err := st.KeepEntries(ctx, "keep", first)
		if err != nil || !slices.Equal(kept, first) {
			t.Fatalf("KeepEntries of new entries = %d kept, %v; want all %d as given", len(kept), err, len(first))
		}
		if kept, err = st.KeepEntries(ctx, "keep", first[:4]); err != nil || !slices.Equal(kept, first[:4]) {
			t.Fatalf("KeepEntries again = %v, %v; want the same entries", kept, err)
		}
		again := []seckill.LotteryEntry{
			{ID: seckill.NewEntryID(), UserID: "buyer-1", Qty: 1},   // has first[1]
			{ID: seckill.NewEntryID(), UserID: "newcomer", Qty: 2},  // new
			{ID: seckill.NewEntryID(), UserID: "buyer-1 ", Qty: 1},  // another buyer
			{ID: seckill.NewEntryID(), UserID: "buyer-502", Qty: 2}, // in the second statement's rows
		}
		want := []seckill.LotteryEntry{first[1], again[1], again[2], first[502]}
		if kept, err = st.KeepEntries(ctx, "keep", again); err != nil || !slices.Equal(kept, want) {
			t.Fatalf("KeepEntries over earlier entries = %+v, %v;\nwant %+v", kept, err, want)
		}
		if kept, err = st.KeepEntries(ctx, "other", again[:1]); err != nil || !slices.Equal(kept, again[:1]) {
			t.Fatalf("KeepEntries of another sale = %+v, %v; want its own", kept, err)
		}
		all, err := st.KeptEntries(ctx, "keep")
		if err != nil || len(all) != len(first)+2 {
			t.Fatalf("KeptEntries = %d, %v; want %d", len(all), err, len(first)+2)
		}
		if err := st.CopyEntries(ctx, "keep", first[:2], map[string]string{"buyer-0": "r-0"}); err != nil {
			t.Fatalf("CopyEntries after KeepEntries: %v", err)
		}
		if _, err := st.KeepEntries(ctx, "keep", first[:1]); err != nil {
			t.Fatal(err)
		}
		if e, res, ok, err := st.KeptEntry(ctx, "keep", "buyer-0"); err != nil || !ok || e.ID != first[0].ID || res != "r-0" {
			t.Fatalf("buyer-0 after the copy and a keep = %+v %q %v, %v; want the first entry and r-0", e, res, ok, err)
		}
		// A copy from a stock store that lost the draw's results (no
		// winners) does not unwin anyone.
		if err := st.CopyEntries(ctx, "keep", first[:2], nil); err != nil {
			t.Fatal(err)
		}
		if won, err := st.KeptWon(ctx, "keep"); err != nil || len(won) != 1 || won["buyer-0"] != "r-0" {
			t.Fatalf("winners after a copy without them = %v, %v; want buyer-0's r-0 kept", won, err)
		}
	})
}

// TestKeepPlacesKeepsTheFirstPlaceOfEachBuyer: places kept as they are
// given (two statements' worth) read back; another place of a buyer who
// has one answers the first and changes nothing; new buyers in the same
// batch are written; a buyer id differing by a trailing space is
// another buyer; another sale's places are apart, also when a sale's are
// counted and forgotten.
func TestKeepPlacesKeepsTheFirstPlaceOfEachBuyer(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		st := NewPlaceStore(db)
		first := make([]seckill.QueuePlace, keptBatch+3)
		for i := range first {
			first[i] = seckill.QueuePlace{UserID: fmt.Sprintf("buyer-%d", i), Score: int64(i) * 1_000_003 % seckill.QueueScoreBase, IP: fmt.Sprintf("10.0.0.%d", i%7)}
		}
		first[3].IP = ""
		kept, err := st.KeepPlaces(ctx, "room", first)
		if err != nil || !slices.Equal(kept, first) {
			t.Fatalf("KeepPlaces of new places = %d kept, %v; want all %d as given", len(kept), err, len(first))
		}
		again := []seckill.QueuePlace{
			{UserID: "buyer-1", Score: seckill.QueueScoreBase + 1},   // has first[1]
			{UserID: "newcomer", Score: seckill.QueueScoreBase + 2},  // new
			{UserID: "buyer-1 ", Score: seckill.QueueScoreBase + 3},  // another buyer
			{UserID: "buyer-502", Score: seckill.QueueScoreBase + 4}, // in the second statement's rows
		}
		want := []seckill.QueuePlace{first[1], again[1], again[2], first[502]}
		if kept, err = st.KeepPlaces(ctx, "room", again); err != nil || !slices.Equal(kept, want) {
			t.Fatalf("KeepPlaces over earlier places = %+v, %v;\nwant %+v", kept, err, want)
		}
		if kept, err = st.KeepPlaces(ctx, "other", again[:1]); err != nil || !slices.Equal(kept, again[:1]) {
			t.Fatalf("KeepPlaces of another sale = %+v, %v; want its own", kept, err)
		}
		all, err := st.Places(ctx, "room")
		if err != nil || len(all) != len(first)+2 {
			t.Fatalf("Places = %d, %v; want %d", len(all), err, len(first)+2)
		}
		byUser := map[string]seckill.QueuePlace{}
		for _, p := range all {
			byUser[p.UserID] = p
		}
		for _, p := range append(first, again[1], again[2]) {
			if byUser[p.UserID] != p {
				t.Errorf("Places has %+v for %s; want %+v", byUser[p.UserID], p.UserID, p)
			}
		}
		if n, err := st.PlaceCount(ctx, "room"); err != nil || n != int64(len(first)+2) {
			t.Fatalf("PlaceCount = %d, %v; want %d", n, err, len(first)+2)
		}
		for _, c := range []struct {
			sale, user string
			want       bool
		}{{"room", "buyer-1", true}, {"room", "newcomer", true}, {"room", "buyer-1 ", true}, {"room", "nobody", false}, {"other", "newcomer", false}} {
			if got, err := st.HasPlace(ctx, c.sale, c.user); err != nil || got != c.want {
				t.Fatalf("HasPlace(%s, %q) = %v, %v; want %v", c.sale, c.user, got, err, c.want)
			}
		}
		if n, err := st.ForgetPlaces(ctx, "room"); err != nil || n != int64(len(first)+2) {
			t.Fatalf("ForgetPlaces = %d, %v; want %d", n, err, len(first)+2)
		}
		if n, err := st.PlaceCount(ctx, "room"); err != nil || n != 0 {
			t.Fatalf("PlaceCount after ForgetPlaces = %d, %v; want 0", n, err)
		}
		if n, err := st.PlaceCount(ctx, "other"); err != nil || n != 1 {
			t.Fatalf("PlaceCount of another sale = %d, %v; want its 1", n, err)
		}
	})
}

// TestKeepPaceKeepsTheLatest: an adaptive queue sale's pace reads back as
// kept; a later one replaces it; an older one (a slower node's) does not;
// another sale's is apart; a sale without one reads none.
func TestKeepPaceKeepsTheLatest(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		st := NewPlaceStore(db)
		at := time.UnixMilli(1_900_000_000_000)
		if _, ok, err := st.Pace(ctx, "room"); err != nil || ok {
			t.Fatalf("Pace of a sale without one = %v, %v; want none", ok, err)
		}
		first := seckill.QueuePace{Admitted: 120.5, At: at, Rate: 20}
		later := seckill.QueuePace{Admitted: 131.25, At: at.Add(time.Second), Rate: 10}
		older := seckill.QueuePace{Admitted: 99, At: at.Add(-time.Second), Rate: 50}
		for _, step := range []struct {
			name string
			keep seckill.QueuePace
			want seckill.QueuePace
		}{{"first", first, first}, {"later", later, later}, {"older", older, later}} {
			if err := st.KeepPace(ctx, "room", step.keep); err != nil {
				t.Fatal(err)
			}
			got, ok, err := st.Pace(ctx, "room")
			if err != nil || !ok || got.Admitted != step.want.Admitted || !got.At.Equal(step.want.At) || got.Rate != step.want.Rate {
				t.Fatalf("after keeping the %s pace: %+v, %v, %v; want %+v", step.name, got, ok, err, step.want)
			}
		}
		if err := st.KeepPace(ctx, "other", older); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := st.Pace(ctx, "room"); got.Rate != later.Rate {
			t.Fatalf("another sale's pace changed this one's: %+v", got)
		}
	})
}
