package lottery_test

import (
	"context"
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
