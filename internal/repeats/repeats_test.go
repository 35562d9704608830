package repeats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// entryStore is the stock store's entry script in memory: one entry per
// buyer, counting its calls.
type entryStore struct {
	mu      sync.Mutex
	entries map[string]seckill.LotteryEntry // sale/user
	calls   int
	refuse  string
	err     error
}

func (f *entryStore) Enter(_ context.Context, s *seckill.Sale, req seckill.EntryRequest) (seckill.EntryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return seckill.EntryResult{}, f.err
	}
	if f.refuse != "" {
		return seckill.EntryResult{Refused: f.refuse}, nil
	}
	if f.entries == nil {
		f.entries = map[string]seckill.LotteryEntry{}
	}
	k := s.ID + "/" + req.UserID
	if e, ok := f.entries[k]; ok {
		return seckill.EntryResult{Entry: e}, nil
	}
	e := seckill.LotteryEntry{ID: req.EntryID, UserID: req.UserID, Qty: req.Qty}
	f.entries[k] = e
	return seckill.EntryResult{Entry: e, New: true}, nil
}

func (f *entryStore) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

func lottery(id string) *seckill.Sale {
	return &seckill.Sale{ID: id, StartAt: t0, EndAt: t0.Add(2 * time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: t0.Add(time.Hour)}}
}

func enter(t *testing.T, e seckill.Enterer, s *seckill.Sale, user string, qty int64) seckill.EntryResult {
	t.Helper()
	res, err := e.Enter(context.Background(), s, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: user, Qty: qty})
	if err != nil {
		t.Fatalf("enter %s: %v", user, err)
	}
	return res
}

// TestSecondEntryAnswersTheFirstFromMemory: the second entry names the
// first entry (its id and qty, whatever qty it asks for), is not new, and
// costs no stock-store call.
func TestSecondEntryAnswersTheFirstFromMemory(t *testing.T) {
	store := &entryStore{}
	c := &clock{t: t0.Add(time.Minute)}
	e := NewEnterer(store, Config{Now: c.Now})
	s := lottery("tea")
	first := enter(t, e, s, "ann", 1)
	if !first.New || first.Entry.ID == "" {
		t.Fatalf("first entry = %+v, want a new one", first)
	}
	second := enter(t, e, s, "ann", 2)
	if second.New || second.Entry != first.Entry || second.Refused != "" {
		t.Fatalf("second entry = %+v, want the first (%+v), not new", second, first.Entry)
	}
	if store.count() != 1 || e.Hits() != 1 {
		t.Fatalf("store calls %d, hits %d; want 1 and 1", store.count(), e.Hits())
	}
	// Another buyer, and the same buyer in another sale, are not known.
	if bob := enter(t, e, s, "bob", 1); !bob.New {
		t.Fatalf("bob's entry = %+v, want a new one", bob)
	}
	if other := enter(t, e, lottery("coffee"), "ann", 1); !other.New || other.Entry.ID == first.Entry.ID {
		t.Fatalf("ann in another sale = %+v, want a new entry of its own", other)
	}
	if store.count() != 3 {
		t.Fatalf("store calls %d, want 3", store.count())
	}
}

// TestRefusalsAndErrorsAreNotRemembered: a refused entry or a failed call
// leaves nothing behind, so the next entry asks the store again.
func TestRefusalsAndErrorsAreNotRemembered(t *testing.T) {
	store := &entryStore{refuse: seckill.ENOTSTARTED}
	e := NewEnterer(store, Config{Now: (&clock{t: t0.Add(time.Minute)}).Now})
	s := lottery("tea")
	if res := enter(t, e, s, "ann", 1); res.Refused != seckill.ENOTSTARTED {
		t.Fatalf("entry = %+v, want refused as not started", res)
	}
	store.refuse, store.err = "", errors.New("redis down")
	if _, err := e.Enter(context.Background(), s, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: "ann", Qty: 1}); err == nil {
		t.Fatal("the store's error was not passed on")
	}
	store.err = nil
	if res := enter(t, e, s, "ann", 1); !res.New {
		t.Fatalf("entry after a refusal and an error = %+v, want a new one from the store", res)
	}
	if store.count() != 3 || e.Hits() != 0 {
		t.Fatalf("store calls %d, hits %d; want 3 and 0", store.count(), e.Hits())
	}
}

// TestEntriesAreForgottenWhenEntriesClose: at entries close the sale's
// answers lapse, and the sale is dropped to make room for another.
func TestEntriesAreForgottenWhenEntriesClose(t *testing.T) {
	store := &entryStore{}
	c := &clock{t: t0.Add(time.Minute)}
	e := NewEnterer(store, Config{Now: c.Now, MaxSales: 1})
	tea := lottery("tea")
	enter(t, e, tea, "ann", 1)
	c.set(tea.Admission.EntriesCloseAt)
	enter(t, e, tea, "ann", 1)
	if store.count() != 2 || e.Hits() != 0 {
		t.Fatalf("at close: store calls %d, hits %d; want 2 and 0", store.count(), e.Hits())
	}
	// The lapsed sale gives its place to the next one.
	coffee := lottery("coffee")
	coffee.Admission.EntriesCloseAt = c.Now().Add(time.Hour)
	enter(t, e, coffee, "ann", 1)
	enter(t, e, coffee, "ann", 1)
	if store.count() != 3 || e.Hits() != 1 {
		t.Fatalf("next sale: store calls %d, hits %d; want 3 and 1", store.count(), e.Hits())
	}
	if sales, _ := e.known.len(); sales != 1 {
		t.Fatalf("%d sales held, want 1", sales)
	}
}

