// Package saleadmin owns the operator's changes to a sale that touch both
// ledgers: edit before the start, end early, add stock. Each change goes
// to the database first (the source of truth, with its audit entry in the
// same transaction), then to the stock store's live copy, then out on the
// restock announcement, so every API node drops its sold-out flag and its
// cached row and the next request decides on the new state. It also
// derives what an operator sees of a sale: the state with the live stock,
// the remaining units (never above the database's unsold), and, once the
// sale has ended, whether it is still draining or archived.
package saleadmin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
)

// Store is the database side (internal/sqlstore).
type Store interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
	Admin
}

// Admin is the database side of an operator's changes (internal/sqlstore):
// each change and its audit entry in one transaction, bumping Version.
type Admin interface {
	ListSales(ctx context.Context, f seckill.SaleFilter) (*seckill.SalePage, error)
	// EditSale replaces the fields of a sale not started at now; version,
	// when not 0, must match (ECONFLICT). Started: ESTATECONFLICT.
	EditSale(ctx context.Context, s *seckill.Sale, version int64, actor string, now time.Time) (*seckill.Sale, error)
	// EndSale ends the sale at now; an ended one is unchanged, unaudited.
	EndSale(ctx context.Context, id, actor string, now time.Time) (s *seckill.Sale, changed bool, err error)
	// AddStock adds n units until the sale ends (then ESTATECONFLICT).
	AddStock(ctx context.Context, id string, n int64, actor string, now time.Time) (*seckill.Sale, error)
	RecordAudit(ctx context.Context, e *seckill.AuditEntry) error
	// AuditLog lists entries newest first; saleID "" lists all sales'.
	AuditLog(ctx context.Context, saleID string, limit int) ([]*seckill.AuditEntry, error)
}

// Live is the stock store's side (internal/redis).
type Live interface {
	Stock(ctx context.Context, saleID string) (seckill.StockLevel, error)
	OutboxLen(ctx context.Context, saleID string) (int64, error)
	EditSale(ctx context.Context, s *seckill.Sale) error
	EndSale(ctx context.Context, saleID string) (ended bool, err error)
	RaiseStock(ctx context.Context, saleID string, total, added int64) (raised bool, err error)
	PublishRestocked(ctx context.Context, saleID string) error
}

// Config holds the Service's dependencies; Store and Live are required.
type Config struct {
	Store Store
	Live  Live
	// OnChanged, if set, is called with the new row after every change
	// (this node's caches and preheat scheduler); other nodes hear the
	// restock announcement.
	OnChanged func(*seckill.Sale)
	Now       func() time.Time
	Logger    *slog.Logger
}

// Service applies operators' changes. Build it with New.
type Service struct {
	store     Store
	live      Live
	onChanged func(*seckill.Sale)
	now       func() time.Time
	logger    *slog.Logger
}

// New checks cfg and returns the Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Live == nil {
		return nil, errors.New("saleadmin: Config.Store and Config.Live are required")
	}
	s := &Service{store: cfg.Store, live: cfg.Live, onChanged: cfg.OnChanged, now: cfg.Now, logger: cfg.Logger}
	defaults.Clock(&s.now)
	defaults.Logger(&s.logger)
	return s, nil
}

// View derives the operator's view of s at now.
func (v *Service) View(ctx context.Context, s *seckill.Sale) (*seckill.SaleView, error) {
	lvl, err := v.live.Stock(ctx, s.ID)
	loaded := err == nil
	now := v.now()
	if err != nil && !errors.Is(err, seckill.ErrNotFound) {
		// The database is the source of truth: an operator still reads
		// the row while Redis is down, without the live figures.
		v.logger.WarnContext(ctx, "sale view: stock store unavailable", "sale_id", s.ID, "err", err)
		return &seckill.SaleView{Sale: s, Remaining: seckill.RemainingOf(s, lvl, false), State: s.State(now, s.Unsold), LiveUnavailable: true}, nil
	}
	out := &seckill.SaleView{Sale: s, Remaining: seckill.RemainingOf(s, lvl, loaded), Loaded: loaded}
	out.State = s.State(now, out.Remaining)
	if out.State == seckill.SaleEnded {
		out.Phase = seckill.PhaseDraining
		if !loaded {
			out.Phase = seckill.PhaseArchived
		}
	}
	return out, nil
}

// List returns one page of views.
func (v *Service) List(ctx context.Context, f seckill.SaleFilter) ([]*seckill.SaleView, string, error) {
	f.Now = v.now()
	page, err := v.store.ListSales(ctx, f)
	if err != nil {
		return nil, "", err
	}
	views := make([]*seckill.SaleView, 0, len(page.Sales))
	for _, s := range page.Sales {
		view, err := v.View(ctx, s)
		if err != nil {
			return nil, "", err
		}
		views = append(views, view)
	}
	return views, page.Next, nil
}

