package seckill

import (
	"context"
	"time"
)

// The ledger: what the database and the stock store each hold of a sale,
// read by reconciliation (internal/reconcile) to prove nothing was
// oversold or lost.

// ReservationRecord is the stock store's record of one reservation, for
// reconciliation.
type ReservationRecord struct {
	ReservationID string
	UserID        string
	Qty           int64
	Restored      bool
	ReservedAt    time.Time
}

// SaleLedger is everything the database knows of one sale's units, for
// reconciliation.
type SaleLedger struct {
	Sale     *Sale
	Orders   []*Order
	Failed   []*FailedOrder
	Restores []*RestoreRequest
}

// LedgerStore reads a sale's database ledger (internal/sqlstore).
type LedgerStore interface {
	SaleLedger(ctx context.Context, saleID string) (*SaleLedger, error)
}

// LedgerPages reads a sale's database ledger a page at a time, so that
// comparing a sale of millions of reservations with the stock store costs
// the memory of one page (internal/sqlstore).
type LedgerPages interface {
	// LedgerTotals reads the sale and what its ledger adds up to, in one
	// consistent read. ErrNotFound for an unknown sale.
	LedgerTotals(ctx context.Context, saleID string) (*LedgerTotals, error)
	// OrdersAfter, FailedOrdersAfter and RestoresAfter return up to limit
	// rows of the sale whose reservation id sorts after after (byte
	// order; "" for the first page), by reservation id.
	OrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*Order, error)
	FailedOrdersAfter(ctx context.Context, saleID, after string, limit int) ([]*FailedOrder, error)
	RestoresAfter(ctx context.Context, saleID, after string, limit int) ([]*RestoreRequest, error)
	// LedgerOf returns the rows of parts (orders, failed orders, restore
	// requests) of the sale that belong to reservations of ids (Sale is
	// nil).
	LedgerOf(ctx context.Context, saleID string, ids []string, parts LedgerParts) (*SaleLedger, error)
}

// LedgerParts names the tables a LedgerOf reads.
type LedgerParts uint8

const (
	LedgerOrders LedgerParts = 1 << iota
	LedgerFailed
	LedgerRestores
	LedgerAll = LedgerOrders | LedgerFailed | LedgerRestores
)

// LedgerCount counts rows and the units they hold.
type LedgerCount struct {
	Count int64 `json:"count"`
	Units int64 `json:"units"`
}

// LedgerTotals is what a sale's database ledger adds up to.
type LedgerTotals struct {
	Sale *Sale
	// Orders by status; Other are orders of no known status.
	Ordered, Paid, Cancelled, Other LedgerCount
	Failed                          LedgerCount
	// LostClaims are the failed orders of ReasonLostInStockStore.
	LostClaims LedgerCount
	// Restore requests by state; OtherState of no known state; Alerted
	// are those not done that raised a stuck alert.
	Parked, RedisPending, Done, OtherState, Alerted int64
	// OverLimitBuyers counts the buyers whose orders ordered or paid hold
	// more units than the sale's per-user limit (must be 0).
	OverLimitBuyers int64
	// Archive is set once the sale's stock-store keys were dropped.
	Archive *SaleArchive
}

// SaleArchive is what the database keeps of an archived sale's stock-store
// side: when its keys went, and how many reservation records (claims) the
// stock store held then. After that, the database alone speaks for it.
type SaleArchive struct {
	ArchivedAt time.Time `json:"archived_at"`
	Claims     int64     `json:"claims"`
}

// StockLedger reads a sale's stock-store side (internal/redis).
type StockLedger interface {
	Stock(ctx context.Context, saleID string) (StockLevel, error)
	// Reservations lists every reservation record of a sale.
	Reservations(ctx context.Context, saleID string) ([]ReservationRecord, error)
	// ScanReservations calls fn with every reservation record of a sale, a
	// page of about count records at a time, in no order; a record appears
	// once. The pages are no snapshot of a live sale. fn's error ends the
	// scan and is returned.
	ScanReservations(ctx context.Context, saleID string, count int, fn func([]ReservationRecord) error) error
	// ReservationsOf returns the records of those of ids (reservations of
	// the sale) the stock store has, by reservation id.
	ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]ReservationRecord, error)
	// OutboxLen is the number of outbox entries not yet relayed (including
	// those a relay holds unacknowledged).
	OutboxLen(ctx context.Context, saleID string) (int64, error)
}
