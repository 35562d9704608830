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
// the same transaction.

var _ seckill.SaleAdmin = (*SaleStore)(nil)

// adminQueries is the SQL of this file. The text is the same in every
// dialect but for the bind parameters (PostgreSQL's are renumbered from
// '?' by rebind) and the row lock (SQLite's IMMEDIATE transactions hold the
// database's write lock from BEGIN, so a plain read locks).
type adminQueries struct {
	// lockSale selects saleColumns of sale $1, locking the row.
	lockSale string
	// listSales selects saleColumns; completed in Go with a WHERE clause
	// and "ORDER BY start_at_ms DESC, id DESC LIMIT n" (see ListSales).
	listSales string
	// editSale sets every editable column of sale $10 at version $11.
	editSale string
	// endSale sets start_at_ms $1, end_at_ms $2, updated_at_ms $3 of sale
	// $4 at version $5.
	endSale string
	// addStock adds $1 to stock and initial_stock of sale $3 at version $4.
	addStock string
	// insertAudit inserts (sale_id, subject, actor, action, detail, at_ms).
	insertAudit string
	// auditOfSale selects auditColumns of sale $1, newest first, up to $2;
	// auditAll the same of every sale, up to $1.
	auditOfSale string
	auditAll    string

	// failedForUpdate selects failedOrderSelect of reservation $1, locked.
	failedForUpdate string
	// saleForRedrive selects stock, version, price_cents, per_user_limit
	// of sale $1, locked.
	saleForRedrive string
	// buyerHeld sums the qty of the orders of sale $1 by user $2 in status
	// $3 or $4.
	buyerHeld string
	// resolveFailed sets resolved_at_ms $1, resolution $2,
	// resolution_note $3, resolved_by $4 of reservation $5 if unresolved.
	resolveFailed string
}

const auditColumns = `id, sale_id, subject, actor, action, detail, at_ms`

