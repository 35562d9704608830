package lottery_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/lottery"
	"github.com/seckill-dev/seckill/internal/redis"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/storetest"
)

// failing is the database's side of a Book that refuses to write while
// down is set, as a database out of reach does, and that calls before, if
// set, ahead of each write (a test holds a write there).
type failing struct {
	*sqlstore.EntryStore
	down   atomic.Bool
	before func()
}

func (f *failing) KeepEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry) ([]seckill.LotteryEntry, error) {
	if f.before != nil {
		f.before()
	}
	if f.down.Load() {
		return nil, &seckill.Error{Code: seckill.EUNAVAILABLE, Message: "the database is unavailable"}
	}
	return f.EntryStore.KeepEntries(ctx, saleID, entries)
}

type bookFixture struct {
	db      *sqlstore.DB
	stock   *redis.Store
	raw     rueidis.Client // to the stock store's private redis-server, for losses
	ledger  *failing
	book    *lottery.Book
	enterer *combiner.Enterer
	sale    *seckill.Sale
}

func newBookFixture(t *testing.T) *bookFixture {
	t.Helper()
	ctx := t.Context()
	stock, raw := storetest.Stock(t)
	db := storetest.SQLite(t)
	now := time.Now()
	sale := &seckill.Sale{ID: "lot", Name: "tea", Stock: 2, PurchaseLimit: 2, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: now.Add(time.Hour / 2)}}
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	ledger := &failing{EntryStore: sqlstore.NewEntryStore(db)}
	book := lottery.NewBook(stock.Lottery(), ledger, nil)
	enterer := combiner.NewEnterer(stock.Lottery(), book, combiner.Config{})
	t.Cleanup(func() { _ = enterer.Stop(context.Background()) })
	return &bookFixture{db: db, stock: stock, raw: raw, ledger: ledger, book: book, enterer: enterer, sale: sale}
}

