package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// The stock-store side of an operator's changes to a sale. The database
// changes first (internal/sqlstore); these scripts then bring the live
// copy in line, each idempotent, so a failed call can simply be made again.

// Admin is the stock store's side of an operator's changes to a sale
// (saleadmin.Live). Its RepairMoves lives in buckets.go, next to the
// bucket moves it finishes.
type Admin struct{ *conn }

// Admin returns the store's admin side.
func (s *Store) Admin() Admin { return Admin{s.conn} }

// Stock is StockStore.Stock.
func (s Admin) Stock(ctx context.Context, saleID string) (seckill.StockLevel, error) {
	return StockStore{s.conn}.Stock(ctx, saleID)
}

// OutboxLen is Outbox.OutboxLen.
func (s Admin) OutboxLen(ctx context.Context, saleID string) (int64, error) {
	return Outbox{s.conn}.OutboxLen(ctx, saleID)
}

// PublishRestocked is Restorer.PublishRestocked.
func (s Admin) PublishRestocked(ctx context.Context, saleID string) error {
	return Restorer{s.conn}.PublishRestocked(ctx, saleID)
}

var (
	saleEditScript  = rueidis.NewLuaScriptRetryable(lua("stock_write.lua", "sale_edit.lua"))
	saleEndScript   = rueidis.NewLuaScriptRetryable(lua("sale_end.lua"))
	saleRaiseScript = rueidis.NewLuaScriptRetryable(lua("sale_raise.lua"))
)

// ErrSaleStarted is returned by EditSale when the live copy refuses the
// edit: the sale has opened (by Redis's clock) or holds reservations.
var ErrSaleStarted = seckill.Errorf(seckill.ESTATECONFLICT, "The sale has started in the stock store: it can no longer be edited.")

// EditSale gives a sale that has not started the stock, limit and window
// of s, loading it if it is not loaded (see sale_edit.lua). ErrSaleStarted
// when the live copy has opened or has reservations.
func (s Admin) EditSale(ctx context.Context, sale *seckill.Sale) error {
	if err := sale.Validate(); err != nil {
		return fmt.Errorf("edit sale: %w", err)
	}
	if err := s.register(ctx, sale.ID); err != nil {
		return fmt.Errorf("edit sale: %w", err)
	}
	// The layout of a loaded sale, or the one preheat would give it.
	bs, err := s.buckets(ctx, sale.ID)
	if err != nil {
		return fmt.Errorf("edit sale: %w", err)
	}
	k := int64(bs.k())
	if _, lerr := s.Stock(ctx, sale.ID); errors.Is(lerr, seckill.ErrNotFound) {
		k = max(sale.BucketCount(), s.minBuckets)
		bs = newBucketSet(sale.ID, int(k))
	}
	// Bucket 0 last: with the bucket count, it is what makes the sale
	// live.
	for b := int(k) - 1; b >= 0; b-- {
		if b > 0 {
			if err := s.register(ctx, bs.tags[b]); err != nil {
				return fmt.Errorf("edit sale: %w", err)
			}
		}
		n, err := saleEditScript.Exec(ctx, s.client, s.keys(bs.tags[b])[:1], stockArgs(sale, k, b)).AsInt64()
		if err != nil {
			return fmt.Errorf("edit sale: %w", classify(err))
		}
		if n != 1 {
			return ErrSaleStarted
		}
	}
	return nil
}

// EndSale ends a loaded sale now, by Redis's clock (see sale_end.lua).
// ended is true when this call ended it; a sale not loaded is left alone.
func (s Admin) EndSale(ctx context.Context, saleID string) (ended bool, err error) {
	if !seckill.ValidSaleID(saleID) {
		return false, fmt.Errorf("end sale: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return false, fmt.Errorf("end sale: %w", err)
	}
	// Every bucket has its own window; bucket 0 first, as it is the one
	// every node reads the layout from.
	for _, tag := range bs.tags {
		n, err := saleEndScript.Exec(ctx, s.client, s.keys(tag)[:1], nil).AsInt64()
		if err != nil {
			return false, fmt.Errorf("end sale: %w", classify(err))
		}
		ended = ended || n == 1
	}
	return ended, nil
}

// RaiseStock raises a loaded sale's total to total, the database's stock
// put on sale (see sale_raise.lua). raised is false when it was there
// already or the sale is not loaded. A sale of several buckets gets the
// added units in bucket 0 instead, once per new total (move_in.lua keyed
// by it); added = 0 changes nothing there.
func (s Admin) RaiseStock(ctx context.Context, saleID string, total, added int64) (raised bool, err error) {
	if !seckill.ValidSaleID(saleID) {
		return false, fmt.Errorf("raise stock: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return false, fmt.Errorf("raise stock: %w", err)
	}
	if bs.k() > 1 {
		if added <= 0 {
			return false, nil
		}
		keys := []string{s.keys(saleID)[keyStock], s.movesInKey(saleID)}
		n, err := moveInScript.Exec(ctx, s.client, keys, []string{"add:" + strconv.FormatInt(total, 10), strconv.FormatInt(added, 10)}).AsInt64()
		if err != nil {
			return false, fmt.Errorf("raise stock: %w", classify(err))
		}
		return n == 1, nil
	}
	n, err := saleRaiseScript.Exec(ctx, s.client, s.keys(saleID)[:1], []string{strconv.FormatInt(total, 10)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("raise stock: %w", classify(err))
	}
	return n == 1, nil
}
