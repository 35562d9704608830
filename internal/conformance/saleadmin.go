package conformance

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/saleadmin"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// SaleAdminStore is a sale store with the operator's side.
type SaleAdminStore interface {
	seckill.SaleStore
	saleadmin.Admin
}

// SaleAdmin runs the conformance suite of saleadmin.Admin. newStore is
// called once per subtest; stores may share a database: every subtest
// lists only the sales whose ids it made (it pages through the others).
func SaleAdmin(t *testing.T, newStore func(t *testing.T) SaleAdminStore) {
	t.Run("ListFiltersAndPages", func(t *testing.T) { testListSales(t, newStore(t)) })
	t.Run("ListRefusesBadInput", func(t *testing.T) { testListSalesBadInput(t, newStore(t)) })
	t.Run("EditBeforeStart", func(t *testing.T) { testEditSale(t, newStore(t)) })
	t.Run("EditRefusedOnceStarted", func(t *testing.T) { testEditStarted(t, newStore(t)) })
	t.Run("EndEarly", func(t *testing.T) { testEndSale(t, newStore(t)) })
	t.Run("AddStock", func(t *testing.T) { testAddStock(t, newStore(t)) })
}

// createAt creates a sale with the given window.
func createAt(t *testing.T, store seckill.SaleStore, prefix string, start, end time.Time) *seckill.Sale {
	t.Helper()
	s := newSale()
	s.ID = servicetest.UniqueName(prefix)
	s.StartAt, s.EndAt = start, end
	s.Currency = "EUR"
	if err := store.CreateSale(t.Context(), s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	return s
}

// listAll pages through every sale of state with pages of size, keeping
// those whose id starts with prefix, in the order listed.
func listAll(t *testing.T, store saleadmin.Admin, state seckill.SaleState, now time.Time, size int, prefix string) []string {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("ListSales: more than 10,000 pages; the cursor does not advance")
		}
		page, err := store.ListSales(t.Context(), seckill.SaleFilter{State: state, Now: now, Limit: size, After: after})
		if err != nil {
			t.Fatalf("ListSales(state %q, after %q): %v", state, after, err)
		}
		if len(page.Sales) > size {
			t.Fatalf("ListSales: %d sales in a page of %d", len(page.Sales), size)
		}
		for _, s := range page.Sales {
			if seen[s.ID] {
				t.Fatalf("ListSales: sale %s on two pages", s.ID)
			}
			seen[s.ID] = true
			if strings.HasPrefix(s.ID, prefix) {
				ids = append(ids, s.ID)
			}
		}
		if page.Next == "" {
			return ids
		}
		after = page.Next
	}
}

func testListSales(t *testing.T, store SaleAdminStore) {
	now := time.Now()
	prefix := servicetest.UniqueName("lst") + "_"
	// Far in the future, so that no other test's sale sorts between them.
	base := now.Add(24 * time.Hour).Truncate(time.Millisecond)
	ended := createAt(t, store, prefix+"e", now.Add(-2*time.Hour), now.Add(-time.Hour))
	live := createAt(t, store, prefix+"l", now.Add(-time.Minute), now.Add(time.Hour))
	var scheduled []string
	for i := range 5 {
		// Two share a start: the id breaks the tie.
		start := base.Add(time.Duration(i/2) * time.Minute)
		scheduled = append(scheduled, createAt(t, store, prefix+"s", start, start.Add(time.Hour)).ID)
	}
	// Newest start first, then id descending.
	want := []string{}
	for i := len(scheduled) - 1; i >= 0; i-- {
		want = append(want, scheduled[i])
	}
	for i := 0; i+1 < len(want); i++ {
		a, _ := store.Sale(t.Context(), want[i])
		b, _ := store.Sale(t.Context(), want[i+1])
		if a.StartAt.Equal(b.StartAt) && a.ID < b.ID {
			want[i], want[i+1] = want[i+1], want[i]
		}
	}
	for _, size := range []int{1, 2, 200} {
		got := listAll(t, store, seckill.SaleScheduled, now, size, prefix)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("scheduled sales in pages of %d = %v, want %v", size, got, want)
		}
	}
	if got := listAll(t, store, seckill.SaleLive, now, 50, prefix); len(got) != 1 || got[0] != live.ID {
		t.Errorf("live sales = %v, want [%s]", got, live.ID)
	}
	if got := listAll(t, store, seckill.SaleEnded, now, 50, prefix); len(got) != 1 || got[0] != ended.ID {
		t.Errorf("ended sales = %v, want [%s]", got, ended.ID)
	}
	all := listAll(t, store, "", now, 3, prefix)
	if len(all) != 7 || all[len(all)-1] != ended.ID || all[len(all)-2] != live.ID {
		t.Errorf("all sales = %v, want the 5 scheduled, then %s, then %s", all, live.ID, ended.ID)
	}
	page, err := store.ListSales(t.Context(), seckill.SaleFilter{State: seckill.SaleLive, Now: now, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Sales {
		if s.ID == live.ID && (s.Currency != "EUR" || s.Stock != live.Stock || s.Unsold != live.Stock) {
			t.Errorf("listed sale = %+v, want the stored one", s)
		}
	}
}

func testListSalesBadInput(t *testing.T, store SaleAdminStore) {
	for _, f := range []seckill.SaleFilter{
		{Limit: 0}, {Limit: seckill.MaxSalePage + 1}, {Limit: 1, State: "sold_out"},
		{Limit: 1, After: "not a cursor!"}, {Limit: 1, After: "MTI"},
	} {
		f.Now = time.Now()
		if _, err := store.ListSales(t.Context(), f); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("ListSales(%+v) = %v, want %s", f, err, seckill.EINVALID)
		}
	}
}

