package seckill

import "time"

// The ledger: what the database and the stock store each hold of a sale,
// compared by internal/reconcile to prove nothing was oversold or lost.

// ReservationRecord is the stock store's record of one reservation.
type ReservationRecord struct {
	ReservationID string
	UserID        string
	Qty           int64
	Restored      bool
	ReservedAt    time.Time
	// KeyDigest is the IdempotencyDigest of the key the reservation was
	// made under, "" when none or unknown. Only a heal sets it: a record
	// it adds from an order brings the order's key back with it.
	KeyDigest string
}

// SaleLedger is everything the database knows of one sale's units.
type SaleLedger struct {
	Sale     *Sale
	Orders   []*Order
	Failed   []*FailedOrder
	Restores []*RestoreRequest
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
	Sale                            *Sale
	Ordered, Paid, Cancelled, Other LedgerCount // Other: no known status
	Failed                          LedgerCount
	LostClaims                      LedgerCount // failed of ReasonLostInStockStore
	// Restore requests by state; Alerted are those not done that alerted.
	Parked, RedisPending, Done, OtherState, Alerted int64
	// OverLimitBuyers hold more than the per-user limit in orders that hold
	// units: must be 0.
	OverLimitBuyers int64
	Archive         *SaleArchive // set once the stock-store keys were dropped
}

// SaleArchive is what the database keeps of an archived sale's stock-store
// side: when its keys went and how many claims it held. After that, the
// database alone speaks for the sale.
type SaleArchive struct {
	ArchivedAt time.Time `json:"archived_at"`
	Claims     int64     `json:"claims"`
}
