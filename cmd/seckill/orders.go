package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/orderexport"
	"github.com/seckill-dev/seckill/internal/redact"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// exportPage is the page of orders an export reads at a time: what it
// holds in memory, whatever the sale's size.
const exportPage = seckill.MaxOrderPage

// runOrders is `seckill orders export`: a sale's orders, read from the
// database a page at a time by key, written to stdout as CSV or JSON
// Lines for the shop's back office.
func runOrders(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprintln(stderr, "usage: seckill orders export --sale ID [--format csv|jsonl] [--status STATUS]")
		return errUsage
	}
	cfg := DefaultConfig()
	var saleID, format, status string
	fs := flagSet("orders export", stderr)
	fs.StringVar(&saleID, "sale", "", "sale id (required)")
	fs.StringVar(&format, "format", "csv", "csv (with a header line) or jsonl (one JSON object a line)")
	fs.StringVar(&status, "status", "", "only orders of this status: ordered, paid, cancelled, refund_due or refunded")
	stringFlag(fs, &cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "database URL; empty uses SQLite in the data dir")
	stringFlag(fs, &cfg.DataDir, "data-dir", cfg.DataDir, "data directory (embedded database)")
	stringFlag(fs, &cfg.Currency, "currency", cfg.Currency, "currency of sales stored without one")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	f, err := orderexport.ParseFormat(format)
	switch {
	case err != nil:
		fmt.Fprintln(stderr, err)
		return errUsage
	case !seckill.ValidSaleID(saleID):
		fmt.Fprintln(stderr, "--sale is required: a sale id")
		return errUsage
	case status != "" && !seckill.OrderStatus(status).Known():
		fmt.Fprintf(stderr, "--status %q: want ordered, paid, cancelled, refund_due or refunded\n", status)
		return errUsage
	}
	db, err := sqlstore.Open(ctx, cfg.databaseURL())
	if err != nil {
		return err
	}
	defer db.Close()
	sale, err := sqlstore.NewSaleStore(db).Sale(ctx, saleID)
	if errors.Is(err, seckill.ErrNotFound) {
		return fmt.Errorf("no sale %s in %s", saleID, redact.URL(cfg.databaseURL()))
	} else if err != nil {
		return err
	}
	currency := sale.Currency
	if currency == "" {
		currency = cfg.Currency
	}
	orders := sqlstore.NewOrderStore(db)
	n, err := orderexport.Write(ctx, stdout, f, currency, func(ctx context.Context, cursor string) ([]*seckill.Order, string, error) {
		return orders.OrderPage(ctx, seckill.OrderFilter{SaleID: saleID, Status: seckill.OrderStatus(status), Limit: exportPage, Cursor: cursor})
	})
	if err != nil {
		return fmt.Errorf("export after %d orders: %w", n, err)
	}
	fmt.Fprintf(stderr, "exported %d orders of sale %s\n", n, saleID)
	return nil
}
