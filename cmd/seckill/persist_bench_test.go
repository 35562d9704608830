package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// BenchmarkOrderPersistence compares, in one run on MariaDB, the
// per-order-transaction baseline (one transaction per order: the
// conditional UPDATE … WHERE stock > 0 and the INSERT; 32 concurrent
// writers) with seckill's whole pipeline (Redis reserve
// script → outbox → relay → RabbitMQ → order writer, a transaction per
// batch). Both report orders/s; compare the two in the same run:
//
//	go test -run XXX -bench OrderPersistence -benchtime 5000x ./cmd/seckill
func BenchmarkOrderPersistence(b *testing.B) {
	b.Run("per-order-transaction", func(b *testing.B) {
		ctx := context.Background()
		url := sqltest.MySQL(b)
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if err := db.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		sale := benchSale(b, sqlstore.NewSaleStore(db), int64(b.N))
		// The textbook way, on the same tables: one transaction per order,
		// a conditional stock update and the insert, 32 connections.
		raw := rawMySQL(b, url)
		var n atomic.Int64
		b.SetParallelism(16) // 32 writers on 2 cores
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1)
				id := seckill.NewReservationID(sale.ID, time.Now())
				ms := time.Now().UnixMilli()
				tx, err := raw.BeginTx(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				res, err := tx.ExecContext(ctx, `UPDATE sales SET stock = stock - 1 WHERE id = ? AND stock > 0`, sale.ID)
				if err == nil {
					if k, _ := res.RowsAffected(); k != 1 {
						err = fmt.Errorf("no stock")
					}
				}
				if err == nil {
					_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, reservation_id, sale_id, user_id, qty, amount_cents, status, pay_by_ms, reserved_at_ms, created_at_ms, updated_at_ms)
						VALUES (?, ?, ?, ?, 1, 100, 'ordered', ?, ?, ?, ?)`, seckill.OrderIDOf(id), id, sale.ID, fmt.Sprint("u", i), ms+3600000, ms, ms, ms)
				}
				if err == nil {
					err = tx.Commit()
				} else {
					tx.Rollback()
				}
				if err != nil {
					b.Error(err)
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
	})

	for _, v := range []struct{ writers, batch int }{{2, 100}, {1, 100}, {1, 500}, {2, 500}, {4, 500}} {
		b.Run(fmt.Sprintf("pipeline/writers=%d/batch=%d", v.writers, v.batch), func(b *testing.B) {
			benchPipeline(b, v.writers, v.batch)
		})
	}
}

func benchPipeline(b *testing.B, writers, batch int) {
	{
		base := stacks[0].config(b)
		e := startEngine(b, func(c *Config) { base(c); c.OrderWriters, c.OrderBatch = writers, batch })
		ctx := context.Background()
		sale := benchSale(b, sqlstore.NewSaleStore(e.m.db), int64(b.N))
		if _, err := e.m.stock.Preheat(ctx, sale); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		start := time.Now()
		// Claims go in the way the combiner sends them: batches of up to
		// 256 per script call.
		for done := 0; done < b.N; {
			n := min(256, b.N-done)
			reqs := make([]seckill.ReserveRequest, n)
			for i := range reqs {
				reqs[i] = seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()),
					UserID: fmt.Sprint("u", done+i), Qty: 1}
			}
			res, err := e.m.stock.Reserve(ctx, sale.ID, reqs)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != seckill.OutcomeReserved {
					b.Fatalf("reserve: %v", r.Outcome)
				}
			}
			done += n
		}
		deadline := time.Now().Add(10 * time.Minute)
		for {
			s, err := sqlstore.NewSaleStore(e.m.db).Sale(ctx, sale.ID)
			if err != nil {
				b.Fatal(err)
			}
			if s.Unsold == sale.Stock-int64(b.N) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d orders persisted", sale.Stock-s.Unsold, b.N)
			}
			time.Sleep(2 * time.Millisecond)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
	}
}

// rawMySQL opens a plain database/sql handle on a mysql:// URL.
func rawMySQL(b *testing.B, rawURL string) *sql.DB {
	b.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	b.Cleanup(func() { db.Close() })
	return db
}

func benchSale(b *testing.B, sales *sqlstore.SaleStore, stock int64) *seckill.Sale {
	b.Helper()
	now := time.Now()
	s := &seckill.Sale{ID: servicetest.UniqueName("b"), Name: "bench", PriceCents: 100, Stock: max(stock, 1),
		PurchaseLimit: 1, StartAt: now.Add(-time.Second), EndAt: now.Add(time.Hour)}
	if err := sales.CreateSale(context.Background(), s); err != nil {
		b.Fatal(err)
	}
	return s
}
