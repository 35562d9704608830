package lottery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/seckill-dev/seckill"
)

// EntryStock is the stock store's side of the entries (internal/redis.Lottery).
type EntryStock interface {
	Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	PutEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry) error
	AllWon(ctx context.Context, saleID string) (map[string]string, error)
	RecordWon(ctx context.Context, saleID string, won map[string]string) error
}

// EntryLedger is the database's side (internal/sqlstore.EntryStore).
type EntryLedger interface {
	// KeepEntries writes entries and returns what it keeps of each: the
	// entry, or the one its buyer had.
	KeepEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry) ([]seckill.LotteryEntry, error)
	KeptEntries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	// CopyEntries writes entries with the reservation won gives each
	// buyer: the draw's results.
	CopyEntries(ctx context.Context, saleID string, entries []seckill.LotteryEntry, won map[string]string) error
	KeptWon(ctx context.Context, saleID string) (map[string]string, error)
}

// ErrNotKept answers entries the database did not take: a retry gets the
// same entry back from the stock store, and is kept then.
var ErrNotKept = &seckill.Error{Code: seckill.ETRYLATER, Message: "Your entry could not be recorded; retry shortly."}

// Book keeps a lottery's entries in the database as well as in the stock
// store, which alone would lose them with its writes (a Redis restarted
// without its data; the embedded store at every restart). An entry is
// answered only once the database holds it (Keep, the second stage of
// internal/combiner.Enterer), and where the two disagree the database
// wins (seckill.KeptAnswer, seckill.LevelEntries).
type Book struct {
	stock  EntryStock
	ledger EntryLedger
	logger *slog.Logger
}

// NewBook returns a Book over stock and ledger; logger may be nil.
func NewBook(stock EntryStock, ledger EntryLedger, logger *slog.Logger) *Book {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Book{stock: stock, ledger: ledger, logger: logger}
}

// Keep writes entries of the sale, the new and the repeated (a repeat may
// be the retry of an entry whose first answer failed here), in the
// database, and returns what it keeps of each: kept[i] is entries[i], or
// the entry its buyer had before. The stock store is told of the latter.
// A write the database refuses is ErrNotKept (wrapped).
func (b *Book) Keep(ctx context.Context, saleID string, entries []seckill.LotteryEntry) ([]seckill.LotteryEntry, error) {
	kept, err := b.ledger.KeepEntries(ctx, saleID, entries)
	if err != nil {
		return nil, errors.Join(ErrNotKept, err)
	}
	if fix := seckill.Replaced(entries, kept); len(fix) > 0 {
		// The stock store had lost these buyers' entries and made new
		// ones. Their answers are the database's either way; the store
		// is told so that the draw reads them (it also levels itself at
		// close).
		b.logger.WarnContext(ctx, "lottery entries the stock store had lost, answered from the database", "sale_id", saleID, "entries", len(fix))
		if err := b.stock.PutEntries(ctx, saleID, fix); err != nil {
			b.logger.ErrorContext(ctx, "lottery entries not put back in the stock store", "sale_id", saleID, "err", err)
		}
	}
	return kept, nil
}

// KeepWon records in the database the reservations the draw gave
// winners (entries of the sale), before the stock store records them:
// Level puts them back in a stock store that lost them.
func (b *Book) KeepWon(ctx context.Context, saleID string, winners []seckill.LotteryEntry, won map[string]string) error {
	if err := b.ledger.CopyEntries(ctx, saleID, winners, won); err != nil {
		return fmt.Errorf("keep the draw's winners of %s: %w", saleID, err)
	}
	return nil
}

// Level brings the sale's entries in the stock store and in the database
// level: the stock store gets every entry the database keeps (the
// database's version winning), the database every entry only the stock
// store has (one whose answer failed); and the stock store gets the
// draw's results the database keeps (KeepWon). It returns the entries
// both now hold. A heal calls it while the sale refuses requests, to put
// back what the stock store lost; the draw calls it once entries are
// closed, and draws what it returns: read before any later loss of the
// stock store's could hide an entry.
func (b *Book) Level(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error) {
	inStock, err := b.stock.Entries(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("level entries of %s: %w", saleID, err)
	}
	kept, err := b.ledger.KeptEntries(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("level entries of %s: %w", saleID, err)
	}
	toStock, toKeep := seckill.LevelEntries(inStock, kept)
	if len(toKeep) > 0 {
		// Kept first: one the database has from a later write wins over
		// the stock store's.
		back, err := b.ledger.KeepEntries(ctx, saleID, toKeep)
		if err != nil {
			return nil, fmt.Errorf("level entries of %s: %w", saleID, err)
		}
		toStock = append(toStock, seckill.Replaced(toKeep, back)...)
		kept = append(kept, back...)
	}
	if len(toStock) > 0 {
		if err := b.stock.PutEntries(ctx, saleID, toStock); err != nil {
			return nil, fmt.Errorf("level entries of %s: %w", saleID, err)
		}
		b.logger.WarnContext(ctx, "lottery entries put back in the stock store from the database", "sale_id", saleID, "entries", len(toStock))
	}
	wonInStock, err := b.stock.AllWon(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("level the draw's results of %s: %w", saleID, err)
	}
	wonKept, err := b.ledger.KeptWon(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("level the draw's results of %s: %w", saleID, err)
	}
	if won := seckill.WonToRestore(wonInStock, wonKept); len(won) > 0 {
		if err := b.stock.RecordWon(ctx, saleID, won); err != nil {
			return nil, fmt.Errorf("level the draw's results of %s: %w", saleID, err)
		}
		b.logger.WarnContext(ctx, "lottery results put back in the stock store from the database", "sale_id", saleID, "winners", len(won))
	}
	return kept, nil
}