func newAdminQueries(d *dialect) *adminQueries {
	lock := " FOR UPDATE"
	if d == sqliteDialect {
		lock = ""
	}
	q := &adminQueries{
		lockSale:  `SELECT ` + saleColumns + ` FROM sales WHERE id = ?` + lock,
		listSales: `SELECT ` + saleColumns + ` FROM sales`,
		editSale: `UPDATE sales SET name = ?, price_cents = ?, currency = ?, stock = ?, initial_stock = ?,
			per_user_limit = ?, start_at_ms = ?, end_at_ms = ?, updated_at_ms = ?, version = version + 1
			WHERE id = ? AND version = ?`,
		endSale: `UPDATE sales SET start_at_ms = ?, end_at_ms = ?, updated_at_ms = ?, version = version + 1
			WHERE id = ? AND version = ?`,
		addStock: `UPDATE sales SET stock = stock + ?, initial_stock = initial_stock + ?, updated_at_ms = ?, version = version + 1
			WHERE id = ? AND version = ?`,
		insertAudit: `INSERT INTO audit_log (sale_id, subject, actor, action, detail, at_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		auditOfSale: `SELECT ` + auditColumns + ` FROM audit_log WHERE sale_id = ? ORDER BY id DESC LIMIT ?`,
		auditAll:    `SELECT ` + auditColumns + ` FROM audit_log ORDER BY id DESC LIMIT ?`,

		failedForUpdate: `SELECT ` + failedOrderSelect + ` FROM failed_orders WHERE reservation_id = ?` + lock,
		saleForRedrive:  `SELECT stock, version, price_cents, per_user_limit FROM sales WHERE id = ?` + lock,
		buyerHeld: `SELECT COALESCE(SUM(qty), 0) FROM orders
			WHERE sale_id = ? AND user_id = ? AND status IN (?, ?)`,
		resolveFailed: `UPDATE failed_orders SET resolved_at_ms = ?, resolution = ?, resolution_note = ?, resolved_by = ?
			WHERE reservation_id = ? AND resolved_at_ms IS NULL`,
	}
	if d == postgresDialect {
		for _, p := range []*string{&q.lockSale, &q.editSale, &q.endSale, &q.addStock, &q.insertAudit,
			&q.auditOfSale, &q.auditAll, &q.failedForUpdate, &q.saleForRedrive, &q.buyerHeld, &q.resolveFailed} {
			*p = rebind(*p)
		}
	}
	return q
}

var (
	sqliteAdminQueries   = newAdminQueries(sqliteDialect)
	mysqlAdminQueries    = newAdminQueries(mysqlDialect)
	postgresAdminQueries = newAdminQueries(postgresDialect)
)

func adminQueriesOf(d *dialect) *adminQueries {
	switch d {
	case sqliteDialect:
		return sqliteAdminQueries
	case mysqlDialect:
		return mysqlAdminQueries
	case postgresDialect:
		return postgresAdminQueries
	}
	panic("sqlstore: no admin queries for dialect " + d.name)
}

// rebind numbers the '?' parameters of q as $1, $2, … (no query of this
// file has a '?' anywhere else).
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// bindFrom is the dialect's i-th (1-based) bind parameter.
func (d *dialect) bindFrom(i int) string {
	if d == postgresDialect {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}

// ListSales returns one page of sales matching f, newest start first,
// then by id descending. The cursor is opaque to callers: the last sale's
// start and id, so pages stay stable while sales are added.
func (st *SaleStore) ListSales(ctx context.Context, f seckill.SaleFilter) (*seckill.SalePage, error) {
	if f.Limit < 1 || f.Limit > seckill.MaxSalePage {
		return nil, fmt.Errorf("list sales: %w", seckill.Errorf(seckill.EINVALID, "limit must be between 1 and %d", seckill.MaxSalePage))
	}
	d := st.db.dialect
	var (
		where []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return d.bindFrom(len(args)) }
	now := toMillis(f.Now)
	switch f.State {
	case "":
	case seckill.SaleScheduled:
		where = append(where, "start_at_ms > "+arg(now))
	case seckill.SaleLive:
		where = append(where, "start_at_ms <= "+arg(now)+" AND end_at_ms > "+arg(now))
	case seckill.SaleEnded:
		where = append(where, "end_at_ms <= "+arg(now))
	default:
		return nil, fmt.Errorf("list sales: %w", seckill.Errorf(seckill.EINVALID, "state must be scheduled, live or ended"))
	}
	if f.After != "" {
		start, id, err := decodeSaleCursor(f.After)
		if err != nil {
			return nil, fmt.Errorf("list sales: %w", err)
		}
		where = append(where, "(start_at_ms < "+arg(start)+" OR (start_at_ms = "+arg(start)+" AND id < "+arg(id)+"))")
	}
	q := adminQueriesOf(d).listSales
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	// One more than asked: whether there is a next page.
	q += " ORDER BY start_at_ms DESC, id DESC LIMIT " + arg(f.Limit+1)
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
	q := adminQueriesOf(st.db.dialect)
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
// (see seckill.SaleAdmin). Its stock sets both what is on sale and what is
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
		res, err := tx.ExecContext(ctx, adminQueriesOf(st.db.dialect).editSale,
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

// EndSale ends a sale at now (see seckill.SaleAdmin).
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
		res, err := tx.ExecContext(ctx, adminQueriesOf(st.db.dialect).endSale,
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
// seckill.SaleAdmin). The stock store learns of them separately (the
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
		res, err := tx.ExecContext(ctx, adminQueriesOf(st.db.dialect).addStock, n, n, nowMs, cur.ID, cur.Version)
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
	return insertAudit(ctx, st.db.write, adminQueriesOf(st.db.dialect), e)
}

// AuditLog lists up to limit entries of a sale (every sale for ""),
// newest first.
func (st *SaleStore) AuditLog(ctx context.Context, saleID string, limit int) ([]*seckill.AuditEntry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("audit log: %w", seckill.Errorf(seckill.EINVALID, "limit must be positive, got %d", limit))
	}
	q := adminQueriesOf(st.db.dialect)
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