// TestMemoryIsBounded: no more than MaxSales live sales and PerSale buyers
// a sale are held, and a buyer dropped is asked of the store again with
// the same answer.
func TestMemoryIsBounded(t *testing.T) {
	store := &entryStore{}
	e := NewEnterer(store, Config{Now: (&clock{t: t0.Add(time.Minute)}).Now, MaxSales: 2, PerSale: 8})
	for _, id := range []string{"a", "b", "c"} {
		for i := range 20 {
			enter(t, e, lottery(id), fmt.Sprintf("u%d", i), 1)
		}
	}
	sales, answers := e.known.len()
	if sales != 2 || answers > 16 {
		t.Fatalf("held %d sales and %d answers, want 2 and at most 16", sales, answers)
	}
	// Sale c found no room: every entry of it asks the store, and gets
	// the first entry back.
	calls := store.count()
	if res := enter(t, e, lottery("c"), "u0", 1); res.New || res.Entry != store.entries["c/u0"] {
		t.Fatalf("repeat in a sale not held = %+v, want the store's first entry %+v", res, store.entries["c/u0"])
	}
	if store.count() != calls+1 {
		t.Fatal("a repeat in a sale not held did not ask the store")
	}
}

// queueStore is the join script in memory: places in arrival order,
// except that early joiners may be put in front (front).
type queueStore struct {
	mu    sync.Mutex
	order []string
	calls int
	front bool // the next newcomer goes to the front
}

func (f *queueStore) Join(_ context.Context, _ *seckill.Sale, _ int64, req seckill.QueueJoin) (seckill.QueueJoinResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	for i, u := range f.order {
		if u == req.UserID {
			return seckill.QueueJoinResult{Position: int64(i + 1)}, nil
		}
	}
	if f.front {
		f.order = append([]string{req.UserID}, f.order...)
		return seckill.QueueJoinResult{Position: 1}, nil
	}
	f.order = append(f.order, req.UserID)
	return seckill.QueueJoinResult{Position: int64(len(f.order))}, nil
}

func join(t *testing.T, q seckill.Queuer, s *seckill.Sale, user string) int64 {
	t.Helper()
	res, err := q.Join(context.Background(), s, 0, seckill.QueueJoin{UserID: user})
	if err != nil || res.Refused != "" {
		t.Fatalf("join %s: %+v, %v", user, res, err)
	}
	return res.Position
}

// TestAPlaceIsRememberedOnlyOnceFinal: before the start (and its margin)
// an early newcomer may take a place in front, so every join asks the
// store; from then on a repeated join is answered from memory with the
// same place.
func TestAPlaceIsRememberedOnlyOnceFinal(t *testing.T) {
	store := &queueStore{front: true}
	c := &clock{t: t0.Add(-time.Minute)}
	q := NewQueuer(store, Config{Now: c.Now})
	s := &seckill.Sale{ID: "tea", StartAt: t0, EndAt: t0.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10}}
	join(t, q, s, "ann")
	join(t, q, s, "bob") // in front of ann
	if got := join(t, q, s, "ann"); got != 2 {
		t.Fatalf("ann's place before the start = %d, want 2 (bob came in front)", got)
	}
	c.set(t0.Add(seckill.QueueSettleMargin - time.Millisecond))
	join(t, q, s, "ann")
	if q.Hits() != 0 || store.calls != 4 {
		t.Fatalf("before the margin passed: hits %d, store calls %d; want 0 and 4", q.Hits(), store.calls)
	}
	store.front = false
	c.set(t0.Add(seckill.QueueSettleMargin))
	if got := join(t, q, s, "ann"); got != 2 {
		t.Fatalf("ann's place = %d, want 2", got)
	}
	join(t, q, s, "cat")
	if got := join(t, q, s, "ann"); got != 2 || q.Hits() != 1 || store.calls != 6 {
		t.Fatalf("ann's repeat = %d with hits %d, store calls %d; want 2 from memory (1 hit, 6 calls)", got, q.Hits(), store.calls)
	}
	// At the end the sale's places lapse.
	c.set(s.EndAt)
	join(t, q, s, "ann")
	if store.calls != 7 {
		t.Fatalf("store calls %d after the end, want 7", store.calls)
	}
}

// TestConcurrentRepeats is for the race detector: many buyers entering
// twice at once each get their one entry.
func TestConcurrentRepeats(t *testing.T) {
	store := &entryStore{}
	e := NewEnterer(store, Config{Now: (&clock{t: t0.Add(time.Minute)}).Now, PerSale: 64})
	s := lottery("tea")
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", i%50)
			res, err := e.Enter(context.Background(), s, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: user, Qty: 1})
			store.mu.Lock()
			want := store.entries["tea/"+user]
			store.mu.Unlock()
			if err != nil || res.Entry != want {
				t.Errorf("%s: %+v, %v; want the entry %+v", user, res, err, want)
			}
		}()
	}
	wg.Wait()
}

// TestAPolledPlaceIsRememberedOnlyOnceFinal: RememberPlace keeps a place
// read once places are final, and nothing before.
func TestAPolledPlaceIsRememberedOnlyOnceFinal(t *testing.T) {
	c := &clock{t: t0.Add(-time.Minute)}
	q := NewQueuer(&queueStore{}, Config{Now: c.Now})
	s := &seckill.Sale{ID: "tea", StartAt: t0, EndAt: t0.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10}}
	q.RememberPlace(s, "ann", 3, c.Now())
	if _, ok := q.KnownPlace(s.ID, "ann", c.Now()); ok {
		t.Fatal("a place read before the start was remembered")
	}
	c.set(t0.Add(seckill.QueueSettleMargin))
	q.RememberPlace(s, "ann", 3, c.Now())
	if pos, ok := q.KnownPlace(s.ID, "ann", c.Now()); !ok || pos != 3 {
		t.Fatalf("known place = %d, %v; want 3", pos, ok)
	}
}
