package sqlstore

import (
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestLotterySaleKeepsItsAdmissionAndGetsADraw: a lottery sale reads back
// with its admission, and has a draw record with a secret seed from its
// creation; a first come sale has neither.
func TestLotterySaleKeepsItsAdmissionAndGetsADraw(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		start := time.Now().Truncate(time.Millisecond).UTC()
		s := &seckill.Sale{ID: "draw", Name: "draw", Stock: 3, PurchaseLimit: 1, StartAt: start, EndAt: start.Add(time.Hour),
			Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: start.Add(time.Minute)}}
		if err := NewSaleStore(db).CreateSale(ctx, s); err != nil {
			t.Fatal(err)
		}
		createSale(t, db, "plain", 3)
		got, err := NewSaleStore(db).Sale(ctx, "draw")
		if err != nil || got.Admission != s.Admission {
			t.Fatalf("Sale = %+v, %v; want admission %+v", got.Admission, err, s.Admission)
		}
		plain, err := NewSaleStore(db).Sale(ctx, "plain")
		if err != nil || plain.Admission.Of() != seckill.AdmitFirstCome {
			t.Fatalf("plain sale admission = %+v, %v", plain.Admission, err)
		}
		ds := NewDrawStore(db)
		open, err := ds.OpenDraws(ctx, start)
		if err != nil || !slices.Equal(open, []string{"draw"}) {
			t.Fatalf("OpenDraws = %v, %v; want [draw]", open, err)
		}
		if open, _ := ds.OpenDraws(ctx, start.Add(time.Hour)); len(open) != 0 {
			t.Fatalf("OpenDraws after the end = %v", open)
		}
		d, err := ds.EnsureDraw(ctx, "draw")
		if err != nil || len(d.Seed) != 64 || d.Drawn() {
			t.Fatalf("EnsureDraw = %+v, %v", d, err)
		}
		if again, _ := ds.EnsureDraw(ctx, "draw"); again.Seed != d.Seed {
			t.Fatal("EnsureDraw made a second seed")
		}
		if pub := d.Published(); pub.Seed != "" || pub.Commitment != seckill.DrawCommitment(d.Seed) {
			t.Fatalf("undrawn publication %+v shows the seed or the wrong commitment", pub)
		}
	})
}

// TestDrawLeaseIsHeldByOneOwnerUntilItExpires and a finished draw stands.
func TestDrawLeaseIsHeldByOneOwnerUntilItExpires(t *testing.T) {
	onDialects(t, dialects, func(t *testing.T, db *DB, _ *OrderStore) {
		ctx := t.Context()
		createSale(t, db, "lease", 3)
		ds := NewDrawStore(db)
		d, err := ds.EnsureDraw(ctx, "lease")
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		lease := func(owner string, at time.Time, want bool) {
			t.Helper()
			ok, err := ds.LeaseDraw(ctx, "lease", owner, at, at.Add(10*time.Second))
			if err != nil || ok != want {
				t.Fatalf("LeaseDraw(%s, +%s) = %v, %v; want %v", owner, at.Sub(now), ok, err, want)
			}
		}
		lease("a", now, true)
		lease("b", now.Add(time.Second), false)
		lease("a", now.Add(2*time.Second), true) // renewed to +12s
		lease("b", now.Add(11*time.Second), false)
		lease("b", now.Add(13*time.Second), true)

		d.DrawnAt, d.Entrants, d.Stock, d.Winners = now, 5, 3, []string{"e1", "e2"}
		if err := ds.FinishDraw(ctx, d); err != nil {
			t.Fatal(err)
		}
		other := d
		other.Winners = []string{"e9"}
		if err := ds.FinishDraw(ctx, other); err != nil {
			t.Fatal(err)
		}
		got, err := ds.EnsureDraw(ctx, "lease")
		if err != nil || !got.Drawn() || got.Entrants != 5 || got.Stock != 3 || !slices.Equal(got.Winners, []string{"e1", "e2"}) {
			t.Fatalf("draw = %+v, %v; want the first finish", got, err)
		}
		if got.Published().Seed != d.Seed {
			t.Fatal("a finished draw does not reveal its seed")
		}
	})
}
