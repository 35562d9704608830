package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seckill-dev/seckill"
)

// ArchivingLedger is a stock store that also keeps, once a sale's keys are
// archived, the summary of the reconciliation it passed then
// (internal/redis).
type ArchivingLedger interface {
	StockLedger
	ArchivedSummary(ctx context.Context, saleID string) (summary string, ok bool, err error)
}

// Sale reconciles a sale; an archived one (whose stock-store keys are
// gone) from the database alone. A sale archived before the database
// recorded archives answers the reconciliation it passed when archived.
func Sale(ctx context.Context, saleID string, db LedgerPages, stock ArchivingLedger, now time.Time, opts Options) (*Report, error) {
	rep, err := Reconcile(ctx, saleID, db, stock, now, opts)
	if err != nil || rep.StockStore.Loaded || rep.Archived != nil {
		return rep, err
	}
	if summary, ok, err := stock.ArchivedSummary(ctx, saleID); err != nil {
		return nil, err
	} else if ok {
		var old Report
		if err := json.Unmarshal([]byte(summary), &old); err != nil {
			return nil, fmt.Errorf("reconcile %s: archived summary: %w", saleID, err)
		}
		return &old, nil
	}
	return rep, nil
}

// Final is the last reconciliation of a sale before its keys are archived
// (archive.Config.Final): the report as JSON, the summary the archive
// keeps, or an error if the sale does not balance.
func Final(ctx context.Context, saleID string, db LedgerPages, stock StockLedger, now time.Time) (string, error) {
	rep, err := Reconcile(ctx, saleID, db, stock, now, Options{})
	if err != nil {
		return "", err
	}
	if !rep.OK() {
		return "", fmt.Errorf("oversold %d, %d unexplained, %d discrepancies", rep.Oversold, rep.Unexplained.Count, len(rep.Discrepancies))
	}
	body, err := json.Marshal(rep)
	return string(body), err
}

// Probe reads the sale's row and its stock within budget (the request
// budget) before a full comparison starts: the reconciliation route's own
// budget is long enough for a sale of millions, and a backend that is
// down must get its 503 now, not at the end of that budget. Pass the
// stores as the request path sees them (through their breakers). A sale
// the stock store does not hold is no failure (not preheated yet, or
// archived).
func Probe(ctx context.Context, budget time.Duration, saleID string, sales SaleReader, stock StockReader) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if _, err := sales.Sale(ctx, saleID); err != nil {
		return err
	}
	if _, err := stock.Stock(ctx, saleID); err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return err
	}
	return nil
}

// SaleReader reads a sale's row (the database).
type SaleReader interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
}

// StockReader reads a sale's stock (the stock store).
type StockReader interface {
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
}
