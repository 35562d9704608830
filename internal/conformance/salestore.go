package conformance

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// SaleStore runs the conformance suite of seckill.SaleStore against the
// stores newStore returns. newStore is called once per subtest and returns
// a store ready for use (migrated); it may return a fresh store each time
// or share one: every subtest uses sale ids of its own and ignores sales it
// did not create. The store must stamp CreatedAt from the wall clock.
func SaleStore(t *testing.T, newStore func(t *testing.T) seckill.SaleStore) {
	t.Run("RoundTrip", func(t *testing.T) { testSaleRoundTrip(t, newStore(t)) })
	t.Run("RoundTripLimits", func(t *testing.T) { testSaleRoundTripLimits(t, newStore(t)) })
	t.Run("Duplicate", func(t *testing.T) { testSaleDuplicate(t, newStore(t)) })
	t.Run("IDsAreCaseSensitive", func(t *testing.T) { testSaleIDsCaseSensitive(t, newStore(t)) })
	t.Run("NotFound", func(t *testing.T) { testSaleNotFound(t, newStore(t)) })
	t.Run("SalesStartingBefore", func(t *testing.T) { testSalesStartingBefore(t, newStore(t)) })
	t.Run("ConcurrentCreate", func(t *testing.T) { testSaleConcurrentCreate(t, newStore(t)) })
}

// newSale returns a valid sale with a fresh id that starts an hour from
// now and lasts an hour.
func newSale() *seckill.Sale {
	start := time.Now().Add(time.Hour)
	return &seckill.Sale{
		ID:            servicetest.UniqueName("sale_"),
		Name:          "Tea gift set",
		PriceCents:    1999,
		Stock:         200,
		PurchaseLimit: 1,
		StartAt:       start,
		EndAt:         start.Add(time.Hour),
	}
}

