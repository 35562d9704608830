package conformance

import (
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// The operators' list of failed orders (OrderStore.FailedOrders with a
// filter, and FailedOrderCounts): one sale's or all, by state, in pages.

// failedBase is a random instant of 2100: the failed orders of these
// subtests are newer than any other subtest's but testFailedOrders' (2101
// on), so a walk of every sale's list from the newest meets them early.
func failedBase() time.Time {
	return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rand.IntN(8000)) * time.Hour)
}

// recordFailed records failed orders of sale with the ids given, the i-th
// created at the i-th of ats, and returns them newest first as the list
// orders them: by CreatedAt, then reservation id in byte order, both
// descending.
func recordFailed(t *testing.T, orders seckill.OrderStore, sale string, ids []string, ats []time.Time) []*seckill.FailedOrder {
	t.Helper()
	var fs []*seckill.FailedOrder
	for i, id := range ids {
		f := &seckill.FailedOrder{ReservationID: id, SaleID: sale, UserID: "u" + id[len(id)-3:], Qty: 1,
			Reason: seckill.ReasonInsufficientStock + ": test", Attempts: 1, CreatedAt: ats[i]}
		if err := orders.RecordFailedOrder(t.Context(), f); err != nil {
			t.Fatalf("RecordFailedOrder %s: %v", id, err)
		}
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b *seckill.FailedOrder) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ReservationID, a.ReservationID)
	})
	return fs
}

// freshFailed returns n new reservation ids of sale and, for the i-th,
// base+after(i): what recordFailed takes.
func freshFailed(sale string, base time.Time, n int, after func(i int) time.Duration) ([]string, []time.Time) {
	ids, ats := make([]string, n), make([]time.Time, n)
	for i := range n {
		ids[i], ats[i] = seckill.NewReservationID(sale, base), base.Add(after(i))
	}
	return ids, ats
}

// walkFailed follows f's pages from its Before to the end, or until stop
// says the rows so far are enough; it fails the test on a row listed
// twice, a page longer than the limit, or an empty page with a next one.
func walkFailed(t *testing.T, orders seckill.OrderStore, f seckill.FailedOrderFilter, stop func([]*seckill.FailedOrder) bool) []*seckill.FailedOrder {
	t.Helper()
	var all []*seckill.FailedOrder
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatalf("FailedOrders(%+v): more than 10,000 pages", f)
		}
		page, next, err := orders.FailedOrders(t.Context(), f)
		if err != nil {
			t.Fatalf("FailedOrders(%+v): %v", f, err)
		}
		if len(page) > f.Limit || (len(page) == 0 && next != "") {
			t.Fatalf("FailedOrders(%+v): %d rows and next %q", f, len(page), next)
		}
		for _, r := range page {
			if seen[r.ReservationID] {
				t.Fatalf("FailedOrders(%+v): %s listed twice", f, r.ReservationID)
			}
			seen[r.ReservationID] = true
		}
		all = append(all, page...)
		if next == "" || (stop != nil && stop(all)) {
			return all
		}
		if len(page) < f.Limit {
			t.Errorf("FailedOrders(%+v): a page of %d rows, not the last", f, len(page))
		}
		f.Before = next
	}
}

func failedIDs(fs []*seckill.FailedOrder) string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ReservationID
	}
	return strings.Join(ids, " ")
}

// ofSale keeps the failed orders of sale.
func ofSale(fs []*seckill.FailedOrder, sale string) []*seckill.FailedOrder {
	var out []*seckill.FailedOrder
	for _, f := range fs {
		if f.SaleID == sale {
			out = append(out, f)
		}
	}
	return out
}

