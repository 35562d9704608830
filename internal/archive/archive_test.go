package archive

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeStore struct {
	sales                       map[string]*seckill.Sale
	recorded, awaiting, restore int64
	archives                    map[string]int64 // sale -> claims recorded
}

func (f *fakeStore) RecordArchive(_ context.Context, id string, claims int64, _ time.Time) error {
	if f.archives == nil {
		f.archives = map[string]int64{}
	}
	f.archives[id] = claims
	return nil
}

func (f *fakeStore) Sale(_ context.Context, id string) (*seckill.Sale, error) {
	if s, ok := f.sales[id]; ok {
		return s, nil
	}
	return nil, seckill.ErrNotFound
}

func (f *fakeStore) SaleWork(context.Context, string) (int64, int64, int64, error) {
	return f.recorded, f.awaiting, f.restore, nil
}

type fakeStock struct {
	mu         sync.Mutex
	kept       []string
	idemDrops  int
	idemClosed bool // Redis TIME says the window closed
	outbox     int
	res        int64
	archived   map[string]string
	// A lottery's entries and who won (Entries), in Redis until archived.
	entries []seckill.LotteryEntry
	won     map[string]string
	reads   int    // Entries and AllWon calls: whole hashes read
	counted func() // if set, called after EntryCounts has counted
}

func (f *fakeStock) EntryCounts(context.Context, string) (int64, int64, error) {
	f.mu.Lock()
	n, w := int64(len(f.entries)), int64(len(f.won))
	f.mu.Unlock()
	if f.counted != nil {
		f.counted()
	}
	return n, w, nil
}

func (f *fakeStock) Entries(context.Context, string) ([]seckill.LotteryEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return append([]seckill.LotteryEntry(nil), f.entries...), nil
}

func (f *fakeStock) AllWon(context.Context, string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return maps.Clone(f.won), nil
}

func (f *fakeStock) KeptSales(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.kept...), nil
}

func (f *fakeStock) DropIdempotency(context.Context, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idemDrops++
	return f.idemClosed, nil
}

func (f *fakeStock) ReservationCount(context.Context, string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res, nil
}

func (f *fakeStock) ArchiveSale(_ context.Context, id string, recorded seckill.ArchiveRecorded, summary string) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.outbox > 0:
		return false, "outbox", nil
	case f.res > recorded.Reservations:
		return false, "not recorded", nil
	case int64(len(f.entries)) > recorded.Entries || int64(len(f.won)) > recorded.Winners:
		return false, "entries not copied", nil
	}
	f.archived[id] = summary
	f.kept = nil
	return true, "", nil
}

func setup(end time.Time) (*fakeStore, *fakeStock, *time.Time) {
	now := end
	store := &fakeStore{sales: map[string]*seckill.Sale{"tea": {ID: "tea", EndAt: end}}, recorded: 5}
	stock := &fakeStock{kept: []string{"tea", "someone-elses"}, idemClosed: true, res: 5, archived: map[string]string{}}
	return store, stock, &now
}

// lotterySetup is setup for a lottery sale whose entries closed an hour
// before its end, now two hours past it: ann, bob (who won r-bob) and cy
// entered.
func lotterySetup(end time.Time) (*fakeStore, *fakeStock, *time.Time) {
	store, stock, now := setup(end)
	*now = end.Add(2 * time.Hour)
	store.sales["tea"].Admission = seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: end.Add(-time.Hour)}
	stock.entries = []seckill.LotteryEntry{{ID: "e1", UserID: "ann", Qty: 1}, {ID: "e2", UserID: "bob", Qty: 2}, {ID: "e3", UserID: "cy", Qty: 1}}
	stock.won = map[string]string{"bob": "r-bob"}
	return store, stock, now
}

// TestArchiveSteps: nothing before the end; the idempotency hash at the
// end (once); the rest only after the delay, with payments, restores,
// the outbox and the database all done.
func TestArchiveSteps(t *testing.T) {
	end := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, stock, now := setup(end)
	*now = end.Add(-time.Second)
	a := New(store, stock, Config{After: time.Hour, Now: func() time.Time { return *now }})
	ctx := context.Background()
	pass := func(want int) {
		t.Helper()
		n, err := a.Pass(ctx)
		if err != nil || n != want {
			t.Fatalf("Pass at %v = %d, %v; want %d", now.Sub(end), n, err, want)
		}
	}
	pass(0)
	if stock.idemDrops != 0 {
		t.Fatal("the idempotency hash was touched before the end")
	}
	*now = end.Add(time.Second)
	pass(0)
	pass(0)
	if stock.idemDrops != 1 {
		t.Fatalf("%d idempotency drops; want 1 (once dropped, not asked again)", stock.idemDrops)
	}
	*now = end.Add(time.Hour)
	store.awaiting = 2
	pass(0)
	store.awaiting, store.restore = 0, 1
	pass(0)
	store.restore, stock.outbox = 0, 3
	pass(0)
	stock.outbox, store.recorded = 0, 4
	pass(0)
	store.recorded = 5
	pass(1)
	if stock.archived["tea"] == "" || len(stock.archived) != 1 {
		t.Fatalf("archived %v; want tea with a summary", stock.archived)
	}
	// The database knows how many claims the keys held.
	if store.archives["tea"] != 5 {
		t.Errorf("claims recorded in the database = %v; want tea: 5", store.archives)
	}
}