// enter enters users one after another through the engine's pipeline:
// the stock store's script, then the book's write (combiner.Enterer).
func (f *bookFixture) enter(t *testing.T, users ...string) ([]seckill.EntryResult, error) {
	t.Helper()
	var out []seckill.EntryResult
	for _, u := range users {
		r, err := f.enterer.Enter(t.Context(), f.sale, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: u, Qty: 1})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// kept is the database's entry of user, if any.
func (f *bookFixture) kept(t *testing.T, user string) (seckill.LotteryEntry, bool) {
	t.Helper()
	e, _, ok, err := f.ledger.KeptEntry(t.Context(), f.sale.ID, user)
	if err != nil {
		t.Fatal(err)
	}
	return e, ok
}

// TestBookAnswersOnlyWhatTheDatabaseKeeps: an entry is answered once the
// database holds it; an entry, new or a repeat, the database refuses is
// answered try later, and its retry, once the database is back, answers
// the same entry (now kept).
func TestBookAnswersOnlyWhatTheDatabaseKeeps(t *testing.T) {
	f := newBookFixture(t)
	res, err := f.enter(t, "ann", "bob")
	if err != nil || !res[0].New || !res[1].New {
		t.Fatalf("entries = %+v, %v; want both new", res, err)
	}
	for _, r := range res {
		if k, ok := f.kept(t, r.Entry.UserID); !ok || k != r.Entry {
			t.Fatalf("the database's entry of %s = %+v, %v; want %+v", r.Entry.UserID, k, ok, r.Entry)
		}
	}

	f.ledger.down.Store(true)
	for _, u := range []string{"cat", "ann"} {
		res, err = f.enter(t, u)
		if !errors.Is(err, lottery.ErrNotKept) || seckill.ErrorCode(err) != seckill.ETRYLATER || res != nil {
			t.Fatalf("%s's entry with the database down = %+v, %v; want ErrNotKept (try_later)", u, res, err)
		}
	}
	if _, ok := f.kept(t, "cat"); ok {
		t.Fatal("cat's entry is in the database although its write failed")
	}
	inStock, ok, err := f.stock.Lottery().Entry(t.Context(), f.sale.ID, "cat")
	if err != nil || !ok {
		t.Fatalf("cat's entry in the stock store = %v, %v; want there (the script ran)", ok, err)
	}

	f.ledger.down.Store(false)
	res, err = f.enter(t, "cat")
	if err != nil || res[0].Entry != inStock {
		t.Fatalf("cat's retry = %+v, %v; want the entry the stock store made, %+v", res, err, inStock)
	}
	if k, ok := f.kept(t, "cat"); !ok || k != inStock {
		t.Fatalf("cat's entry in the database after the retry = %+v, %v; want %+v", k, ok, inStock)
	}
}

// TestBookPutsBackWhatTheStockStoreLost: after the stock store lost its
// entries (Redis restarted empty, the embedded store restarted), Level
// puts back every entry the database keeps and keeps the stock store's
// entry whose answer failed, and returns what both then hold; and a buyer
// whose entry the stock store lost before Level ran, entering again, is answered the entry she had, not a
// new one, which the stock store then holds.
func TestBookPutsBackWhatTheStockStoreLost(t *testing.T) {
	f := newBookFixture(t)
	ctx := t.Context()
	before, err := f.enter(t, "ann", "bob", "cat")
	if err != nil {
		t.Fatal(err)
	}
	f.ledger.down.Store(true)
	if _, err := f.enter(t, "dan"); err == nil {
		t.Fatal("dan's entry answered with the database down")
	}
	f.ledger.down.Store(false)
	dan, _, _ := f.stock.Lottery().Entry(ctx, f.sale.ID, "dan")

	// The stock store loses ann's and bob's entries; it then makes ann a
	// new one.
	if err := f.raw.Do(ctx, f.raw.B().Hdel().Key("sk:{"+f.sale.ID+"}:entries").Field("ann", "bob").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	again, err := f.enter(t, "ann")
	if err != nil || again[0].New || again[0].Entry != before[0].Entry {
		t.Fatalf("ann entering again after the loss = %+v, %v; want her first entry %+v, not new", again, err, before[0].Entry)
	}
	if e, _, _ := f.stock.Lottery().Entry(ctx, f.sale.ID, "ann"); e != before[0].Entry {
		t.Fatalf("ann's entry in the stock store = %+v; want the database's %+v", e, before[0].Entry)
	}

	leveled, err := f.book.Level(ctx, f.sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]seckill.LotteryEntry{"ann": before[0].Entry, "bob": before[1].Entry, "cat": before[2].Entry, "dan": dan}
	all, err := f.stock.Lottery().Entries(ctx, f.sale.ID)
	if err != nil || len(all) != len(want) {
		t.Fatalf("entries in the stock store after Level = %+v, %v; want %d", all, err, len(want))
	}
	// What Level returns, the draw's input, is what both now hold.
	if len(leveled) != len(want) {
		t.Fatalf("Level returned %+v; want the %d entries both hold", leveled, len(want))
	}
	for _, e := range leveled {
		if want[e.UserID] != e {
			t.Errorf("Level returned %+v for %s; want %+v", e, e.UserID, want[e.UserID])
		}
	}
	// The draw's results, kept by the draw before the stock store had
	// them, come back too.
	won := map[string]string{"bob": "r-bob"}
	if err := f.book.KeepWon(ctx, f.sale.ID, []seckill.LotteryEntry{before[1].Entry}, won); err != nil {
		t.Fatal(err)
	}
	if _, err := f.book.Level(ctx, f.sale.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := f.stock.Lottery().AllWon(ctx, f.sale.ID); err != nil || len(got) != 1 || got["bob"] != "r-bob" {
		t.Fatalf("the draw's results in the stock store after Level = %v, %v; want %v", got, err, won)
	}
	for _, e := range all {
		if want[e.UserID] != e {
			t.Errorf("%s in the stock store after Level = %+v; want %+v", e.UserID, e, want[e.UserID])
		}
		if k, ok := f.kept(t, e.UserID); !ok || k != e {
			t.Errorf("%s in the database after Level = %+v, %v; want %+v", e.UserID, k, ok, e)
		}
	}
}