// lastAudit is the newest audit entry of a sale.
func lastAudit(t *testing.T, store saleadmin.Admin, saleID string) *seckill.AuditEntry {
	t.Helper()
	log, err := store.AuditLog(t.Context(), saleID, 10)
	if err != nil {
		t.Fatalf("AuditLog: %v", err)
	}
	if len(log) == 0 {
		t.Fatalf("AuditLog(%s) is empty", saleID)
	}
	return log[0]
}

func testEditSale(t *testing.T, store SaleAdminStore) {
	ctx := t.Context()
	now := time.Now()
	s := createAt(t, store, "edit", now.Add(time.Hour), now.Add(2*time.Hour))
	edit := *s
	edit.Stock, edit.PurchaseLimit, edit.PriceCents, edit.Currency = 500, 2, 4999, "USD"
	edit.StartAt, edit.EndAt = now.Add(30*time.Minute), now.Add(3*time.Hour)
	got, err := store.EditSale(ctx, &edit, s.Version, "ops-alice", now)
	if err != nil {
		t.Fatalf("EditSale: %v", err)
	}
	if got.Version != s.Version+1 || got.Unsold != 500 {
		t.Errorf("edited sale: version %d unsold %d, want %d and 500", got.Version, got.Unsold, s.Version+1)
	}
	stored, err := store.Sale(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkSale(t, stored, &edit)
	if stored.Unsold != 500 || stored.Version != s.Version+1 {
		t.Errorf("stored: unsold %d version %d, want 500 and %d", stored.Unsold, stored.Version, s.Version+1)
	}
	e := lastAudit(t, store, s.ID)
	if e.Actor != "ops-alice" || e.Action != seckill.AuditSaleEdited || e.At.Before(now.Add(-time.Second)) {
		t.Errorf("audit entry = %+v, want ops-alice's edit, now", e)
	}
	var detail map[string][]any
	if err := json.Unmarshal([]byte(e.Detail), &detail); err != nil {
		t.Fatalf("audit detail %q: %v", e.Detail, err)
	}
	if d := detail["stock"]; len(d) != 2 || d[0] != float64(200) || d[1] != float64(500) {
		t.Errorf("audit detail of stock = %v, want [200 500] (detail %s)", d, e.Detail)
	}
	if _, ok := detail["name"]; ok {
		t.Errorf("audit detail names an unchanged field: %s", e.Detail)
	}
	// A stale version is refused, and changes nothing.
	edit.Stock = 1
	if _, err := store.EditSale(ctx, &edit, s.Version, "ops-bob", now); seckill.ErrorCode(err) != seckill.ECONFLICT {
		t.Errorf("EditSale with a stale version: %v, want %s", err, seckill.ECONFLICT)
	}
	if again, _ := store.Sale(ctx, s.ID); again.Stock != 500 {
		t.Errorf("after a refused edit, stock = %d, want 500", again.Stock)
	}
	missing := edit
	missing.ID = servicetest.UniqueName("nosuch")
	if _, err := store.EditSale(ctx, &missing, 0, "ops", now); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("EditSale of no sale: %v, want ErrNotFound", err)
	}
}