// testFailedOrderPages: one sale's failed orders, many of them recorded in
// the same millisecond, come in pages of every size newest first, each
// exactly once; another sale's newer ones are not among them; the list of
// every sale holds both, in the same order.
func testFailedOrderPages(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	_, orders := newStores(t)
	base := failedBase()
	a, b := servicetest.UniqueName("fpa_"), servicetest.UniqueName("fpb_")
	// Sale a: 13 failed orders in 5 milliseconds (ties of 3), plus three
	// dead letters' ids in the last millisecond that a collation other
	// than byte order would sort differently ("B" < "_" < "a" as bytes).
	ids, ats := freshFailed(a, base, 13, func(i int) time.Duration { return time.Duration(i/3) * time.Millisecond })
	for _, tail := range []string{"a", "B", "_"} {
		ids = append(ids, a+".dead-"+tail)
		ats = append(ats, base.Add(4*time.Millisecond))
	}
	wantA := recordFailed(t, orders, a, ids, ats)
	// Sale b: newer ones, and one in a millisecond of a's.
	ids, ats = freshFailed(b, base, 4, func(i int) time.Duration { return time.Duration(2+i*3) * time.Millisecond })
	wantB := recordFailed(t, orders, b, ids, ats)

	for _, limit := range []int{1, 2, 3, 4, 5, 15, 16, 17, seckill.MaxFailedOrderPage} {
		got := walkFailed(t, orders, seckill.FailedOrderFilter{SaleID: a, Limit: limit}, nil)
		if failedIDs(got) != failedIDs(wantA) {
			t.Errorf("sale a in pages of %d:\n got %s\nwant %s", limit, failedIDs(got), failedIDs(wantA))
		}
	}
	// A full last page has no next: the store looked one row further.
	page, next, err := orders.FailedOrders(t.Context(), seckill.FailedOrderFilter{SaleID: a, Limit: len(wantA)})
	if err != nil || len(page) != len(wantA) || next != "" {
		t.Errorf("sale a in one page of exactly its %d: %d rows, next %q, %v; want all, no next", len(wantA), len(page), next, err)
	} else {
		for i, f := range page {
			checkFailedOrder(t, f, wantA[i])
		}
	}
	for _, state := range []seckill.FailedOrderState{"", seckill.FailedAll, seckill.FailedOpen} {
		got := walkFailed(t, orders, seckill.FailedOrderFilter{SaleID: b, State: state, Limit: 3}, nil)
		if failedIDs(got) != failedIDs(wantB) {
			t.Errorf("sale b (state %q): %s, want %s", state, failedIDs(got), failedIDs(wantB))
		}
	}
	if got := walkFailed(t, orders, seckill.FailedOrderFilter{SaleID: a, State: seckill.FailedResolved, Limit: 5}, nil); len(got) != 0 {
		t.Errorf("sale a's resolved failed orders: %s, want none", failedIDs(got))
	}
	if got := walkFailed(t, orders, seckill.FailedOrderFilter{SaleID: servicetest.UniqueName("fpnone_"), Limit: 5}, nil); len(got) != 0 {
		t.Errorf("a sale without failed orders: %s, want none", failedIDs(got))
	}

	// Every sale's list, from the newest until past a's oldest: a's and
	// b's in one order, whatever else it holds.
	oldest := wantA[len(wantA)-1].CreatedAt
	all := walkFailed(t, orders, seckill.FailedOrderFilter{Limit: 4}, func(got []*seckill.FailedOrder) bool {
		return got[len(got)-1].CreatedAt.Before(oldest)
	})
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		if p.CreatedAt.Before(c.CreatedAt) || (p.CreatedAt.Equal(c.CreatedAt) && p.ReservationID <= c.ReservationID) {
			t.Errorf("every sale's list: %s (%v) before %s (%v)", p.ReservationID, p.CreatedAt, c.ReservationID, c.CreatedAt)
		}
	}
	if got := ofSale(all, a); failedIDs(got) != failedIDs(wantA) {
		t.Errorf("sale a in every sale's list:\n got %s\nwant %s", failedIDs(got), failedIDs(wantA))
	}
	if got := ofSale(all, b); failedIDs(got) != failedIDs(wantB) {
		t.Errorf("sale b in every sale's list: %s, want %s", failedIDs(got), failedIDs(wantB))
	}
}

