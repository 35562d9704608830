package fakestore_test

import (
	"testing"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/fakestore"
)

// TestSalesConformance holds the HTTP packages' fake to the suite the SQL
// stores pass, so that it cannot drift from them.
func TestSalesConformance(t *testing.T) {
	conformance.SaleStore(t, func(*testing.T) seckill.SaleStore { return fakestore.NewSales() })
}
