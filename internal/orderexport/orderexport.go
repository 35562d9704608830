// Package orderexport writes a sale's orders for the shop's back office,
// as CSV or JSON Lines, a page at a time: whatever the sale's size, the
// export holds one page of orders and one buffered line in memory.
package orderexport

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/seckill-dev/seckill"
)

// Format is an export's file format.
type Format string

const (
	CSV   Format = "csv"   // RFC 4180, a header line first
	JSONL Format = "jsonl" // one JSON object per line
)

// ParseFormat reads a format name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case CSV, JSONL:
		return f, nil
	}
	return "", fmt.Errorf("format %q: want csv or jsonl", s)
}

// Row is one exported order: the order and its sale's currency. Times are
// UTC, RFC 3339 with milliseconds.
type Row struct {
	OrderID       string `json:"order_id"`
	ReservationID string `json:"reservation_id"`
	SaleID        string `json:"sale_id"`
	UserID        string `json:"user_id"`
	Qty           int64  `json:"qty"`
	AmountCents   int64  `json:"amount_cents"`
	Currency      string `json:"currency"`
	Status        string `json:"status"`
	PayBy         string `json:"pay_by"`
	ReservedAt    string `json:"reserved_at"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
	CancelReason  string `json:"cancel_reason"`
}

// Header is the CSV header: Row's JSON names, in order.
var Header = []string{"order_id", "reservation_id", "sale_id", "user_id", "qty", "amount_cents", "currency",
	"status", "pay_by", "reserved_at", "created_at", "updated_at", "cancel_reason"}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func stamp(t time.Time) string { return t.UTC().Format(timeLayout) }

// RowOf is the row of order o of a sale priced in currency.
func RowOf(o *seckill.Order, currency string) Row {
	return Row{
		OrderID: o.ID, ReservationID: o.ReservationID, SaleID: o.SaleID, UserID: o.UserID,
		Qty: o.Qty, AmountCents: o.AmountCents, Currency: currency, Status: string(o.Status),
		PayBy: stamp(o.PayBy), ReservedAt: stamp(o.ReservedAt), CreatedAt: stamp(o.CreatedAt),
		UpdatedAt: stamp(o.UpdatedAt), CancelReason: o.CancelReason,
	}
}

// Pages returns the page of orders after cursor ("" for the first) and
// the cursor of the next ("" after the last): seckill.OrderLister's
// OrderPage with the filter's other fields fixed.
type Pages func(ctx context.Context, cursor string) (page []*seckill.Order, next string, err error)

// Write writes every order pages yields to w in format, flushing after
// each page, and returns how many it wrote. It holds one page at a time.
func Write(ctx context.Context, w io.Writer, format Format, currency string, pages Pages) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var put func(*seckill.Order) error
	switch format {
	case CSV:
		cw := csv.NewWriter(bw)
		if err := cw.Write(Header); err != nil {
			return 0, err
		}
		rec := make([]string, len(Header))
		put = func(o *seckill.Order) error {
			r := RowOf(o, currency)
			rec[0], rec[1], rec[2], rec[3] = r.OrderID, r.ReservationID, r.SaleID, cell(r.UserID)
			rec[4], rec[5], rec[6] = strconv.FormatInt(r.Qty, 10), strconv.FormatInt(r.AmountCents, 10), r.Currency
			rec[7], rec[8], rec[9], rec[10], rec[11] = r.Status, r.PayBy, r.ReservedAt, r.CreatedAt, r.UpdatedAt
			rec[12] = cell(r.CancelReason)
			if err := cw.Write(rec); err != nil {
				return err
			}
			cw.Flush() // into bw: csv's own buffer stays one line
			return cw.Error()
		}
	case JSONL:
		enc := json.NewEncoder(bw)
		put = func(o *seckill.Order) error { return enc.Encode(RowOf(o, currency)) }
	default:
		return 0, fmt.Errorf("format %q: want csv or jsonl", format)
	}
	var n int64
	for cursor := ""; ; {
		page, next, err := pages(ctx, cursor)
		if err != nil {
			return n, err
		}
		for _, o := range page {
			if err := put(o); err != nil {
				return n, err
			}
			n++
		}
		if err := bw.Flush(); err != nil {
			return n, err
		}
		if next == "" {
			return n, nil
		}
		cursor = next
	}
}

// cell defuses text a spreadsheet would run as a formula (a user id or a
// reason that starts with =, +, -, @, tab or CR): it is prefixed with a
// single quote, as OWASP advises for CSV. JSON Lines carries text as is.
func cell(s string) string {
	if s != "" {
		switch s[0] {
		case '=', '+', '-', '@', '\t', '\r':
			return "'" + s
		}
	}
	return s
}
