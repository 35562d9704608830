package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
)

// Ledger is the stock store's side of reconciliation (reconcile.StockLedger
// and reconcile.ArchivingLedger): the sale's stock, its reservation
// records, its outbox's length and its running counters, read without
// changing anything.
type Ledger struct{ *conn }

// Ledger returns the store's ledger.
func (s *Store) Ledger() Ledger { return Ledger{s.conn} }

// Stock is StockStore.Stock.
func (s Ledger) Stock(ctx context.Context, saleID string) (seckill.StockLevel, error) {
	return StockStore{s.conn}.Stock(ctx, saleID)
}

// OutboxLen is Outbox.OutboxLen.
func (s Ledger) OutboxLen(ctx context.Context, saleID string) (int64, error) {
	return Outbox{s.conn}.OutboxLen(ctx, saleID)
}

// ArchivedSummary is Archive.ArchivedSummary.
func (s Ledger) ArchivedSummary(ctx context.Context, saleID string) (summary string, ok bool, err error) {
	return Archive{s.conn}.ArchivedSummary(ctx, saleID)
}

// reservationsScanCount is the COUNT hint of each HSCAN call: enough to
// list a large sale in few round trips, few enough that no call blocks
// Redis for long.
const reservationsScanCount = 1000

// Reservations lists every reservation record of a sale, sorted by
// reservation id (which sorts by time); none for a sale that has none or
// is not loaded. It holds the whole list: for a large sale, use
// ScanReservations. A malformed record fails the whole call, naming it:
// reconciliation must not skip what it cannot read.
func (s Ledger) Reservations(ctx context.Context, saleID string) ([]seckill.ReservationRecord, error) {
	var out []seckill.ReservationRecord
	index := map[string]int{}
	err := s.ScanReservations(ctx, saleID, reservationsScanCount, func(page []seckill.ReservationRecord) error {
		for _, r := range page {
			if j, ok := index[r.ReservationID]; ok {
				out[j] = r
				continue
			}
			index[r.ReservationID] = len(out)
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b seckill.ReservationRecord) int { return strings.Compare(a.ReservationID, b.ReservationID) })
	return out, nil
}

// ScanReservations calls fn with the reservation records of a sale, one
// HSCAN reply (about count records) of one bucket at a time, so that
// neither Redis nor this process holds a large sale at once; nothing for
// a sale that is not loaded. The pages are no snapshot: a reservation
// made or restored during the scan may or may not be in them, or may
// appear in its earlier state. HSCAN returns an element twice only when
// the hash shrinks during the scan, and a res hash never shrinks (records
// are never deleted, only the whole key is); a page repeats no record.
// A malformed record fails the scan, naming it.
func (s Ledger) ScanReservations(ctx context.Context, saleID string, count int, fn func([]seckill.ReservationRecord) error) error {
	if !seckill.ValidSaleID(saleID) {
		return fmt.Errorf("reservations: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	if count < 1 {
		count = reservationsScanCount
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	var page []seckill.ReservationRecord
	seen := map[string]int{}
	for _, tag := range bs.tags { // every bucket of the sale
		key := s.keys(tag)[keyRes]
		var cursor uint64
		for {
			e, err := s.client.Do(ctx, s.client.B().Hscan().Key(key).Cursor(cursor).Count(int64(count)).Build()).AsScanEntry()
			if err != nil {
				return fmt.Errorf("reservations: %w", classify(err))
			}
			if len(e.Elements)%2 != 0 {
				return fmt.Errorf("reservations: HSCAN answered %d elements; want field, value pairs", len(e.Elements))
			}
			page = page[:0]
			clear(seen)
			for i := 0; i < len(e.Elements); i += 2 {
				r, err := parseRecord(idOfField(saleID, e.Elements[i]), e.Elements[i+1])
				if err != nil {
					return fmt.Errorf("reservations: sale %s: %w", saleID, err)
				}
				if j, ok := seen[r.ReservationID]; ok {
					page[j] = r
					continue
				}
				seen[r.ReservationID] = len(page)
				page = append(page, r)
			}
			if len(page) > 0 {
				if err := fn(page); err != nil {
					return err
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// ReservationsOf reads the records of ids, reservations of saleID, with
// one HMGET of each bucket's res hash (pipelined), and returns those it
// found. A malformed record fails the call, naming it.
func (s Ledger) ReservationsOf(ctx context.Context, saleID string, ids []string) (map[string]seckill.ReservationRecord, error) {
	if !seckill.ValidSaleID(saleID) {
		return nil, fmt.Errorf("reservations of ids: %w", seckill.Errorf(seckill.EINVALID, "invalid sale id"))
	}
	out := make(map[string]seckill.ReservationRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	bs, err := s.buckets(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("reservations of ids: %w", err)
	}
	// Each id's compact field, then its whole id (a record written before).
	fields := make([]string, 0, 2*len(ids))
	of := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		for _, f := range recordFields(id) {
			fields, of = append(fields, f), append(of, id)
		}
	}
	cmds := make(rueidis.Commands, 0, len(bs.tags))
	for _, tag := range bs.tags {
		cmds = append(cmds, s.client.B().Hmget().Key(s.keys(tag)[keyRes]).Field(fields...).Build())
	}
	for _, res := range s.client.DoMulti(ctx, cmds...) {
		vals, err := res.ToArray()
		if err != nil {
			return nil, fmt.Errorf("reservations of ids: %w", classify(err))
		}
		for i, v := range vals {
			rec, err := v.ToString()
			if err != nil || i >= len(of) {
				continue // nil: not in this bucket, or not under this field
			}
			r, err := parseRecord(of[i], rec)
			if err != nil {
				return nil, fmt.Errorf("reservations of ids: sale %s: %w", saleID, err)
			}
			out[r.ReservationID] = r
		}
	}
	return out, nil
}

// StockCounters are the running counts Redis keeps of a sale as
// reservations and restores happen, updated by the same scripts that
// change them: read in one round trip, whatever the sale's size.
type StockCounters struct {
	Loaded   bool  // false: the sale is not in Redis (not preheated, or archived)
	Total    int64 // units put on sale
	Reserved int64 // units held by active reservations
	Restored int64 // units given back by restores
	Records  int64 // reservation records (HLEN of res)
	Outbox   int64 // reservations in the outbox (OutboxLen)
}

// Counters reads a sale's StockCounters: HMGETs of the stock hash, HLEN of
// the res hash and XLEN of the outbox, pipelined, summed over the sale's
// buckets (units moving between buckets count in neither total).
func (s Ledger) Counters(ctx context.Context, saleID string) (StockCounters, error) {
	tags, err := s.tags(ctx, saleID)
	if err != nil {
		return StockCounters{}, fmt.Errorf("counters: %w", err)
	}
	const per = 4 // commands per bucket
	cmds := make(rueidis.Commands, 0, per*len(tags))
	for _, tag := range tags {
		keys := s.keys(tag)
		cmds = append(cmds,
			s.client.B().Hmget().Key(keys[keyStock]).Field("total", "reserved", "restored").Build(),
			s.client.B().Hlen().Key(keys[keyRes]).Build())
		cmds = append(cmds, s.outboxCountCmds(tag)...)
	}
	res := s.client.DoMulti(ctx, cmds...)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return StockCounters{}, fmt.Errorf("counters: %w", classify(err))
		}
	}
	var c StockCounters
	for b := range tags {
		vals, err := res[per*b].ToArray()
		if err != nil || len(vals) != 3 {
			return StockCounters{}, fmt.Errorf("counters: malformed stock hash of %s: %v", tags[b], err)
		}
		if vals[0].IsNil() {
			if b == 0 {
				return StockCounters{}, nil // bucket 0 makes the sale loaded
			}
			continue
		}
		c.Loaded = true
		for i, p := range []*int64{&c.Total, &c.Reserved, &c.Restored} {
			if vals[i].IsNil() {
				continue // no restore yet: no `restored` field
			}
			n, err := vals[i].AsInt64()
			if err != nil {
				return StockCounters{}, fmt.Errorf("counters: malformed stock hash of %s: %w", tags[b], err)
			}
			*p += n
		}
		n, _ := res[per*b+1].AsInt64()
		c.Records += n
		if n, err = outboxCount(res[per*b+2], res[per*b+3]); err != nil {
			return StockCounters{}, fmt.Errorf("counters: outbox of %s: %w", tags[b], err)
		}
		c.Outbox += n
	}
	return c, nil
}
