package orderexport

import (
	"context"
	"encoding/csv"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func order(id, user, reason string) *seckill.Order {
	t := time.Date(2026, 12, 6, 9, 0, 0, 123e6, time.UTC)
	return &seckill.Order{ID: "o-" + id, ReservationID: id, SaleID: "tea", UserID: user, Qty: 1, AmountCents: 250,
		Status: seckill.OrderCancelled, PayBy: t, ReservedAt: t, CreatedAt: t, UpdatedAt: t, CancelReason: reason}
}

// pages serves orders two a page, counting the calls.
func pages(orders []*seckill.Order, calls *int) Pages {
	return func(_ context.Context, cursor string) ([]*seckill.Order, string, error) {
		*calls++
		i := 0
		if cursor != "" {
			i = int(cursor[0] - '0')
		}
		end := min(i+2, len(orders))
		next := ""
		if end < len(orders) {
			next = string(rune('0' + end))
		}
		return orders[i:end], next, nil
	}
}

// TestWriteCSV: every page's orders once, in order, a spreadsheet formula
// in a buyer-controlled or operator-written text defused, and a page's
// error ends the export with it.
func TestWriteCSV(t *testing.T) {
	orders := []*seckill.Order{order("tea.1", "=HYPERLINK(\"x\")", ""), order("tea.2", "bob", "+1 call me"), order("tea.3", "carol", "timeout")}
	var b strings.Builder
	calls := 0
	n, err := Write(context.Background(), &b, CSV, "EUR", pages(orders, &calls))
	if err != nil || n != 3 || calls != 2 {
		t.Fatalf("Write = %d, %v after %d pages", n, err, calls)
	}
	recs, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		Header,
		{"o-tea.1", "tea.1", "tea", `'=HYPERLINK("x")`, "1", "250", "EUR", "cancelled", "2026-12-06T09:00:00.123Z", "2026-12-06T09:00:00.123Z", "2026-12-06T09:00:00.123Z", "2026-12-06T09:00:00.123Z", ""},
		{"o-tea.2", "tea.2", "tea", "bob", "1", "250", "EUR", "cancelled", "2026-12-06T09:00:00.123Z", "2026-12-06T09:00:00.123Z", "2026-12-06T09:00:00.123Z", "2026-12-06T09:00:00.123Z", "'+1 call me"},
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Fatalf("record %d = %q, want %q", i, recs[i], want[i])
		}
	}
	boom := errors.New("database gone")
	_, err = Write(context.Background(), &b, JSONL, "EUR", func(context.Context, string) ([]*seckill.Order, string, error) { return nil, "", boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Write with a failing page = %v", err)
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Fatal("ParseFormat(xml) accepted it")
	}
}

// TestWriteJSONLKeepsText: JSON Lines carries the text as it is.
func TestWriteJSONLKeepsText(t *testing.T) {
	var b strings.Builder
	calls := 0
	if _, err := Write(context.Background(), &b, JSONL, "EUR", pages([]*seckill.Order{order("tea.1", "=x", "")}, &calls)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"user_id":"=x"`) || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("jsonl = %q", b.String())
	}
}
