package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/combiner"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/storetest"
	"github.com/seckill-dev/seckill/internal/waitroom"
)

// TestBookRebuildsALostRoom: buyers join an adaptive queue sale's room
// through the engine's pipeline (the join's script, then the book's
// write) and a node moves and keeps its pace; then Redis, a private
// redis-server, loses everything. A heal's Level puts back every place
// with its score (so every position), the per-address counts and the
// arrival counter, and the pace as kept. A join while the room is lost
// is refused try later (the sale's keys are gone with it).
func TestBookRebuildsALostRoom(t *testing.T) {
	ctx := t.Context()
	stock, raw := storetest.Stock(t)
	db := storetest.SQLite(t)
	places := sqlstore.NewPlaceStore(db)
	book := waitroom.NewBook(stock.Queue(), places, nil)
	queuer := combiner.NewQueuer(stock.Queue(), book, combiner.Config{})
	t.Cleanup(func() { _ = queuer.Stop(context.Background()) })

	now := time.Now()
	sale := &seckill.Sale{ID: "room", Name: "room", Stock: 5, PurchaseLimit: 1, StartAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 2, Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 1, MaxPerSecond: 50}}}
	if _, err := stock.StockStore().Preheat(ctx, sale); err != nil {
		t.Fatal(err)
	}
	join := func(user, ip string) seckill.QueueJoinResult {
		t.Helper()
		r, err := queuer.Join(ctx, sale, 3, seckill.QueueJoin{UserID: user, IP: ip})
		if err != nil {
			t.Fatalf("join of %s: %v", user, err)
		}
		return r
	}
	before := map[string]int64{}
	for _, u := range []string{"ann", "bob", "cat", "dan"} {
		ip := "10.0.0.1"
		if u == "dan" {
			ip = "10.0.0.2"
		}
		r := join(u, ip)
		if r.Position < 1 {
			t.Fatalf("%s's join = %+v; want a place", u, r)
		}
		before[u] = r.Position
	}
	pace, err := stock.Queue().AdvancePace(ctx, sale, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := places.KeepPace(ctx, sale.ID, pace); err != nil {
		t.Fatal(err)
	}

	if err := raw.Do(ctx, raw.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r, err := queuer.Join(ctx, sale, 3, seckill.QueueJoin{UserID: "ann", IP: "10.0.0.1"}); err != nil || r.Refused != seckill.ETRYLATER {
		t.Fatalf("a join while the room is lost = %+v, %v; want try later", r, err)
	}
	if _, err := stock.Healer().BeginHeal(ctx, sale, "tok"); err != nil {
		t.Fatal(err)
	}
	if err := book.Level(ctx, sale); err != nil {
		t.Fatal(err)
	}
	if _, _, err := stock.Healer().ApplyHeal(ctx, sale, "tok", nil, nil); err != nil {
		t.Fatal(err)
	}
	for u, pos := range before {
		if got, ok, err := stock.Queue().Position(ctx, sale.ID, u); err != nil || !ok || got != pos {
			t.Errorf("%s's position after the heal = %d, %v, %v; want %d", u, got, ok, err, pos)
		}
	}
	if r := join("eve", "10.0.0.1"); r.Refused != seckill.ERATELIMITED {
		t.Errorf("a fourth place from 10.0.0.1 after the heal = %+v; want refused (its 3 places restored)", r)
	}
	if r := join("eve", "10.0.0.3"); r.Position != 5 {
		t.Errorf("a newcomer after the heal = %+v; want position 5, behind the restored", r)
	}
	if got, err := stock.Queue().Pace(ctx, sale); err != nil || got.Admitted != pace.Admitted || !got.At.Equal(pace.At) || got.Rate != pace.Rate {
		t.Errorf("the pace after the heal = %+v, %v; want the kept %+v", got, err, pace)
	}
}
