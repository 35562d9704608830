package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// The order-event outbox (table order_events): every transaction that
// changes an order inserts the change's event with insertOrderEvents, so
// that an event exists exactly when its change committed; EventStore then
// hands the events to the deliverer. With no sink configured
// (EnableOrderEvents not called) nothing is inserted, at no cost.

// EnableOrderEvents makes every order change from now on record its
// event in the outbox. Call it before the stores are used.
func (db *DB) EnableOrderEvents() { db.orderEvents = true }

// OrderEventsEnabled reports whether order changes record their events.
func (db *DB) OrderEventsEnabled() bool { return db.orderEvents }

// eventExec runs a statement inside the transaction of an order change:
// tx.ExecContext, or the order store's prepared statements.
type eventExec func(ctx context.Context, query string, args ...any) (sql.Result, error)

// insertOrderEvents records events in tx, the transaction of the order
// change they describe, when the database records events at all
// (EnableOrderEvents); otherwise it does nothing. An event whose id is
// recorded already is skipped (an order has one event of each type). An
// event with no currency, or a negative amount (a failed order's, whose
// price the caller did not know), takes them from its sale. Every store
// of the package that changes an order calls it in that change's
// transaction.
func (db *DB) insertOrderEvents(ctx context.Context, tx *sql.Tx, events ...seckill.OrderEvent) error {
	if !db.orderEvents || len(events) == 0 {
		return nil
	}
	return db.insertEventsWith(ctx, tx, tx.ExecContext, events)
}

// insertOrderEvents is DB.insertOrderEvents through the order store's
// prepared statements: the order writer's path.
func (st *orderDB) insertOrderEvents(ctx context.Context, tx *sql.Tx, events ...seckill.OrderEvent) error {
	if !st.db.orderEvents || len(events) == 0 {
		return nil
	}
	return st.db.insertEventsWith(ctx, tx, func(ctx context.Context, q string, args ...any) (sql.Result, error) {
		return st.exec(ctx, tx, q, args...)
	}, events)
}

func (db *DB) insertEventsWith(ctx context.Context, tx *sql.Tx, exec eventExec, events []seckill.OrderEvent) error {
	if err := db.fillEventTerms(ctx, tx, events); err != nil {
		return err
	}
	for start, n := 0, 0; start < len(events); start += n {
		n = placedRunLen(len(events) - start)
		args := make([]any, 0, n*eventInsertWidth)
		for _, e := range events[start : start+n] {
			at := toMillis(e.At)
			args = append(args, e.ID, string(e.Type), e.OrderID, e.ReservationID,
				storableText(e.SaleID, maxFailedTextBytes), storableText(e.UserID, maxFailedTextBytes),
				e.Qty, max(e.AmountCents, 0), e.Currency, at, at, at)
		}
		if _, err := exec(ctx, db.eventInsertText(n), args...); err != nil {
			return fmt.Errorf("insert order events: %w", err)
		}
	}
	return nil
}

// eventInsertText is the insert of n events, built once.
func (db *DB) eventInsertText(n int) string {
	if t, ok := db.eventTexts.Load(n); ok {
		return t.(string)
	}
	q := (&db.dialect.sql.events)
	var b strings.Builder
	b.WriteString(q.insertHead)
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q.list(1+r*eventInsertWidth, eventInsertWidth))
	}
	b.WriteString(q.insertTail)
	t := b.String()
	db.eventTexts.Store(n, t)
	return t
}

// eventInsertTexts lists the texts the order writer may insert events
// with, for OrderWriter.prepareAll.
func (db *DB) eventInsertTexts() []string {
	if !db.orderEvents {
		return nil
	}
	var qs []string
	for n := placedStep; n <= placedChunk; n += placedStep {
		qs = append(qs, db.eventInsertText(n))
	}
	for n := 1; n < placedStep; n *= 2 {
		qs = append(qs, db.eventInsertText(n))
	}
	return qs
}

// fillEventTerms gives events that lack a currency or an amount their
// sale's, read in tx.
func (db *DB) fillEventTerms(ctx context.Context, tx *sql.Tx, events []seckill.OrderEvent) error {
	type terms struct {
		currency string
		price    int64
	}
	sales := map[string]*terms{}
	for i := range events {
		e := &events[i]
		if e.Currency != "" && e.AmountCents >= 0 {
			continue
		}
		if !seckill.ValidSaleID(e.SaleID) {
			continue // a dead letter's sale may be anything: no terms to find
		}
		t, ok := sales[e.SaleID]
		if !ok {
			t = &terms{}
			err := tx.QueryRowContext(ctx, (&db.dialect.sql.events).saleTerms, e.SaleID).Scan(&t.currency, &t.price)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("read terms of sale %s: %w", e.SaleID, err)
			}
			sales[e.SaleID] = t
		}
		if e.Currency == "" {
			e.Currency = t.currency
		}
		if e.AmountCents < 0 {
			e.AmountCents = amountOf(e.Qty, t.price)
		}
	}
	return nil
}