// Get returns the view of one sale, with its outbox length.
func (v *Service) Get(ctx context.Context, id string) (*seckill.SaleView, error) {
	s, err := v.store.Sale(ctx, id)
	if err != nil {
		return nil, err
	}
	view, err := v.View(ctx, s)
	if err != nil {
		return nil, err
	}
	if view.LiveUnavailable {
		return view, nil
	}
	if n, err := v.live.OutboxLen(ctx, id); err == nil {
		view.OutboxLen = &n
	}
	return view, nil
}

// ErrLiveBehind wraps a stock-store failure after the database change
// committed: the change is recorded and audited, and repeating the same
// call finishes it (every step is idempotent, or skipped when done).
var ErrLiveBehind = errors.New("the database has the change; the stock store does not yet")

// behind is ErrLiveBehind for err, answered 503 with a message that says
// what to do.
func (v *Service) behind(err error, what string) error {
	return errors.Join(
		seckill.Errorf(seckill.EUNAVAILABLE, "The change is saved in the database, but the stock store did not take it yet; make the same call again to finish it."),
		fmt.Errorf("%s: %w: %w", what, ErrLiveBehind, err))
}

// AuditLog lists a sale's audit entries, newest first.
func (v *Service) AuditLog(ctx context.Context, saleID string, limit int) ([]*seckill.AuditEntry, error) {
	return v.store.AuditLog(ctx, saleID, limit)
}

// RecordAudit appends an entry to the audit log.
func (v *Service) RecordAudit(ctx context.Context, e *seckill.AuditEntry) error {
	return v.store.RecordAudit(ctx, e)
}

// Edit applies e to a sale that has not started. version, when not 0,
// must be the sale's current one. If the live copy refuses (the sale has
// opened there by Redis's clock), the database change is reverted.
func (v *Service) Edit(ctx context.Context, id string, e seckill.SaleEdit, version int64, actor string) (*seckill.Sale, error) {
	if e.Empty() {
		return nil, seckill.Errorf(seckill.EINVALID, "Nothing to change: give stock, per_user_limit, start_at, end_at, price_cents, currency or name.")
	}
	cur, err := v.store.Sale(ctx, id)
	if err != nil {
		return nil, err
	}
	next, err := e.Apply(cur)
	if err != nil {
		return nil, err
	}
	saved, err := v.store.EditSale(ctx, next, version, actor, v.now())
	if err != nil {
		return nil, err
	}
	if err := v.live.EditSale(ctx, saved); err != nil {
		if seckill.ErrorCode(err) == seckill.ESTATECONFLICT {
			if _, rerr := v.store.EditSale(ctx, cur, saved.Version, actor+" (reverted: the sale had opened)", v.now()); rerr != nil {
				v.logger.ErrorContext(ctx, "ALERT sale edit: the stock store refused it and the database could not be reverted",
					"sale_id", id, "err", rerr)
			}
			return nil, err
		}
		return nil, v.behind(err, "edit sale")
	}
	v.changed(ctx, saved)
	return saved, nil
}

// End ends a sale now on every node: the database's window, then the live
// copy's (the reserve script answers "ended" from its next batch on any
// node), then the announcement. changed is false when it had ended.
func (v *Service) End(ctx context.Context, id, actor string) (*seckill.Sale, bool, error) {
	s, changed, err := v.store.EndSale(ctx, id, actor, v.now())
	if err != nil {
		return nil, false, err
	}
	// Even when the database had it ended: a repeated call finishes a
	// live step that failed before.
	ended, err := v.live.EndSale(ctx, id)
	if err != nil {
		return nil, false, v.behind(err, "end sale")
	}
	if changed || ended {
		v.changed(ctx, s)
	}
	return s, changed || ended, nil
}

// AddStock puts n more units on a sale that has not ended; n = 0 only
// brings the live copy up to the database's stock (finishing an earlier
// call whose live step failed).
func (v *Service) AddStock(ctx context.Context, id string, n int64, actor string) (*seckill.Sale, error) {
	var (
		s   *seckill.Sale
		err error
	)
	if n == 0 {
		s, err = v.store.Sale(ctx, id)
	} else {
		s, err = v.store.AddStock(ctx, id, n, actor, v.now())
	}
	if err != nil {
		return nil, err
	}
	if _, err := v.live.RaiseStock(ctx, id, s.Stock, n); err != nil {
		return nil, v.behind(err, "add stock")
	}
	v.changed(ctx, s)
	return s, nil
}

// changed tells this node (OnChanged) and the others (the restock
// announcement, the path a restore's units take): each clears its
// sold-out flag and forgets its cached row.
func (v *Service) changed(ctx context.Context, s *seckill.Sale) {
	if v.onChanged != nil {
		c := *s
		v.onChanged(&c)
	}
	if err := v.live.PublishRestocked(ctx, s.ID); err != nil {
		// The flags lapse by themselves (soldout.SafetyInterval), the
		// cached rows within their TTL.
		v.logger.WarnContext(ctx, "sale change: announcement failed", "sale_id", s.ID, "err", err)
	}
}