// testFailedOrderBadQueries: a limit out of range, an unknown state and a
// cursor the store did not make are EINVALID.
func testFailedOrderBadQueries(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	_, orders := newStores(t)
	sale := servicetest.UniqueName("fpbad_")
	recordFailed(t, orders, sale, []string{seckill.NewReservationID(sale, time.Now()), seckill.NewReservationID(sale, time.Now())}, []time.Time{time.Now(), time.Now()})
	_, good, err := orders.FailedOrders(t.Context(), seckill.FailedOrderFilter{SaleID: sale, Limit: 1})
	if err != nil || good == "" {
		t.Fatalf("first page of 1 of 2: next %q, %v", good, err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	for name, f := range map[string]seckill.FailedOrderFilter{
		"limit 0":              {Limit: 0},
		"limit -1":             {Limit: -1},
		"limit above the most": {Limit: seckill.MaxFailedOrderPage + 1},
		"unknown state":        {State: "pending", Limit: 1},
		"state in capitals":    {State: "OPEN", Limit: 1},
		"cursor not base64":    {Before: "not a cursor!", Limit: 1},
		"cursor padded":        {Before: good + "=", Limit: 1},
		"cursor without colon": {Before: enc([]byte("1234")), Limit: 1},
		"cursor without id":    {Before: enc([]byte("1234:")), Limit: 1},
		"cursor without ms":    {Before: enc([]byte(":" + sale + ".x")), Limit: 1},
		"cursor ms not number": {Before: enc([]byte("12a:" + sale + ".x")), Limit: 1},
		"cursor id with NUL":   {Before: enc([]byte("1234:a\x00b")), Limit: 1},
		"cursor id not UTF-8":  {Before: enc([]byte("1234:\xff")), Limit: 1},
		"sale id with NUL":     {SaleID: "a\x00b", Limit: 1},
	} {
		if _, _, err := orders.FailedOrders(t.Context(), f); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("%s: FailedOrders(%+v) = %v, want EINVALID", name, f, err)
		}
	}
	// The good cursor goes on to the second row, and the end.
	page, next, err := orders.FailedOrders(t.Context(), seckill.FailedOrderFilter{SaleID: sale, Limit: 1, Before: good})
	if err != nil || len(page) != 1 || next != "" {
		t.Errorf("second page of 1 of 2: %d rows, next %q, %v; want 1 row, the end", len(page), next, err)
	}
}

// testFailedOrderCounts: each sale's failed orders are counted, all open
// until resolved, the sale with the newest one first.
func testFailedOrderCounts(t *testing.T, newStores func(*testing.T) (seckill.SaleStore, seckill.OrderStore)) {
	_, orders := newStores(t)
	base := failedBase()
	a, b := servicetest.UniqueName("fca_"), servicetest.UniqueName("fcb_")
	ids, ats := freshFailed(a, base, 3, func(i int) time.Duration { return time.Duration(i) * time.Second })
	recordFailed(t, orders, a, ids, ats)
	recordFailed(t, orders, b, []string{seckill.NewReservationID(b, base), seckill.NewReservationID(b, base)},
		[]time.Time{base.Add(-time.Hour), base.Add(time.Minute)})
	counts, err := orders.FailedOrderCounts(t.Context())
	if err != nil {
		t.Fatalf("FailedOrderCounts: %v", err)
	}
	got := map[string]seckill.FailedOrderCount{}
	var order []string
	for _, c := range counts {
		if _, dup := got[c.SaleID]; dup {
			t.Errorf("sale %q counted twice", c.SaleID)
		}
		got[c.SaleID] = c
		if c.SaleID == a || c.SaleID == b {
			order = append(order, c.SaleID)
		}
	}
	for sale, want := range map[string]seckill.FailedOrderCount{
		a: {SaleID: a, Open: 3, Newest: base.Add(2 * time.Second)},
		b: {SaleID: b, Open: 2, Newest: base.Add(time.Minute)},
	} {
		c := got[sale]
		if c.SaleID != want.SaleID || c.Open != want.Open || c.Resolved != want.Resolved {
			t.Errorf("count of sale %s = %+v, want %+v", sale, c, want)
		}
		checkStoredTime(t, "newest failed order of "+sale, c.Newest, want.Newest)
	}
	if strings.Join(order, " ") != b+" "+a {
		t.Errorf("sales in the counts: %v, want %s (newest failed order) before %s", order, b, a)
	}
	for i := 1; i < len(counts); i++ {
		if counts[i-1].Newest.Before(counts[i].Newest) {
			t.Errorf("counts: %+v before %+v", counts[i-1], counts[i])
		}
	}
}

// testFailedOrderStates: resolving failed orders moves them from the open
// list to the resolved one, in pages, and from open to resolved in the
// counts.
func testFailedOrderStates(t *testing.T, st ResolverStores) {
	ctx := t.Context()
	s := resolverSale(t, st, 10, 5)
	var fs []*seckill.FailedOrder
	for i := range 5 {
		fs = append(fs, failedOf(t, st, s, "buyer-"+strconv.Itoa(i), 1))
	}
	resolved := map[string]bool{}
	for _, f := range []*seckill.FailedOrder{fs[1], fs[3]} {
		if _, _, err := st.Resolver.ResolveFailedOrder(ctx, f.ReservationID, seckill.ResolveRefunded, "refunded by card", "ops", time.Now(), time.Minute); err != nil {
			t.Fatalf("resolve %s: %v", f.ReservationID, err)
		}
		resolved[f.ReservationID] = true
	}
	all := walkFailed(t, st.Orders, seckill.FailedOrderFilter{SaleID: s.ID, State: seckill.FailedAll, Limit: 2}, nil)
	if len(all) != len(fs) {
		t.Fatalf("all of the sale's failed orders: %s, want the %d recorded", failedIDs(all), len(fs))
	}
	var wantOpen, wantResolved []*seckill.FailedOrder
	for _, f := range all {
		if resolved[f.ReservationID] != (f.Resolution != nil) {
			t.Errorf("%s: resolution %+v, want resolved %v", f.ReservationID, f.Resolution, resolved[f.ReservationID])
		}
		if resolved[f.ReservationID] {
			wantResolved = append(wantResolved, f)
		} else {
			wantOpen = append(wantOpen, f)
		}
	}
	for state, want := range map[seckill.FailedOrderState][]*seckill.FailedOrder{
		seckill.FailedOpen: wantOpen, seckill.FailedResolved: wantResolved, "": all,
	} {
		for _, limit := range []int{1, 2, 5} {
			got := walkFailed(t, st.Orders, seckill.FailedOrderFilter{SaleID: s.ID, State: state, Limit: limit}, nil)
			if failedIDs(got) != failedIDs(want) {
				t.Errorf("state %q in pages of %d: %s, want %s", state, limit, failedIDs(got), failedIDs(want))
			}
		}
	}
	counts, err := st.Orders.FailedOrderCounts(ctx)
	if err != nil {
		t.Fatalf("FailedOrderCounts: %v", err)
	}
	i := slices.IndexFunc(counts, func(c seckill.FailedOrderCount) bool { return c.SaleID == s.ID })
	if i < 0 || counts[i].Open != 3 || counts[i].Resolved != 2 {
		t.Errorf("counts of the sale (at %d of %+v): want 3 open, 2 resolved", i, counts)
	}
}