// claimSpread is how many candidates Claim reads per event it may take.
const claimSpread = 4

// EventStore is the event outbox of a DB (eventdelivery.Outbox): it leases the outbox's
// events to deliverers and records how each delivery went, and lists
// and redelivers them for operators.
type EventStore struct {
	db *DB
	q  *eventQueries
}

// NewEventStore returns the event outbox of db, which must be migrated.
func NewEventStore(db *DB) *EventStore { return &EventStore{db: db, q: (&db.dialect.sql.events)} }

// Claim leases due events as eventdelivery.Outbox says. It looks for them
// on the read pool first, so an idle outbox costs no write transaction;
// then, in one transaction, it locks those still pending and unleased
// (skipping rows another deliverer is claiming: no two deliverers ever
// hold one event) and leases them. An earlier event of an order is
// delivered before a later one becomes a candidate, and a delivered
// event stays delivered, so a candidate read from an older snapshot is
// never out of turn.
func (s *EventStore) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]*seckill.EventDelivery, error) {
	if limit < 1 || lease <= 0 || owner == "" {
		return nil, fmt.Errorf("claim order events: %w", seckill.Errorf(seckill.EINVALID, "need an owner, a positive lease and limit"))
	}
	nowMs := toMillis(now)
	// Deliverers claiming at once read the same candidates: each reads
	// more than it takes, and takes those the others have not locked.
	seqs, err := queryColumn[int64](ctx, s.db.read, s.q.candidates, nowMs, nowMs, min(limit*claimSpread, idChunk))
	if err != nil {
		return nil, fmt.Errorf("claim order events: %w", s.db.classify(err))
	}
	if len(seqs) == 0 {
		return nil, nil
	}

	var claimed []*seckill.EventDelivery
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, 0, 1+len(seqs))
		args = append(args, nowMs)
		for _, seq := range seqs {
			args = append(args, seq)
		}
		var err error
		args = append(args, limit)
		lock := s.q.lockHead + s.q.list(2, len(seqs)) + s.q.lockLimit(2+len(seqs)) + s.q.lockTail
		claimed, err = queryAll(ctx, tx, scanEventDelivery, lock, args...)
		if err != nil || len(claimed) == 0 {
			return err
		}
		up := make([]any, 0, 2+len(claimed))
		up = append(up, owner, nowMs+lease.Milliseconds())
		for _, d := range claimed {
			up = append(up, d.Seq)
			d.Attempts++
		}
		_, err = tx.ExecContext(ctx, s.q.leaseIn+s.q.list(3, len(claimed)), up...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim order events: %w", s.db.classify(err))
	}
	return claimed, nil
}

// Delivered records the events of seqs as delivered at now, whoever
// leases them: a delivery is a fact even from a deliverer whose lease
// ran out.
func (s *EventStore) Delivered(ctx context.Context, seqs []int64, now time.Time) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for start := 0; start < len(seqs); start += idChunk {
			chunk := seqs[start:min(start+idChunk, len(seqs))]
			args := make([]any, 0, 1+len(chunk))
			args = append(args, toMillis(now))
			for _, seq := range chunk {
				args = append(args, seq)
			}
			if _, err := tx.ExecContext(ctx, s.q.deliveredIn+s.q.list(2, len(chunk)), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d order events delivered: %w", len(seqs), s.db.classify(err))
	}
	return nil
}

// Failed records a failed attempt as eventdelivery.Outbox says.
func (s *EventStore) Failed(ctx context.Context, seq int64, owner, lastErr string, next time.Time, dead bool, now time.Time) (bool, error) {
	state, nextMs := string(seckill.DeliveryPending), toMillis(next)
	var deadAt any // NULL
	if dead {
		state, nextMs, deadAt = string(seckill.DeliveryDead), toMillis(now), toMillis(now)
	}
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q.failed, state, nextMs, deadAt, storableText(lastErr, maxEventErrorBytes), seq, owner)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record a failed delivery of order event %d: %w", seq, s.db.classify(err))
	}
	return changed, nil
}

// Redeliver puts a dead-lettered event back to pending, due at now, with a
// fresh window of attempts. An unknown id is ErrNotFound; an event that
// is not dead is ESTATECONFLICT.
func (s *EventStore) Redeliver(ctx context.Context, id string, now time.Time) (*seckill.EventDelivery, error) {
	var d *seckill.EventDelivery
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q.redeliver, toMillis(now), toMillis(now), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		d, err = scanEventDelivery(tx.QueryRowContext(ctx, s.q.byID, id))
		if errors.Is(err, sql.ErrNoRows) {
			return seckill.ErrNotFound
		} else if err != nil {
			return err
		}
		if n != 1 {
			return seckill.Errorf(seckill.ESTATECONFLICT, "order event %s is %s, not dead", id, d.State)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redeliver order event %s: %w", id, s.db.classify(err))
	}
	return d, nil
}

