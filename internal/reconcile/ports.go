package reconcile

import (
	"context"

	"github.com/seckill-dev/seckill"
)

// LedgerPages reads a sale's database ledger a page at a time, so a sale of
// millions of reservations costs one page of memory (internal/sqlstore).
type LedgerPages interface {
	// LedgerTotals reads the sale and its ledger's sums in one consistent
	// read; ErrNotFound for an unknown sale.
	LedgerTotals(ctx context.Context, saleID string) (*seckill.LedgerTotals, error)
	// The *After pages hold up to limit rows whose reservation id sorts
	// after after ("" first), by reservation id.
	OrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.Order, error)
	FailedOrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.FailedOrder, error)
	RestoresAfter(ctx context.Context, saleID, after string, limit int) ([]*seckill.RestoreRequest, error)
	// LedgerOf returns the rows of parts of the reservations ids (Sale nil).
	LedgerOf(ctx context.Context, saleID string, ids []string, parts seckill.LedgerParts) (*seckill.SaleLedger, error)
}

// StockLedger reads a sale's stock-store side (internal/redis).
type StockLedger interface {
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
	Reservations(ctx context.Context, saleID string) ([]seckill.ReservationRecord, error)
	// ScanReservations calls fn with pages of about count records, each
	// record once, in no order, no snapshot; fn's error ends the scan.
	ScanReservations(ctx context.Context, saleID string, count int, fn func([]seckill.ReservationRecord) error) error
	// ReservationsOf returns the records of ids the stock store has.
	ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]seckill.ReservationRecord, error)
	// OutboxLen counts entries not yet relayed, unacknowledged ones included.
	OutboxLen(ctx context.Context, saleID string) (int64, error)
}