func testSaleRoundTrip(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	// Nanoseconds and a zone other than UTC: the store keeps milliseconds
	// and answers in UTC.
	shanghai := time.FixedZone("UTC+8", 8*3600)
	start := time.Date(2031, 11, 11, 0, 0, 0, 123_456_789, shanghai)
	want := seckill.Sale{
		ID:            servicetest.UniqueName("Sale-RT_"),
		Name:          `Longjing 龍井 "first flush" 'gift' set; 10% off -- \ (tea)`,
		PriceCents:    12_345,
		Currency:      "CNY",
		Stock:         200,
		PurchaseLimit: 3,
		StartAt:       start,
		EndAt:         start.Add(2*time.Hour + 987_654_321*time.Nanosecond),
	}
	s := want
	before := time.Now()
	if err := store.CreateSale(ctx, &s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	after := time.Now()

	if s.Version != 1 {
		t.Errorf("after CreateSale, Version = %d, want 1", s.Version)
	}
	if s.CreatedAt.Before(before.Add(-time.Minute)) || s.CreatedAt.After(after.Add(time.Minute)) {
		t.Errorf("after CreateSale, CreatedAt = %v, want about %v", s.CreatedAt, before)
	}
	checkStoredTime(t, "CreatedAt", s.CreatedAt, s.CreatedAt)

	got, err := store.Sale(ctx, want.ID)
	if err != nil {
		t.Fatalf("Sale: %v", err)
	}
	checkSale(t, got, &want)
	if got.Version != 1 {
		t.Errorf("Version = %d, want 1", got.Version)
	}
	checkStoredTime(t, "CreatedAt", got.CreatedAt, s.CreatedAt)
}

// testSaleRoundTripLimits stores the largest values a valid sale may hold,
// and a name of the most bytes allowed, in multi-byte characters.
func testSaleRoundTripLimits(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	want := *newSale()
	want.Name = strings.Repeat("茶", seckill.MaxSaleNameBytes/3) + strings.Repeat("x", seckill.MaxSaleNameBytes%3)
	want.PriceCents = seckill.MaxPriceCents
	want.Stock = seckill.MaxSaleStock
	want.PurchaseLimit = seckill.MaxPurchaseLimit
	want.EndAt = want.StartAt.Add(seckill.MaxSaleDuration)
	s := want
	if err := store.CreateSale(ctx, &s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	got, err := store.Sale(ctx, want.ID)
	if err != nil {
		t.Fatalf("Sale: %v", err)
	}
	checkSale(t, got, &want)

	// And the smallest.
	want = *newSale()
	want.Name = "x"
	want.PriceCents = 0
	want.Stock = 1
	want.PurchaseLimit = 1
	want.EndAt = want.StartAt.Add(time.Millisecond)
	s = want
	if err := store.CreateSale(ctx, &s); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	if got, err = store.Sale(ctx, want.ID); err != nil {
		t.Fatalf("Sale: %v", err)
	}
	checkSale(t, got, &want)
}

func testSaleDuplicate(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	first := newSale()
	if err := store.CreateSale(ctx, first); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	second := newSale()
	second.ID = first.ID
	second.Name = "Another sale"
	second.Stock = 5
	err := store.CreateSale(ctx, second)
	if !errors.Is(err, seckill.ErrDuplicate) {
		t.Fatalf("second CreateSale of id %s: got %v, want ErrDuplicate", first.ID, err)
	}
	got, err := store.Sale(ctx, first.ID)
	if err != nil {
		t.Fatalf("Sale: %v", err)
	}
	if got.Name != first.Name || got.Stock != first.Stock {
		t.Errorf("after a duplicate CreateSale, sale = {Name: %q, Stock: %d}, want the first {%q, %d}",
			got.Name, got.Stock, first.Name, first.Stock)
	}
}

// testSaleIDsCaseSensitive: ids are case-sensitive everywhere (Redis keys,
// URLs), so a store must not fold case, as a MySQL column with a
// case-insensitive collation would.
func testSaleIDsCaseSensitive(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	suffix := servicetest.UniqueName("")
	upper, lower := newSale(), newSale()
	upper.ID, upper.Name = "TEA-"+strings.ToUpper(suffix), "upper"
	lower.ID, lower.Name = "tea-"+suffix, "lower"
	for _, s := range []*seckill.Sale{upper, lower} {
		if err := store.CreateSale(ctx, s); err != nil {
			t.Fatalf("CreateSale(%s): %v", s.ID, err)
		}
	}
	for _, s := range []*seckill.Sale{upper, lower} {
		got, err := store.Sale(ctx, s.ID)
		if err != nil {
			t.Fatalf("Sale(%s): %v", s.ID, err)
		}
		if got.ID != s.ID || got.Name != s.Name {
			t.Errorf("Sale(%s) = {ID: %s, Name: %s}, want {%s, %s}", s.ID, got.ID, got.Name, s.ID, s.Name)
		}
	}
}

func testSaleNotFound(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	// A store holding other sales must still not find these.
	if err := store.CreateSale(ctx, newSale()); err != nil {
		t.Fatalf("CreateSale: %v", err)
	}
	for _, id := range []string{
		servicetest.UniqueName("missing_"),
		"", // malformed ids: no such sale either, not some other error
		"with space",
		"thé",
		strings.Repeat("x", 65),
		"x'; DROP TABLE sales; --",
	} {
		got, err := store.Sale(ctx, id)
		if !errors.Is(err, seckill.ErrNotFound) {
			t.Errorf("Sale(%q) = %v, %v; want ErrNotFound", id, got, err)
		}
	}
}

func testSalesStartingBefore(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	// now and t (= now + preheat lead) on whole milliseconds, so the
	// boundary sales sit exactly on them.
	now := time.Now().UTC().Truncate(time.Millisecond)
	lead := 10 * time.Minute
	at := now.Add(lead)
	ms := time.Millisecond

	type window struct{ start, end time.Time }
	cases := map[string]struct {
		w    window
		want bool
	}{
		"live":              {window{now.Add(-time.Hour), now.Add(time.Hour)}, true},
		"starts_within":     {window{now.Add(lead / 2), now.Add(time.Hour)}, true},
		"starts_at_t":       {window{at, at.Add(time.Hour)}, true},
		"starts_after_t":    {window{at.Add(ms), at.Add(time.Hour)}, false},
		"starts_tomorrow":   {window{now.Add(24 * time.Hour), now.Add(25 * time.Hour)}, false},
		"ends_at_now":       {window{now.Add(-2 * time.Hour), now}, false},
		"ends_after_now":    {window{now.Add(-2 * time.Hour), now.Add(ms)}, true},
		"ended_long_ago":    {window{now.Add(-72 * time.Hour), now.Add(-48 * time.Hour)}, false},
		"ended_before_now":  {window{now.Add(-time.Hour), now.Add(-ms)}, false},
		"ends_long_after_t": {window{now.Add(-time.Minute), now.Add(300 * 24 * time.Hour)}, true},
	}
	ids := map[string]string{} // sale id → case name
	for name, c := range cases {
		s := newSale()
		s.ID = servicetest.UniqueName("sb_" + name + "_")
		s.Name = name
		s.StartAt, s.EndAt = c.w.start, c.w.end
		if err := store.CreateSale(ctx, s); err != nil {
			t.Fatalf("CreateSale(%s): %v", name, err)
		}
		ids[s.ID] = name
	}

	check := func(label string, at, now time.Time, want func(name string) bool) {
		t.Helper()
		sales, err := store.SalesStartingBefore(ctx, at, now)
		if err != nil {
			t.Fatalf("%s: SalesStartingBefore: %v", label, err)
		}
		got := map[string]bool{}
		for _, s := range sales {
			name, ours := ids[s.ID]
			if !ours {
				continue // another test's sale
			}
			if got[name] {
				t.Errorf("%s: sale %s listed twice", label, name)
			}
			got[name] = true
			if !(!s.StartAt.After(at) && s.EndAt.After(now)) {
				t.Errorf("%s: listed %s with window [%v, %v), which does not start by %v or has ended by %v",
					label, name, s.StartAt, s.EndAt, at, now)
			}
			stored, err := store.Sale(ctx, s.ID)
			if err != nil {
				t.Fatalf("Sale(%s): %v", s.ID, err)
			}
			checkSale(t, s, stored)
			if s.Version != stored.Version || !s.CreatedAt.Equal(stored.CreatedAt) {
				t.Errorf("%s: listed %s with Version %d, CreatedAt %v; Sale says %d, %v",
					label, name, s.Version, s.CreatedAt, stored.Version, stored.CreatedAt)
			}
		}
		for name := range cases {
			if w := want(name); got[name] != w {
				t.Errorf("%s: sale %s listed = %v, want %v", label, name, got[name], w)
			}
		}
	}

	check("exact bounds", at, now, func(name string) bool { return cases[name].want })
	// Sub-millisecond arguments: the store compares at millisecond
	// precision and must round both down, never up. A sale starting 1ms
	// after t still starts after t+999µs; one ending 1ms after now has
	// still not ended at now+999µs.
	check("sub-millisecond bounds", at.Add(999*time.Microsecond), now.Add(999*time.Microsecond),
		func(name string) bool { return cases[name].want })
	check("before everything", now.Add(-100*time.Hour), now.Add(-100*time.Hour),
		func(string) bool { return false })
	check("after everything", now.Add(1000*24*time.Hour), now.Add(1000*24*time.Hour),
		func(string) bool { return false })
}

func testSaleConcurrentCreate(t *testing.T, store seckill.SaleStore) {
	ctx := t.Context()
	const n = 20
	id := servicetest.UniqueName("race_")
	var (
		errs  = make([]error, n)
		sales = make([]*seckill.Sale, n)
	)
	for i := range n {
		s := newSale()
		s.ID = id
		s.Name = "contender " + string(rune('A'+i))
		sales[i] = s
	}
	atOnce(n, func(i int) { errs[i] = store.CreateSale(ctx, sales[i]) })

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("CreateSale by contenders %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, seckill.ErrDuplicate):
			t.Errorf("CreateSale by contender %d: got %v, want nil or ErrDuplicate", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no CreateSale succeeded; errors: %v", errs)
	}
	got, err := store.Sale(ctx, id)
	if err != nil {
		t.Fatalf("Sale: %v", err)
	}
	if got.Name != sales[winner].Name || got.Version != 1 {
		t.Errorf("stored sale = {Name: %q, Version: %d}, want the winner's {%q, 1}", got.Name, got.Version, sales[winner].Name)
	}
}

// checkSale compares the operator-supplied fields of got with want, whose
// times may carry nanoseconds and any zone.
func checkSale(t *testing.T, got, want *seckill.Sale) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"ID", got.ID, want.ID},
		{"Name", got.Name, want.Name},
		{"PriceCents", got.PriceCents, want.PriceCents},
		{"Stock", got.Stock, want.Stock},
		{"PurchaseLimit", got.PurchaseLimit, want.PurchaseLimit},
		{"Currency", got.Currency, want.Currency},
	} {
		if f.got != f.want {
			t.Errorf("%s = %#v, want %#v", f.name, f.got, f.want)
		}
	}
	checkStoredTime(t, "StartAt", got.StartAt, want.StartAt)
	checkStoredTime(t, "EndAt", got.EndAt, want.EndAt)
}

// checkStoredTime checks that got is want cut to the millisecond, in UTC.
func checkStoredTime(t *testing.T, field string, got, want time.Time) {
	t.Helper()
	if w := want.Truncate(time.Millisecond); !got.Equal(w) {
		t.Errorf("%s = %v, want %v (millisecond precision)", field, got, w.UTC())
	}
	if got.Location() != time.UTC {
		t.Errorf("%s is in %v, want UTC", field, got.Location())
	}
}