// Events lists up to limit events of state ("" for any), newest first.
func (s *EventStore) Events(ctx context.Context, state seckill.DeliveryState, limit int) ([]*seckill.EventDelivery, error) {
	var (
		ds  []*seckill.EventDelivery
		err error
	)
	switch state {
	case "":
		ds, err = queryAll(ctx, s.db.read, scanEventDelivery, s.q.listAll, limit)
	case seckill.DeliveryPending, seckill.DeliveryDelivered, seckill.DeliveryDead:
		ds, err = queryAll(ctx, s.db.read, scanEventDelivery, s.q.listState, string(state), limit)
	default:
		return nil, fmt.Errorf("order events: %w", seckill.Errorf(seckill.EINVALID, "unknown delivery state %q", state))
	}
	if err != nil {
		return nil, fmt.Errorf("order events: %w", s.db.classify(err))
	}
	return ds, nil
}

// Stats counts the pending and dead events.
func (s *EventStore) Stats(ctx context.Context) (seckill.OutboxStats, error) {
	var st seckill.OutboxStats
	for _, c := range []struct {
		state  seckill.DeliveryState
		n      *int64
		oldest *time.Time
	}{{seckill.DeliveryPending, &st.Pending, &st.OldestPending}, {seckill.DeliveryDead, &st.Dead, nil}} {
		var minAt int64
		if err := s.db.read.QueryRowContext(ctx, s.q.stateStats, string(c.state)).Scan(c.n, &minAt); err != nil {
			return seckill.OutboxStats{}, fmt.Errorf("order event stats: %w", s.db.classify(err))
		}
		if c.oldest != nil && *c.n > 0 {
			*c.oldest = fromMillis(minAt)
		}
	}
	return st, nil
}

// maxPruneBatch bounds PruneDelivered's limit: its delete lists the
// seqs, one bind parameter each.
const maxPruneBatch = 5000

// PruneDelivered deletes up to limit events delivered before before (to
// the millisecond), the oldest first, as eventdelivery.DeliveredPruner
// says. It picks them on the read pool, then deletes them by seq,
// checking again that they are delivered (a delivered event stays so, at
// its delivery time): the delete locks only the rows it removes, never a
// range the order writer inserts into, and a second pruner deleting the
// same rows deletes none.
func (s *EventStore) PruneDelivered(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit < 1 || limit > maxPruneBatch {
		return 0, fmt.Errorf("prune order events: %w", seckill.Errorf(seckill.EINVALID, "limit must be 1 to %d", maxPruneBatch))
	}
	beforeMs := toMillis(before)
	seqs, err := queryColumn[int64](ctx, s.db.read, s.q.prunable, beforeMs, limit)
	if err != nil || len(seqs) == 0 {
		return 0, s.pruneErr(err)
	}
	args := make([]any, len(seqs))
	for i, seq := range seqs {
		args[i] = seq
	}
	res, err := s.db.write.ExecContext(ctx, s.q.pruneIn+s.q.list(1, len(seqs)), args...)
	if err != nil {
		return 0, s.pruneErr(err)
	}
	n, err := res.RowsAffected()
	return int(n), s.pruneErr(err)
}

func (s *EventStore) pruneErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("prune order events: %w", s.db.classify(err))
}

// queryColumn runs query, which selects one column, on q.
func queryColumn[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *EventStore) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// scanEventDelivery reads the columns of eventColumns.
func scanEventDelivery(row interface{ Scan(...any) error }) (*seckill.EventDelivery, error) {
	var (
		d                         seckill.EventDelivery
		typ, state                string
		at, attempts, next, retry int64
		delivered, dead           sql.NullInt64
	)
	e := &d.Event
	err := row.Scan(&d.Seq, &e.ID, &typ, &e.OrderID, &e.ReservationID, &e.SaleID, &e.UserID, &e.Qty, &e.AmountCents,
		&e.Currency, &at, &state, &attempts, &next, &retry, &d.LastError, &delivered, &dead)
	if err != nil {
		return nil, err
	}
	e.Type, e.At = seckill.OrderEventType(typ), fromMillis(at)
	d.State, d.Attempts = seckill.DeliveryState(state), int(attempts)
	d.NextAt, d.RetryFrom = fromMillis(next), fromMillis(retry)
	if delivered.Valid {
		d.DeliveredAt = fromMillis(delivered.Int64)
	}
	if dead.Valid {
		d.DeadAt = fromMillis(dead.Int64)
	}
	return &d, nil
}

// amountOf is qty × price, or 0 for a qty no order can have (a rejected
// event's), whose product might not fit.
func amountOf(qty, price int64) int64 {
	if qty < 1 || qty > seckill.MaxPurchaseLimit {
		return 0
	}
	return qty * price
}
