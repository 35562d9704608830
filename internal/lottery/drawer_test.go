package lottery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/lottery"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

type oneSale struct{ s *seckill.Sale }

func (o oneSale) Sale(context.Context, string) (*seckill.Sale, error) { return o.s, nil }

// TestDrawWaitsForALostSale: the stock store lost the sale (Redis restarted
// empty, before its heal) when the draw came due, so the winners'
// reservations are refused "not started". Before, the draw passed every
// winner over and published winners who read "lost". Now it stops and
// runs again: not drawn, nobody recorded as won; once the sale is back,
// the same draw gives the stock to its winners, each of whom reads won.
func TestDrawWaitsForALostSale(t *testing.T) {
	f := newBookFixture(t)
	ctx := t.Context()
	if _, err := f.enter(t, "ann", "bob", "cat", "dan"); err != nil {
		t.Fatal(err)
	}
	draws := sqlstore.NewDrawStore(f.db)
	due := f.sale.Admission.EntriesCloseAt.Add(time.Second)
	d := lottery.New(lottery.Config{
		Draws: draws, Sales: oneSale{f.sale}, Entries: f.stock.Lottery(), Stock: f.stock.StockStore(), Book: f.book,
		Owner: "node-a", Now: func() time.Time { return due },
	})
	if err := f.raw.Do(ctx, f.raw.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := d.RunSale(ctx, f.sale.ID); err == nil {
		t.Fatal("a draw with its sale lost ran through; want it to wait for the sale")
	}
	if rec, err := draws.EnsureDraw(ctx, f.sale.ID); err != nil || rec.Drawn() {
		t.Fatalf("the draw with its sale lost = %+v, %v; want not drawn", rec, err)
	}
	if won, err := f.stock.Lottery().AllWon(ctx, f.sale.ID); err != nil || len(won) != 0 {
		t.Fatalf("winners recorded with the sale lost = %v, %v; want none", won, err)
	}

	// The sale is back (a heal: nothing was sold, so as preheated).
	if _, err := f.stock.StockStore().Preheat(ctx, f.sale); err != nil {
		t.Fatal(err)
	}
	if err := d.RunSale(ctx, f.sale.ID); err != nil {
		t.Fatal(err)
	}
	rec, err := draws.EnsureDraw(ctx, f.sale.ID)
	if err != nil || !rec.Drawn() || rec.Entrants != 4 || len(rec.Winners) != int(f.sale.Stock) {
		t.Fatalf("the draw once the sale is back = %+v, %v; want drawn, 4 entrants, %d winners", rec, err, f.sale.Stock)
	}
	won, err := f.stock.Lottery().AllWon(ctx, f.sale.ID)
	if err != nil || len(won) != int(f.sale.Stock) {
		t.Fatalf("winners recorded = %v, %v; want %d", won, err, f.sale.Stock)
	}
	winners := map[string]bool{}
	for _, id := range rec.Winners {
		winners[id] = true
	}
	for _, u := range []string{"ann", "bob", "cat", "dan"} {
		e, ok := f.kept(t, u)
		if !ok {
			t.Fatalf("%s's entry is not kept", u)
		}
		if _, w := won[u]; w != winners[e.ID] {
			t.Fatalf("%s (entry %s) reads won = %v; the draw published winners %v", u, e.ID, w, rec.Winners)
		}
	}
}

// TestDrawReadsEntriesAnsweredAtTheClose: cat's entry script runs just
// before the draw closes the entries, and its write to the database is
// slow; Redis then loses cat's entry (its last write), so only the
// database will have it, once the write lands. The draw must not read the
// entries until every entry answered "entered" is written: within two
// request budgets of the close (seckill.EntriesSettled). Before, it read
// them at once and drew without cat, who was then answered "entered".
func TestDrawReadsEntriesAnsweredAtTheClose(t *testing.T) {
	f := newBookFixture(t)
	ctx := t.Context()
	if _, err := f.enter(t, "ann", "bob"); err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // registered after the fixture's: runs before the enterer stops
	f.ledger.before = func() {
		close(held)
		<-release
	}
	type answer struct {
		r   seckill.EntryResult
		err error
	}
	cat := make(chan answer, 1)
	go func() {
		r, err := f.enterer.Enter(ctx, f.sale, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: "cat", Qty: 1})
		cat <- answer{r, err}
	}()
	<-held // cat's script ran: Redis has her entry, the database not yet
	keys, err := f.raw.Do(ctx, f.raw.B().Keys().Pattern("*{"+f.sale.ID+"}:entries").Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the entries' key = %v, %v", keys, err)
	}
	if n, err := f.raw.Do(ctx, f.raw.B().Hdel().Key(keys[0]).Field("cat").Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("losing cat's entry in Redis = %d, %v", n, err)
	}

	draws := sqlstore.NewDrawStore(f.db)
	due := f.sale.Admission.EntriesCloseAt.Add(time.Second)
	d := lottery.New(lottery.Config{
		Draws: draws, Sales: oneSale{f.sale}, Entries: f.stock.Lottery(), Stock: f.stock.StockStore(), Book: f.book,
		Owner: "node-a", Now: func() time.Time { return due }, EntryBudget: 100 * time.Millisecond,
	})
	if err := d.RunSale(ctx, f.sale.ID); err != nil {
		t.Fatal(err)
	}
	if rec, err := draws.EnsureDraw(ctx, f.sale.ID); err != nil || rec.Drawn() {
		t.Fatalf("the draw at the close = %+v, %v; want it to wait for the entries answered meanwhile", rec, err)
	}
	if closed, err := f.enterer.Enter(ctx, f.sale, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: "dan", Qty: 1}); err != nil || closed.Refused != seckill.EENDED {
		t.Fatalf("an entry after the draw closed them = %+v, %v; want refused as ended", closed, err)
	}

	letGo() // cat's write lands, and she is answered
	a := <-cat
	if a.err != nil || !a.r.New {
		t.Fatalf("cat's entry = %+v, %v; want entered", a.r, a.err)
	}
	deadline := time.Now().Add(time.Minute)
	var rec seckill.DrawRecord
	for ; !rec.Drawn(); rec, err = draws.EnsureDraw(ctx, f.sale.ID) {
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the draw = %+v, %v; want drawn within a minute", rec, err)
		}
		if err := d.RunSale(ctx, f.sale.ID); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Entrants != 3 {
		t.Fatalf("the draw counted %d entrants; want 3 (ann, bob and cat, answered entered)", rec.Entrants)
	}
	won, err := f.stock.Lottery().AllWon(ctx, f.sale.ID)
	if err != nil || len(won) != int(f.sale.Stock) {
		t.Fatalf("winners recorded = %v, %v; want %d", won, err, f.sale.Stock)
	}
	if e, ok, err := f.stock.Lottery().Entry(ctx, f.sale.ID, "cat"); err != nil || !ok || e != a.r.Entry {
		t.Fatalf("cat's entry in Redis after the draw = %+v, %v, %v; want %+v, put back", e, ok, err, a.r.Entry)
	}
}
