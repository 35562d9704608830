// Package waitroom keeps a queue sale's waiting room, its places and an
// adaptive sale's pace, in the database as well as in the stock store
// (docs/fairness.md, "Places are kept").
package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/seckill-dev/seckill"
)

// Room is the stock store's side of the waiting room (internal/redis.Queue).
type Room interface {
	Places(ctx context.Context, saleID string) ([]seckill.QueuePlace, error)
	PutPlaces(ctx context.Context, saleID string, places []seckill.QueuePlace) error
	RestoreRoom(ctx context.Context, saleID string, places []seckill.QueuePlace) error
	RestorePace(ctx context.Context, saleID string, p seckill.QueuePace) error
}

// Ledger is the database's side (internal/sqlstore.PlaceStore).
type Ledger interface {
	// KeepPlaces writes places and returns what it keeps of each: the
	// place, or the one its buyer had.
	KeepPlaces(ctx context.Context, saleID string, places []seckill.QueuePlace) ([]seckill.QueuePlace, error)
	Places(ctx context.Context, saleID string) ([]seckill.QueuePlace, error)
	// Pace is an adaptive sale's pace as a node last kept it.
	Pace(ctx context.Context, saleID string) (p seckill.QueuePace, ok bool, err error)
}

// ErrNotKept answers joins the database did not take: a retry gets the
// same place back from the stock store, and is kept then.
var ErrNotKept = &seckill.Error{Code: seckill.ETRYLATER, Message: "Your place could not be recorded; retry shortly."}

// Book keeps a waiting room's places in the database as well as in the
// stock store, which alone would lose them with its writes (a Redis
// restarted without its data; the embedded store at every restart): a
// buyer who lost their place would join again behind everyone, and after
// the start the first to rejoin would be admitted first. A place is
// answered only once the database holds it (Keep, the second stage of
// internal/combiner.Queuer), and the database's place wins.
type Book struct {
	room   Room
	ledger Ledger
	logger *slog.Logger
}

// NewBook returns a Book over room and ledger; logger may be nil.
func NewBook(room Room, ledger Ledger, logger *slog.Logger) *Book {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Book{room: room, ledger: ledger, logger: logger}
}

// Keep writes places of the sale, the new and the repeated, in the
// database, and returns what it keeps of each: kept[i] is places[i], or
// the place its buyer had before, which the room is given back. A write
// the database refuses is ErrNotKept (wrapped).
func (b *Book) Keep(ctx context.Context, saleID string, places []seckill.QueuePlace) ([]seckill.QueuePlace, error) {
	kept, err := b.ledger.KeepPlaces(ctx, saleID, places)
	if err != nil {
		return nil, errors.Join(ErrNotKept, err)
	}
	if fix := seckill.Replaced(places, kept); len(fix) > 0 {
		b.logger.WarnContext(ctx, "queue places the stock store had lost, answered from the database", "sale_id", saleID, "places", len(fix))
		if err := b.room.PutPlaces(ctx, saleID, fix); err != nil {
			return nil, errors.Join(ErrNotKept, err)
		}
	}
	return kept, nil
}

// Level rebuilds the sale's waiting room in the stock store from every
// place the database keeps, after keeping the room's places whose buyers
// the database has none of (a join whose answer failed), and puts back an
// adaptive sale's pace as a node last kept it, if the room lost it. A heal
// calls it while the sale refuses joins and its pace is not moved.
func (b *Book) Level(ctx context.Context, sale *seckill.Sale) error {
	saleID := sale.ID
	inRoom, err := b.room.Places(ctx, saleID)
	if err != nil {
		return fmt.Errorf("level places of %s: %w", saleID, err)
	}
	kept, err := b.ledger.Places(ctx, saleID)
	if err != nil {
		return fmt.Errorf("level places of %s: %w", saleID, err)
	}
	if toKeep := seckill.PlacesToKeep(inRoom, kept); len(toKeep) > 0 {
		back, err := b.ledger.KeepPlaces(ctx, saleID, toKeep)
		if err != nil {
			return fmt.Errorf("level places of %s: %w", saleID, err)
		}
		kept = append(kept, back...)
	}
	if err := b.room.RestoreRoom(ctx, saleID, kept); err != nil {
		return fmt.Errorf("level places of %s: %w", saleID, err)
	}
	if len(kept) > len(inRoom) {
		b.logger.WarnContext(ctx, "queue places put back in the stock store from the database", "sale_id", saleID, "places", len(kept)-len(inRoom))
	}
	if _, adaptive := sale.Admission.Bounds(); !adaptive {
		return nil
	}
	pace, ok, err := b.ledger.Pace(ctx, saleID)
	if err != nil || !ok {
		return err
	}
	if err := b.room.RestorePace(ctx, saleID, pace); err != nil {
		return fmt.Errorf("level the pace of %s: %w", saleID, err)
	}
	return nil
}