func testEditStarted(t *testing.T, store SaleAdminStore) {
	now := time.Now()
	s := createAt(t, store, "edst", now.Add(-time.Minute), now.Add(time.Hour))
	edit := *s
	edit.Stock = 1000
	if _, err := store.EditSale(t.Context(), &edit, 0, "ops", now); seckill.ErrorCode(err) != seckill.ESTATECONFLICT {
		t.Errorf("EditSale of a live sale: %v, want %s", err, seckill.ESTATECONFLICT)
	}
	if got, _ := store.Sale(t.Context(), s.ID); got.Stock != s.Stock || got.Version != s.Version {
		t.Errorf("after a refused edit: stock %d version %d, want unchanged %d %d", got.Stock, got.Version, s.Stock, s.Version)
	}
}

func testEndSale(t *testing.T, store SaleAdminStore) {
	ctx := t.Context()
	now := time.Now()
	live := createAt(t, store, "end", now.Add(-time.Minute), now.Add(time.Hour))
	got, changed, err := store.EndSale(ctx, live.ID, "ops-carol", now)
	if err != nil || !changed {
		t.Fatalf("EndSale: changed %v, %v", changed, err)
	}
	if got.State(now, 10) != seckill.SaleEnded || got.Version != live.Version+1 {
		t.Errorf("ended sale: state %s version %d, want ended and %d", got.State(now, 10), got.Version, live.Version+1)
	}
	stored, _ := store.Sale(ctx, live.ID)
	checkStoredTime(t, "EndAt", stored.EndAt, now)
	if e := lastAudit(t, store, live.ID); e.Action != seckill.AuditSaleEnded || e.Actor != "ops-carol" {
		t.Errorf("audit entry = %+v, want ops-carol's end", e)
	}
	// Twice: nothing changes, nothing is recorded.
	again, changed, err := store.EndSale(ctx, live.ID, "ops-carol", now.Add(time.Second))
	if err != nil || changed || again.Version != stored.Version {
		t.Errorf("second EndSale: changed %v version %d (want %d), %v", changed, again.Version, stored.Version, err)
	}
	if log, _ := store.AuditLog(ctx, live.ID, 10); len(log) != 1 {
		t.Errorf("audit log after two ends has %d entries, want 1", len(log))
	}
	// A sale that never started is over too.
	sched := createAt(t, store, "end", now.Add(time.Hour), now.Add(2*time.Hour))
	got, _, err = store.EndSale(ctx, sched.ID, "ops", now)
	if err != nil {
		t.Fatal(err)
	}
	if st := got.State(now, 10); st != seckill.SaleEnded {
		t.Errorf("scheduled sale ended early: state %s, want ended", st)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("ended sale is not a valid sale: %v", err)
	}
	if _, _, err := store.EndSale(ctx, servicetest.UniqueName("nosuch"), "ops", now); !errors.Is(err, seckill.ErrNotFound) {
		t.Errorf("EndSale of no sale: %v, want ErrNotFound", err)
	}
}

func testAddStock(t *testing.T, store SaleAdminStore) {
	ctx := t.Context()
	now := time.Now()
	live := createAt(t, store, "add", now.Add(-time.Minute), now.Add(time.Hour))
	got, err := store.AddStock(ctx, live.ID, 50, "ops-dan", now)
	if err != nil {
		t.Fatalf("AddStock: %v", err)
	}
	if got.Stock != 250 || got.Unsold != 250 || got.Version != live.Version+1 {
		t.Errorf("after AddStock: stock %d unsold %d version %d, want 250 250 %d", got.Stock, got.Unsold, got.Version, live.Version+1)
	}
	stored, _ := store.Sale(ctx, live.ID)
	if stored.Stock != 250 || stored.Unsold != 250 {
		t.Errorf("stored after AddStock: stock %d unsold %d, want 250 250", stored.Stock, stored.Unsold)
	}
	if e := lastAudit(t, store, live.ID); e.Action != seckill.AuditSaleStockAdded || e.Actor != "ops-dan" || !strings.Contains(e.Detail, `"added":50`) {
		t.Errorf("audit entry = %+v, want ops-dan adding 50", e)
	}
	for _, n := range []int64{0, -1, seckill.MaxSaleStock + 1} {
		if _, err := store.AddStock(ctx, live.ID, n, "ops", now); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("AddStock(%d): %v, want %s", n, err, seckill.EINVALID)
		}
	}
	ended := createAt(t, store, "add", now.Add(-2*time.Hour), now.Add(-time.Hour))
	if _, err := store.AddStock(ctx, ended.ID, 1, "ops", now); seckill.ErrorCode(err) != seckill.ESTATECONFLICT {
		t.Errorf("AddStock to an ended sale: %v, want %s", err, seckill.ESTATECONFLICT)
	}
	// Every entry of every sale, newest first.
	all, err := store.AuditLog(ctx, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("AuditLog(\"\") not newest first: id %d after %d", all[i].ID, all[i-1].ID)
		}
	}
}
