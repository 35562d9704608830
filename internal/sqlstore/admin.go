package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// The operator's side of a sale: lists, edits, ending early, adding stock,
// resolving failed orders, and the audit_log every change is written to in
// the same transaction. SaleStore is the DB's saleadmin.Admin.

// ListSales returns one page of sales matching f, newest start first,
// then by id descending. The cursor is opaque to callers: the last sale's
// start and id, so pages stay stable while sales are added.
func (st *SaleStore) ListSales(ctx context.Context, f seckill.SaleFilter) (*seckill.SalePage, error) {
	if f.Limit < 1 || f.Limit > seckill.MaxSalePage {
		return nil, fmt.Errorf("list sales: %w", seckill.Errorf(seckill.EINVALID, "limit must be between 1 and %d", seckill.MaxSalePage))
	}
	switch f.State {
	case "", seckill.SaleScheduled, seckill.SaleLive, seckill.SaleEnded:
	default:
		return nil, fmt.Errorf("list sales: %w", seckill.Errorf(seckill.EINVALID, "state must be scheduled, live or ended"))
	}
	var (
		start int64
		id    string
	)
	if f.After != "" {
		var err error
		if start, id, err = decodeSaleCursor(f.After); err != nil {
			return nil, fmt.Errorf("list sales: %w", err)
		}
	}
	// One more than asked: whether there is a next page.
	q, args := st.db.dialect.sql.salesPage(f.State, toMillis(f.Now), f.After != "", start, id, f.Limit+1)
	sales, err := queryAll(ctx, st.db.read, scanSale, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sales: %w", err)
	}
	page := &seckill.SalePage{Sales: sales}
	if len(sales) > f.Limit {
		page.Sales = sales[:f.Limit]
		last := page.Sales[f.Limit-1]
		page.Next = encodeSaleCursor(toMillis(last.StartAt), last.ID)
	}
	if page.Sales == nil {
		page.Sales = []*seckill.Sale{}
	}
	return page, nil
}

func encodeSaleCursor(startMs int64, id string) string { return encodeKeyCursor(startMs, id) }

var errBadCursor = seckill.Errorf(seckill.EINVALID, "after is not a cursor this list returned")

func decodeSaleCursor(c string) (int64, string, error) {
	return decodeKeyCursor(c, seckill.ValidSaleID, errBadCursor)
}

// encodeKeyCursor is the cursor of a list ordered by (ms, id), both
// descending: base64url of "<ms>:<id>".
func encodeKeyCursor(ms int64, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ms, 10) + ":" + id))
}

// decodeKeyCursor reads a cursor of encodeKeyCursor whose id is valid;
// anything else is bad. The ms has no colon, so an id may have some.
func decodeKeyCursor(c string, valid func(string) bool, bad error) (int64, string, error) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil {
		return 0, "", bad
	}
	text, id, ok := strings.Cut(string(raw), ":")
	ms, err := strconv.ParseInt(text, 10, 64)
	if !ok || err != nil || !valid(id) {
		return 0, "", bad
	}
	return ms, id, nil
}

