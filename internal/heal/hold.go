package heal

import (
	"context"
	"time"

	"github.com/seckill-dev/seckill"
)

// Starting lists the sales that start before t and have not ended at now
// (internal/sqlstore).
type Starting interface {
	SalesStartingBefore(ctx context.Context, t, now time.Time) ([]*seckill.Sale, error)
}

// HoldLive holds (see Hold) every sale that is live or starts within lead
// (the preheat lead; default 10 minutes), as db lists them, within 10 s.
// It never stops the engine from starting: a sale it could not hold is
// healed when its state shows the loss, as with any stock store.
func (w *Watcher) HoldLive(ctx context.Context, db Starting, lead time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if lead <= 0 {
		lead = 10 * time.Minute
	}
	now := w.cfg.Now()
	live, err := db.SalesStartingBefore(ctx, now.Add(lead), now)
	if err != nil {
		w.cfg.Logger.Warn("embedded store: could not list the live sales to hold until healed", "err", err)
		return
	}
	held, err := w.Hold(ctx, live)
	if err != nil {
		w.cfg.Logger.Warn("embedded store: some live sales could not be held until healed", "err", err)
	}
	if held > 0 {
		w.cfg.Logger.Info("embedded store: live sales refuse claims until rebuilt from the database", "sales", held)
	}
}
