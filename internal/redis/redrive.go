package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// redriveScript takes a re-driven order's units (redrive.lua). Retryable:
// a second call answers "counted already".
var redriveScript = rueidis.NewLuaScriptRetryable(lua("record.lua", "redrive.lua"))

// Redriver takes the units of re-driven failed orders in the stock store.
type Redriver struct{ *conn }

// Redriver returns the store's redriver.
func (s *Store) Redriver() Redriver { return Redriver{s.conn} }

// TakeRedriven counts the units of reservation o, which an operator
// re-drove into an order, in its sale's `reserved`, its buyer's units and
// an active record, unless its record is active already (Redis counts the
// claim it granted): taken says whether it changed anything. A sale the
// store does not hold, or one spread over buckets, is left alone (false).
// A take that would pass the sale's total is refused, leaving the
// difference to the heal watcher (false).
func (s Redriver) TakeRedriven(ctx context.Context, o *seckill.Order, now time.Time) (taken bool, err error) {
	saleID, ok := seckill.SaleIDOfReservation(o.ReservationID)
	if !ok || o.Qty < 1 || !seckill.ValidUserID(o.UserID) {
		return false, fmt.Errorf("take re-driven %q: %w", o.ReservationID, seckill.Errorf(seckill.EINVALID, "not a re-driven order"))
	}
	k := s.keys(saleID)
	code, err := redriveScript.Exec(ctx, s.client, []string{k[keyStock], k[keyBuyers], k[keyRes]},
		[]string{o.ReservationID, o.UserID, strconv.FormatInt(o.Qty, 10), strconv.FormatInt(now.UnixMilli(), 10)}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("take re-driven %s: %w", o.ReservationID, classify(err))
	}
	return code == 1, nil
}
