package seckill

import "context"

// Orders are paged by reservation id, not offset: a page costs the same at
// any depth, and new orders never shift a row between pages.

// MaxOrderPage is the largest page of a sale's orders.
const MaxOrderPage = 1000

// OrderFilter selects a page of one sale's orders.
type OrderFilter struct {
	SaleID string
	Status OrderStatus // "" keeps every order
	Limit  int         // 1..MaxOrderPage
	Cursor string      // the previous page's opaque next; "" for the first
}

// OrderLister reads a sale's orders a page at a time (internal/sqlstore).
type OrderLister interface {
	// OrderPage returns a page and the next cursor ("" after the last); a
	// bad filter is EINVALID.
	OrderPage(ctx context.Context, f OrderFilter) (page []*Order, next string, err error)
}
