package sqlstore

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// BenchmarkSQLitePersist is the embedded writer's SQLite path: batches of
// 110 new orders of one sale (the size the embedded pipeline hands the
// writer under load) into a file database, one PersistReservations call
// each. Each variant is a database opened with the URL's extra parameters;
// the variants take turns, b.N batches each in 5 rounds, and each reports
// the process CPU (user + system) per order and the median of its
// per-round ratios to the first variant:
//
//	go test -run '^$' -bench SQLitePersist -benchtime 300x ./internal/sqlstore
func BenchmarkSQLitePersist(b *testing.B) {
	const batch, rounds = 110, 5
	variants := []struct{ name, params string }{
		{"defaults", ""},
		{"temp-store-file", "?_pragma=temp_store(file)"}, // the default before 2026-12-02
		{"sync-full", "?_synchronous=FULL"},
	}
	stores := make([]*OrderStore, len(variants))
	for i, v := range variants {
		db, err := Open(b.Context(), sqltest.SQLite(b)+v.params)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if err := db.Migrate(b.Context()); err != nil {
			b.Fatal(err)
		}
		s := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 100, Stock: 1_000_000_000, PurchaseLimit: 10,
			StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
		if err := NewSaleStore(db).CreateSale(b.Context(), s); err != nil {
			b.Fatal(err)
		}
		stores[i] = NewOrderStore(db)
	}
	batchOf := teaBatches(batch)
	perRound := max(1, b.N/rounds)
	cpu := make([][]float64, len(variants)) // µs per order, per round
	b.ResetTimer()
	for range rounds {
		for i, st := range stores {
			work := make([][]seckill.ReservationEvent, perRound)
			for k := range work {
				work[k] = batchOf()
			}
			before := cpuTime()
			persistAll(b, st, work)
			cpu[i] = append(cpu[i], float64((cpuTime()-before).Microseconds())/float64(perRound*batch))
		}
	}
	b.StopTimer()
	for i, v := range variants {
		ratios := make([]float64, rounds)
		for r := range rounds {
			ratios[r] = cpu[i][r] / cpu[0][r]
		}
		b.ReportMetric(median(cpu[i]), "cpu-µs/order:"+v.name)
		b.ReportMetric(median(ratios), "ratio:"+v.name)
	}
}

// persistAll persists each batch of new orders of sale "tea" in a call of
// its own.
func persistAll(b *testing.B, st *OrderStore, work [][]seckill.ReservationEvent) {
	b.Helper()
	for _, evs := range work {
		out, err := st.PersistReservations(b.Context(), "tea", evs, time.Now(), time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if out[0] != seckill.PersistCreated {
			b.Fatalf("outcome %v, want created", out[0])
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSQLitePersistRepeatBuyers is the writer's SQLite path in the
// shape of `seckill bench live`: batches of 110 new orders of one sale
// from 10,000 buyers who each buy again and again (a limit no buyer
// reaches), so every batch's limit check finds its buyers' earlier orders.
// b.N batches, cpu-µs/order the process CPU per order:
//
//	go test -run '^$' -bench SQLitePersistRepeatBuyers -benchtime 500x ./internal/sqlstore
func BenchmarkSQLitePersistRepeatBuyers(b *testing.B) {
	const batch, buyers = 110, 10_000
	db, err := Open(b.Context(), sqltest.SQLite(b))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	s := &seckill.Sale{ID: "tea", Name: "tea", PriceCents: 100, Stock: seckill.MaxSaleStock, PurchaseLimit: seckill.MaxPurchaseLimit,
		StartAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
	if err := NewSaleStore(db).CreateSale(b.Context(), s); err != nil {
		b.Fatal(err)
	}
	st := NewOrderStore(db)
	work := make([][]seckill.ReservationEvent, b.N)
	next := 0
	for k := range work {
		work[k] = make([]seckill.ReservationEvent, batch)
		for j := range work[k] {
			work[k][j] = seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()),
				SaleID: "tea", UserID: fmt.Sprintf("u%d", next%buyers), Qty: 1, ReservedAt: time.Now()}
			next++
		}
	}
	b.ResetTimer()
	before := cpuTime()
	persistAll(b, st, work)
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N*batch), "cpu-µs/order")
}

// teaBatches returns a maker of batches of size new reservations of the
// sale "tea", each of a buyer of its own (u0, u1, … across its calls).
func teaBatches(size int) func() []seckill.ReservationEvent {
	next := 0
	return func() []seckill.ReservationEvent {
		evs := make([]seckill.ReservationEvent, size)
		for j := range evs {
			evs[j] = seckill.ReservationEvent{ReservationID: seckill.NewReservationID("tea", time.Now()),
				SaleID: "tea", UserID: fmt.Sprintf("u%d", next), Qty: 1, ReservedAt: time.Now()}
			next++
		}
		return evs
	}
}