// saleTx runs fn on the locked row of sale id in one write transaction;
// fn returns the audit entry to record with its change (nil: nothing
// changed, nothing recorded).
func (st *SaleStore) saleTx(ctx context.Context, id string, fn func(tx *sql.Tx, cur *seckill.Sale) (*seckill.AuditEntry, error)) error {
	if !seckill.ValidSaleID(id) {
		return fmt.Errorf("sale %q: %w", id, seckill.ErrNotFound)
	}
	q := &st.db.dialect.sql.admin
	tx, err := st.db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	cur, err := scanSale(tx.QueryRowContext(ctx, q.lockSale, id))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sale %s: %w", id, seckill.ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("lock sale %s: %w", id, err)
	}
	e, err := fn(tx, cur)
	if err != nil {
		return err
	}
	if e != nil {
		if err := insertAudit(ctx, tx, q, e); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// checkOne fails unless res changed exactly one row: the row was locked,
// so anything else is a bug, not a race.
func checkOne(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if n != 1 {
		return fmt.Errorf("%s: %d rows changed under a row lock, want 1", what, n)
	}
	return nil
}

// EditSale replaces the editable fields of a sale that has not started
// (see saleadmin.Admin). Its stock sets both what is on sale and what is
// unsold: nothing is sold before the start. Times are stored to the
// millisecond, as CreateSale does.
func (st *SaleStore) EditSale(ctx context.Context, s *seckill.Sale, version int64, actor string, now time.Time) (*seckill.Sale, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("edit sale: %w", err)
	}
	var out *seckill.Sale
	err := st.saleTx(ctx, s.ID, func(tx *sql.Tx, cur *seckill.Sale) (*seckill.AuditEntry, error) {
		switch {
		case version != 0 && version != cur.Version:
			return nil, seckill.Errorf(seckill.ECONFLICT, "The sale changed meanwhile (version %d, not %d): read it again.", cur.Version, version)
		case !now.Before(cur.StartAt):
			return nil, seckill.Errorf(seckill.ESTATECONFLICT, "The sale has started: it can only be ended early or given more stock.")
		case cur.Unsold != cur.Stock:
			return nil, seckill.Errorf(seckill.ESTATECONFLICT, "The sale has orders already.")
		}
		next := *s
		next.StartAt, next.EndAt = fromMillis(toMillis(s.StartAt)), fromMillis(toMillis(s.EndAt))
		next.Unsold, next.Version, next.CreatedAt = s.Stock, cur.Version+1, cur.CreatedAt
		nowMs := toMillis(now)
		res, err := tx.ExecContext(ctx, st.db.dialect.sql.admin.editSale,
			next.Name, next.PriceCents, next.Currency, next.Stock, next.Stock, next.PurchaseLimit,
			toMillis(next.StartAt), toMillis(next.EndAt), nowMs, cur.ID, cur.Version)
		if err := checkOne(res, err, "edit sale"); err != nil {
			return nil, err
		}
		out = &next
		return &seckill.AuditEntry{SaleID: cur.ID, Actor: actor, Action: seckill.AuditSaleEdited,
			Detail: saleDiff(cur, &next), At: fromMillis(nowMs)}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("edit sale %s: %w", s.ID, err)
	}
	return out, nil
}

// EndSale ends a sale at now (see saleadmin.Admin).
func (st *SaleStore) EndSale(ctx context.Context, id, actor string, now time.Time) (*seckill.Sale, bool, error) {
	var (
		out     *seckill.Sale
		changed bool
	)
	err := st.saleTx(ctx, id, func(tx *sql.Tx, cur *seckill.Sale) (*seckill.AuditEntry, error) {
		nowMs := toMillis(now)
		if toMillis(cur.EndAt) <= nowMs {
			out = cur
			return nil, nil
		}
		next := *cur
		next.EndAt = fromMillis(nowMs)
		if toMillis(next.StartAt) >= nowMs {
			// Never started: a window that closed before it opened.
			next.StartAt = fromMillis(nowMs - 1)
		}
		next.Version++
		res, err := tx.ExecContext(ctx, st.db.dialect.sql.admin.endSale,
			toMillis(next.StartAt), nowMs, nowMs, cur.ID, cur.Version)
		if err := checkOne(res, err, "end sale"); err != nil {
			return nil, err
		}
		out, changed = &next, true
		return &seckill.AuditEntry{SaleID: cur.ID, Actor: actor, Action: seckill.AuditSaleEnded,
			Detail: saleDiff(cur, &next), At: fromMillis(nowMs)}, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("end sale %s: %w", id, err)
	}
	return out, changed, nil
}

// AddStock puts n more units on a sale that has not ended (see
// saleadmin.Admin). The stock store learns of them separately (the
// caller's next step): until it does they are unsold, never sold twice.
func (st *SaleStore) AddStock(ctx context.Context, id string, n int64, actor string, now time.Time) (*seckill.Sale, error) {
	if n < 1 || n > seckill.MaxSaleStock {
		return nil, fmt.Errorf("add stock: %w", seckill.Errorf(seckill.EINVALID, "add must be between 1 and %d", seckill.MaxSaleStock))
	}
	var out *seckill.Sale
	err := st.saleTx(ctx, id, func(tx *sql.Tx, cur *seckill.Sale) (*seckill.AuditEntry, error) {
		nowMs := toMillis(now)
		switch {
		case toMillis(cur.EndAt) <= nowMs:
			return nil, seckill.Errorf(seckill.ESTATECONFLICT, "The sale has ended.")
		case cur.Stock+n > seckill.MaxSaleStock:
			return nil, seckill.Errorf(seckill.EINVALID, "A sale may have at most %d units.", seckill.MaxSaleStock)
		}
		next := *cur
		next.Stock += n
		next.Unsold += n
		next.Version++
		res, err := tx.ExecContext(ctx, st.db.dialect.sql.admin.addStock, n, n, nowMs, cur.ID, cur.Version)
		if err := checkOne(res, err, "add stock"); err != nil {
			return nil, err
		}
		out = &next
		detail, _ := json.Marshal(map[string]any{"added": n, "stock": []int64{cur.Stock, next.Stock}, "unsold": []int64{cur.Unsold, next.Unsold}})
		return &seckill.AuditEntry{SaleID: cur.ID, Actor: actor, Action: seckill.AuditSaleStockAdded,
			Detail: string(detail), At: fromMillis(nowMs)}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("add stock to sale %s: %w", id, err)
	}
	return out, nil
}

// saleDiff is the audit detail of a change from a to b: each changed
// field as [before, after].
func saleDiff(a, b *seckill.Sale) string {
	d := map[string]any{}
	add := func(name string, x, y any) {
		if x != y {
			d[name] = []any{x, y}
		}
	}
	add("name", a.Name, b.Name)
	add("price_cents", a.PriceCents, b.PriceCents)
	add("currency", a.Currency, b.Currency)
	add("stock", a.Stock, b.Stock)
	add("per_user_limit", a.PurchaseLimit, b.PurchaseLimit)
	add("start_at", a.StartAt.UTC().Format(time.RFC3339Nano), b.StartAt.UTC().Format(time.RFC3339Nano))
	add("end_at", a.EndAt.UTC().Format(time.RFC3339Nano), b.EndAt.UTC().Format(time.RFC3339Nano))
	raw, _ := json.Marshal(d)
	return string(raw)
}

func insertAudit(ctx context.Context, tx execer, q *adminQueries, e *seckill.AuditEntry) error {
	if !seckill.ValidActor(e.Actor) {
		return seckill.Errorf(seckill.EINVALID, "actor must be 1-%d printable bytes", seckill.MaxAuditActorBytes)
	}
	detail := e.Detail
	if detail == "" {
		detail = "{}"
	}
	_, err := tx.ExecContext(ctx, q.insertAudit, storableText(e.SaleID, maxFailedTextBytes),
		storableText(e.Subject, maxFailedTextBytes), e.Actor, e.Action, storableText(detail, 16<<10), toMillis(e.At))
	if err != nil {
		return fmt.Errorf("record audit entry: %w", err)
	}
	return nil
}

// RecordAudit appends e to the audit log; a zero e.At is now.
func (st *SaleStore) RecordAudit(ctx context.Context, e *seckill.AuditEntry) error {
	if e.At.IsZero() {
		e.At = st.db.now()
	}
	e.At = fromMillis(toMillis(e.At))
	return insertAudit(ctx, st.db.write, &st.db.dialect.sql.admin, e)
}

// AuditLog lists up to limit entries of a sale (every sale for ""),
// newest first.
func (st *SaleStore) AuditLog(ctx context.Context, saleID string, limit int) ([]*seckill.AuditEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("audit log: %w", seckill.Errorf(seckill.EINVALID, "limit must be positive, got %d", limit))
	}
	q := &st.db.dialect.sql.admin
	query, args := q.auditAll, []any{limit}
	if saleID != "" {
		query, args = q.auditOfSale, []any{saleID, limit}
	}
	entries, err := queryAll(ctx, st.db.read, scanAudit, query, args...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return entries, nil
}

func scanAudit(row interface{ Scan(...any) error }) (*seckill.AuditEntry, error) {
	var (
		e  seckill.AuditEntry
		at int64
	)
	if err := row.Scan(&e.ID, &e.SaleID, &e.Subject, &e.Actor, &e.Action, &e.Detail, &at); err != nil {
		return nil, err
	}
	e.At = fromMillis(at)
	return &e, nil
}