// TestClockAheadOfRedis: a node whose clock says the sale has ended while
// Redis says it has not drops nothing, and asks again next pass.
func TestClockAheadOfRedis(t *testing.T) {
	end := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, stock, now := setup(end)
	stock.idemClosed = false
	a := New(store, stock, Config{Now: func() time.Time { return *now }})
	for range 2 {
		if _, err := a.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if stock.idemDrops != 2 {
		t.Fatalf("%d drop attempts; want 2 (a refused drop is tried again)", stock.idemDrops)
	}
}

// TestFinalReconciliationKeepsKeys: a sale whose final reconciliation
// fails keeps its keys; one that passes keeps the reconciliation's summary.
func TestFinalReconciliationKeepsKeys(t *testing.T) {
	end := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, stock, now := setup(end)
	*now = end.Add(2 * time.Hour)
	final := errors.New("oversold by 1")
	a := New(store, stock, Config{Now: func() time.Time { return *now }, Final: func(context.Context, string) (string, error) {
		if final != nil {
			return "", final
		}
		return `{"balanced":true}`, nil
	}})
	if n, err := a.Pass(context.Background()); err != nil || n != 0 || len(stock.archived) != 0 {
		t.Fatalf("Pass with a failing reconciliation = %d, %v, archived %v; want nothing archived", n, err, stock.archived)
	}
	final = nil
	if n, err := a.Pass(context.Background()); err != nil || n != 1 || stock.archived["tea"] != `{"balanced":true}` {
		t.Fatalf("Pass = %d, %v, archived %v; want the reconciliation's summary kept", n, err, stock.archived)
	}
}

// TestStartStop: a second Start, and a Start after Stop, start no loop
// (goleak, in TestMain, finds one left running); Stop is safe twice.
func TestStartStop(t *testing.T) {
	store, stock, _ := setup(time.Now().Add(-2 * time.Hour))
	a := New(store, stock, Config{Interval: time.Millisecond})
	a.Start(context.Background())
	a.Start(context.Background()) // a second Start does nothing
	servicetest.WaitFor(t, 10*time.Second, "the background pass to archive the sale", func() bool {
		stock.mu.Lock()
		defer stock.mu.Unlock()
		return len(stock.archived) == 1
	})
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Start(context.Background()) // nor does a Start after Stop
	if err := New(store, stock, Config{}).Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// fakeLotteryDB is a lottery's draw record and the database's copy of its
// entries, by entry id.
type fakeLotteryDB struct {
	draw   *seckill.DrawRecord // nil: none
	copies map[string]seckill.LotteryEntry
	won    map[string]string // entry id -> reservation
	copied int               // CopyEntries calls
}

func (f *fakeLotteryDB) Draw(context.Context, string) (seckill.DrawRecord, error) {
	if f.draw == nil {
		return seckill.DrawRecord{}, seckill.ErrNotFound
	}
	return *f.draw, nil
}

func (f *fakeLotteryDB) CopyEntries(_ context.Context, _ string, entries []seckill.LotteryEntry, won map[string]string) error {
	f.copied++
	for _, e := range entries {
		f.copies[e.ID] = e
		if r := won[e.UserID]; r != "" {
			f.won[e.ID] = r
		}
	}
	return nil
}

func (f *fakeLotteryDB) EntryCounts(context.Context, string) (int64, int64, error) {
	return int64(len(f.copies)), int64(len(f.won)), nil
}

// TestLotteryKeysGoOnlyAfterTheDrawAndTheCopy: a lottery sale ended and
// settled keeps its keys while its draw has no record or has not
// finished; once drawn, its entries and who won are copied before the
// keys go; without a lottery archive configured it keeps them.
func TestLotteryKeysGoOnlyAfterTheDrawAndTheCopy(t *testing.T) {
	end := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, stock, now := lotterySetup(end)
	db := &fakeLotteryDB{copies: map[string]seckill.LotteryEntry{}, won: map[string]string{}}
	ctx := context.Background()

	if n, err := New(store, stock, Config{Now: func() time.Time { return *now }}).Pass(ctx); err != nil || n != 0 {
		t.Fatalf("Pass without a lottery archive = %d, %v; want the keys kept", n, err)
	}
	a := New(store, stock, Config{Now: func() time.Time { return *now }, Lottery: &Lottery{Draws: db, Entries: stock, Copies: db}})
	for _, draw := range []*seckill.DrawRecord{nil, {SaleID: "tea"}} {
		db.draw = draw
		if n, err := a.Pass(ctx); err != nil || n != 0 || db.copied != 0 || len(stock.archived) != 0 {
			t.Fatalf("Pass with draw record %+v = %d, %v (%d copies); want nothing copied or archived", draw, n, err, db.copied)
		}
	}
	db.draw = &seckill.DrawRecord{SaleID: "tea", DrawnAt: end.Add(-time.Hour)}
	if n, err := a.Pass(ctx); err != nil || n != 1 {
		t.Fatalf("Pass once drawn = %d, %v; want the sale archived", n, err)
	}
	if len(db.copies) != 3 || db.won["e2"] != "r-bob" || len(db.won) != 1 {
		t.Errorf("copied %v, won %v; want the 3 entries, bob's e2 winning r-bob", db.copies, db.won)
	}
}

// TestLotteryCopiedOnlyWhenTheDatabaseIsShort: while archiving a drawn
// lottery is refused for another reason (here the outbox), a pass whose
// database already holds as many entries and winners as Redis neither
// reads the entries nor copies them again; a win recorded since, even
// between a pass's count and its archive script, is copied by the next.
func TestLotteryCopiedOnlyWhenTheDatabaseIsShort(t *testing.T) {
	end := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, stock, now := lotterySetup(end)
	stock.outbox = 1
	db := &fakeLotteryDB{draw: &seckill.DrawRecord{SaleID: "tea", DrawnAt: end.Add(-time.Hour)},
		copies: map[string]seckill.LotteryEntry{}, won: map[string]string{}}
	a := New(store, stock, Config{Now: func() time.Time { return *now }, Lottery: &Lottery{Draws: db, Entries: stock, Copies: db}})
	ctx := context.Background()
	pass := func(wantArchived, wantCopies, wantReads int) {
		t.Helper()
		if n, err := a.Pass(ctx); err != nil || n != wantArchived || db.copied != wantCopies || stock.reads != wantReads {
			t.Fatalf("Pass = %d, %v, after %d copies and %d hash reads; want %d archived, %d copies, %d reads",
				n, err, db.copied, stock.reads, wantArchived, wantCopies, wantReads)
		}
	}
	pass(0, 1, 2) // the first copy: entries and won read once each
	pass(0, 1, 2) // the outbox still refuses: nothing read or copied again
	pass(0, 1, 2)

	stock.won["ann"] = "r-ann" // the waiting list's turn
	pass(0, 2, 4)
	if db.won["e1"] != "r-ann" {
		t.Fatalf("copied wins %v; want ann's e1 winning r-ann", db.won)
	}
	pass(0, 2, 4)

	// A win between a pass's count and its archive script: the script
	// refuses, and the next pass copies it.
	stock.outbox = 0
	stock.counted = func() {
		stock.counted = nil
		stock.mu.Lock()
		stock.won["cy"] = "r-cy"
		stock.mu.Unlock()
	}
	pass(0, 2, 4)
	pass(1, 3, 6)
	if len(db.copies) != 3 || len(db.won) != 3 || stock.archived["tea"] == "" {
		t.Fatalf("copied %v, won %v, archived %v; want every entry and win copied, then the keys gone", db.copies, db.won, stock.archived)
	}
}

// fakePlaces is a database's places of queue sales.
type fakePlaces struct {
	places map[string]int64
	err    error
}

func (f *fakePlaces) ForgetPlaces(_ context.Context, saleID string) (int64, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := f.places[saleID]
	delete(f.places, saleID)
	return n, nil
}

// TestQueuePlacesForgottenWhenArchived: an ended queue sale's places (a
// buyer and an address each) are deleted from the database before its
// keys go, and only then: a sale not yet archivable keeps them, a first
// come sale is not asked, and a failed delete keeps the keys for the
// next pass.
func TestQueuePlacesForgottenWhenArchived(t *testing.T) {
	end := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	store, stock, now := setup(end)
	store.sales["tea"].Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10}
	places := &fakePlaces{places: map[string]int64{"tea": 3, "other": 2}, err: errors.New("database down")}
	a := New(store, stock, Config{After: time.Hour, Now: func() time.Time { return *now }, Places: places})
	ctx := context.Background()
	*now = end.Add(time.Second)
	if n, err := a.Pass(ctx); err != nil || n != 0 || places.places["tea"] != 3 {
		t.Fatalf("a pass before the delay = %d, %v, places %v; want nothing done", n, err, places.places)
	}
	*now = end.Add(time.Hour)
	if n, err := a.Pass(ctx); err == nil || n != 0 || len(stock.archived) != 0 {
		t.Fatalf("a pass whose delete failed = %d, %v, archived %v; want the error and the keys kept", n, err, stock.archived)
	}
	places.err = nil
	if n, err := a.Pass(ctx); err != nil || n != 1 {
		t.Fatalf("a pass = %d, %v; want the sale archived", n, err)
	}
	if _, ok := places.places["tea"]; ok || places.places["other"] != 2 {
		t.Fatalf("places after archiving = %v; want tea's forgotten, other's kept", places.places)
	}

	store, stock, now = setup(end) // first come
	*now = end.Add(time.Hour)
	a = New(store, stock, Config{After: time.Hour, Now: func() time.Time { return *now }, Places: &fakePlaces{err: errors.New("asked")}})
	if n, err := a.Pass(ctx); err != nil || n != 1 {
		t.Fatalf("a first come sale's pass = %d, %v; want it archived without asking for places", n, err)
	}
}
