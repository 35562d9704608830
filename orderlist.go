package seckill

import "context"

// The shop's back office reads a sale's orders a page at a time, by key
// (the reservation id, which within a sale sorts by claim time), not by
// offset: a page costs the same however deep it is, and orders written
// meanwhile never shift a row into a second page or out of both.

// MaxOrderPage is the largest page of a sale's orders.
const MaxOrderPage = 1000

// OrderFilter selects a page of one sale's orders.
type OrderFilter struct {
	SaleID string
	// Status keeps one status; "" keeps every order.
	Status OrderStatus
	// Limit is the most orders in the page (1..MaxOrderPage).
	Limit int
	// Cursor is the next of the previous page ("" for the first). It is
	// opaque to callers.
	Cursor string
}

// OrderLister reads a sale's orders a page at a time (internal/sqlstore).
type OrderLister interface {
	// OrderPage returns the page of orders f selects, by reservation id,
	// and the cursor of the next page ("" after the last). A Limit out of
	// range, an unknown Status or a Cursor it did not make is EINVALID.
	OrderPage(ctx context.Context, f OrderFilter) (page []*Order, next string, err error)
}
