// Package archive owns what an ended sale costs in Redis: its
// idempotency hash is dropped once the window has closed (the reserve
// script answers "ended" before it would read it), and the rest of its
// keys once the payment timeouts and restores are done, every
// reservation is in the database and the outbox has drained, After a
// configurable delay past the end. Before that last step the sale is
// reconciled one final time; a sale that does not balance keeps its keys
// for an operator, since they are half of the evidence. The database
// keeps everything, and records how many claims the keys held, so that
// it alone reconciles the sale afterwards; Redis keeps a short summary
// under the sale's archived key. A lottery's keys go once its draw has
// finished and its entries are copied to the database.
package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/defaults"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Stock is the Redis side (internal/redis).
type Stock interface {
	// KeptSales lists the sales with keys in Redis.
	KeptSales(ctx context.Context) ([]string, error)
	// DropIdempotency drops the idempotency hash of a sale whose window
	// has closed (by the stock store's clock).
	DropIdempotency(ctx context.Context, saleID string) (bool, error)
	// ArchiveSale drops the rest of an ended sale's keys, keeping summary,
	// if its outbox is empty and it holds no more reservations, lottery
	// entries and winners than recorded; else it changes nothing and says
	// why not.
	ArchiveSale(ctx context.Context, saleID string, recorded seckill.ArchiveRecorded, summary string) (archived bool, whyNot string, err error)
	// ReservationCount is the number of reservation records of a sale.
	ReservationCount(ctx context.Context, saleID string) (int64, error)
}

// Store is the database side (internal/sqlstore).
type Store interface {
	Sale(ctx context.Context, id string) (*seckill.Sale, error)
	// SaleWork counts a sale's reservations with an order or a failed
	// order, its orders awaiting payment and its unfinished restores.
	SaleWork(ctx context.Context, saleID string) (recorded, awaitingPayment, openRestores int64, err error)
	// RecordArchive records, before the keys go, how many reservation
	// records (claims) they held: the database alone reconciles the sale
	// from then on.
	RecordArchive(ctx context.Context, saleID string, claims int64, at time.Time) error
}

// Lottery is what archiving a lottery sale takes: its entries go to the
// database before its keys go.
type Lottery struct {
	Draws   Draws
	Entries Entries
	Copies  Copies
}

// Draws reads a lottery's draw record (internal/sqlstore.DrawStore):
// seckill.ErrNotFound when it has none.
type Draws interface {
	Draw(ctx context.Context, saleID string) (seckill.DrawRecord, error)
}

// Entries is the Redis side of a lottery (internal/redis.Lottery).
type Entries interface {
	// EntryCounts counts the entries and the buyers who won, without
	// reading them.
	EntryCounts(ctx context.Context, saleID string) (entries, winners int64, err error)
	Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	AllWon(ctx context.Context, saleID string) (map[string]string, error)
}

// Copies is the database's copy of a lottery's entries
// (internal/sqlstore.EntryStore).
type Copies interface {
	// CopyEntries writes the entries, each with the reservation won
	// gives its buyer; copying again changes nothing.
	CopyEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry, won map[string]string) error
	EntryCounts(ctx context.Context, saleID string) (entries, winners int64, err error)
}

// Defaults of Config.
const (
	DefaultInterval = time.Minute
	DefaultAfter    = time.Hour
)

// Config tunes an Archiver. Zero values take the defaults.
type Config struct {
	// Interval between passes. Default 1m.
	Interval time.Duration
	// After is how long past its end a sale keeps its keys at least (its
	// idempotency hash excepted). Default 1h.
	After time.Duration
	// Final, if set, reconciles the sale before its keys go: it returns
	// the summary to keep, or an error to keep the keys (the sale does not
	// balance, or it could not be checked).
	Final  func(ctx context.Context, saleID string) (summary string, err error)
	Now    func() time.Time
	Logger *slog.Logger
	// OnArchived, if set, is told of every sale archived.
	OnArchived func(saleID string)
	// Lottery, if set, copies a drawn lottery's entries to the database
	// so that its keys can go; without it a lottery sale keeps its keys.
	Lottery *Lottery
	// Places, if set, forgets an ended queue sale's places in the
	// database before its keys go: each holds a buyer and the address
	// they joined from, which nothing needs once the sale is over.
	Places Places
}

// Places is the database's copy of a waiting room (internal/sqlstore.PlaceStore).
type Places interface {
	ForgetPlaces(ctx context.Context, saleID string) (int64, error)
}

// Archiver frees the Redis keys of ended sales. Start it once; Stop ends
// it. Every node may run one: each step is a script that checks and acts
// at once, and repeating it changes nothing.
type Archiver struct {
	store Store
	stock Stock
	cfg   Config

	// idemDropped remembers the sales whose idempotency hash this node
	// has dropped, so a pass costs one script call per sale once.
	idemDropped map[string]bool

	worker startstop.Worker
}

// New returns an Archiver.
func New(store Store, stock Stock, cfg Config) *Archiver {
	defaults.Positive(&cfg.Interval, DefaultInterval)
	defaults.Positive(&cfg.After, DefaultAfter)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	return &Archiver{store: store, stock: stock, cfg: cfg, idemDropped: map[string]bool{}}
}

// Pass visits every sale with keys in Redis once and returns how many it
// archived. A failure on one sale does not stop the others; the error
// names the first.
func (a *Archiver) Pass(ctx context.Context) (archived int, err error) {
	sales, err := a.stock.KeptSales(ctx)
	if err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	var firstErr error
	for _, id := range sales {
		if ctx.Err() != nil {
			break
		}
		done, err := a.visit(ctx, id)
		if done {
			archived++
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("archive %s: %w", id, err)
		}
	}
	return archived, firstErr
}

func (a *Archiver) visit(ctx context.Context, saleID string) (bool, error) {
	sale, err := a.store.Sale(ctx, saleID)
	if errors.Is(err, seckill.ErrNotFound) {
		return false, nil // not this database's sale (a shared Redis): leave it
	} else if err != nil {
		return false, err
	}
	now := a.cfg.Now()
	if now.Before(sale.EndAt) {
		return false, nil
	}
	log := a.cfg.Logger.With("sale", saleID)
	if !a.idemDropped[saleID] {
		// Redis TIME decides: a node whose clock runs ahead drops nothing early.
		dropped, err := a.stock.DropIdempotency(ctx, saleID)
		if err != nil {
			return false, err
		}
		if dropped {
			a.idemDropped[saleID] = true
			log.Info("sale ended: its idempotency keys are dropped from Redis")
		}
	}
	if now.Before(sale.EndAt.Add(a.cfg.After)) {
		return false, nil
	}
	recorded, awaiting, restores, err := a.store.SaleWork(ctx, saleID)
	if err != nil {
		return false, err
	}
	if awaiting > 0 || restores > 0 {
		log.Debug("archive: sale not settled yet", "awaiting_payment", awaiting, "open_restores", restores)
		return false, nil
	}
	summary := fmt.Sprintf(`{"sale_id":%q,"archived_at":%q,"recorded_reservations":%d}`, saleID, now.UTC().Format(time.RFC3339), recorded)
	if a.cfg.Final != nil {
		if summary, err = a.cfg.Final(ctx, saleID); err != nil {
			log.Warn("archive: the sale's Redis keys are kept: its final reconciliation did not pass", "err", err)
			return false, nil
		}
	}
	rec := seckill.ArchiveRecorded{Reservations: recorded}
	if sale.Admission.Of() == seckill.AdmitLottery {
		var wait string
		if rec.Entries, rec.Winners, wait, err = a.copyEntries(ctx, sale); err != nil || wait != "" {
			if wait != "" {
				log.Debug("archive: lottery not yet", "why", wait)
			}
			return false, err
		}
	}
	if sale.Admission.Of() == seckill.AdmitQueue && a.cfg.Places != nil {
		n, err := a.cfg.Places.ForgetPlaces(ctx, saleID)
		if err != nil {
			return false, err
		}
		if n > 0 {
			log.Info("archive: the ended queue sale's places are forgotten", "places", n)
		}
	}
	claims, err := a.stock.ReservationCount(ctx, saleID)
	if err != nil {
		return false, err
	}
	if err := a.store.RecordArchive(ctx, saleID, claims, now); err != nil {
		return false, err
	}
	archived, whyNot, err := a.stock.ArchiveSale(ctx, saleID, rec, summary)
	if err != nil {
		return false, err
	}
	if !archived {
		log.Debug("archive: not yet", "why", whyNot)
		return false, nil
	}
	delete(a.idemDropped, saleID)
	log.Info("sale archived: its Redis keys are dropped; the database keeps its records", "reservations", recorded)
	if a.cfg.OnArchived != nil {
		a.cfg.OnArchived(saleID)
	}
	return true, nil
}

// copyEntries copies a drawn lottery's entries and who won from Redis to
// the database, if the database's copy is short, and returns what the
// database then holds; wait says why not when the sale must keep its keys
// for now. The archive script drops the keys only if they hold no more
// than that, so an entry or a win recorded after the counts were read
// keeps them until the next pass copies it.
func (a *Archiver) copyEntries(ctx context.Context, sale *seckill.Sale) (entries, winners int64, wait string, err error) {
	l := a.cfg.Lottery
	if l == nil {
		return 0, 0, "no lottery archive is configured", nil
	}
	rec, err := l.Draws.Draw(ctx, sale.ID)
	found := err == nil
	if err != nil && !errors.Is(err, seckill.ErrNotFound) {
		return 0, 0, "", err
	}
	if wait := seckill.LotteryArchiveWait(sale, rec, found); wait != "" {
		return 0, 0, wait, nil
	}
	var inRedis, copied seckill.LotteryCounts
	if inRedis.Entries, inRedis.Winners, err = l.Entries.EntryCounts(ctx, sale.ID); err != nil {
		return 0, 0, "", err
	}
	if copied.Entries, copied.Winners, err = l.Copies.EntryCounts(ctx, sale.ID); err != nil {
		return 0, 0, "", err
	}
	if !seckill.LotteryCopyNeeded(inRedis, copied) {
		return copied.Entries, copied.Winners, "", nil
	}
	list, err := l.Entries.Entries(ctx, sale.ID)
	if err != nil {
		return 0, 0, "", err
	}
	won, err := l.Entries.AllWon(ctx, sale.ID)
	if err != nil {
		return 0, 0, "", err
	}
	if err := l.Copies.CopyEntries(ctx, sale.ID, list, won); err != nil {
		return 0, 0, "", err
	}
	entries, winners, err = l.Copies.EntryCounts(ctx, sale.ID)
	return entries, winners, "", err
}

// Start runs a Pass at once, then one every Interval, until Stop. A
// second Start, or a Start after Stop, does nothing.
func (a *Archiver) Start(ctx context.Context) {
	a.worker.StartEvery(ctx, a.cfg.Interval, a.passAndLog)
}

func (a *Archiver) passAndLog(ctx context.Context) {
	if _, err := a.Pass(ctx); err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("archive pass failed; retrying next tick", "err", err)
	}
}

// Stop ends the loop after the pass in hand and waits for it, or for ctx.
// Safe to call twice, and without Start.
func (a *Archiver) Stop(ctx context.Context) error {
	return a.worker.StopNamed(ctx, "archive")
}
