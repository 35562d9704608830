package redis

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// testArchive: an ended sale loses its idempotency hash first, and the
// rest of its keys only once its outbox is empty and the database has
// every reservation; what is left is the summary, and the sale leaves the
// list of kept sales.
func testArchive(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 3))
	if kept, err := s.Archive().KeptSales(ctx); err != nil || !slices.Contains(kept, sale.ID) {
		t.Fatalf("KeptSales = %v, %v; want it to list %s", kept, err, sale.ID)
	}
	reqs := []seckill.ReserveRequest{request(sale.ID, "alice", 1, "k1"), request(sale.ID, "bob", 2, "k2"), request(sale.ID, "carol", 1, "")}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, reqs); err != nil {
		t.Fatal(err)
	}
	live, err := s.Archive().Footprint(ctx, sale.ID)
	if err != nil {
		t.Fatalf("Footprint: %v", err)
	}
	if live.Reservations != 3 || live.Keys["idem"] == 0 || live.Keys["res"] == 0 || live.BytesPerReservation() <= 0 {
		t.Fatalf("Footprint of the live sale = %+v", live)
	}
	if dropped, err := s.Archive().DropIdempotency(ctx, sale.ID); err != nil || dropped {
		t.Fatalf("DropIdempotency of a live sale = %v, %v; want false", dropped, err)
	}
	if ok, why, err := s.Archive().ArchiveSale(ctx, sale.ID, seckill.ArchiveRecorded{Reservations: 3}, "{}"); err != nil || ok {
		t.Fatalf("ArchiveSale of a live sale = %v %q, %v; want refused", ok, why, err)
	}
	// End the window in Redis itself (every bucket's end_ms in the past),
	// rather than racing a short window against a loaded machine.
	for _, tag := range mustTags(t, s, sale.ID) {
		if err := s.client.Do(ctx, s.client.B().Hset().Key(s.keys(tag)[keyStock]).FieldValue().FieldValue("end_ms", "1").Build()).Error(); err != nil {
			t.Fatalf("closing the window of %s: %v", tag, err)
		}
	}
	if dropped, err := s.Archive().DropIdempotency(ctx, sale.ID); err != nil || !dropped {
		t.Fatalf("DropIdempotency of an ended sale = %v, %v; want true", dropped, err)
	}
	if f, err := s.Archive().Footprint(ctx, sale.ID); err != nil || f.Keys["idem"] != 0 {
		t.Fatalf("Footprint after dropping the idempotency hash = %+v, %v; want no idem", f, err)
	}
	lvl, err := s.StockStore().Stock(ctx, sale.ID)
	if err != nil || lvl.Reserved != 4 {
		t.Fatalf("Stock after dropping the idempotency hash = %+v, %v; want 4 reserved", lvl, err)
	}
	if ok, why, err := s.Archive().ArchiveSale(ctx, sale.ID, seckill.ArchiveRecorded{Reservations: 3}, "{}"); err != nil || ok {
		t.Fatalf("ArchiveSale with the outbox full = %v %q, %v; want refused", ok, why, err)
	}
	// The relay's part: read and acknowledge every entry, of every bucket.
	tags := mustTags(t, s, sale.ID)
	read := 0
	for _, tag := range tags {
		es, err := s.Outbox().ReadOutbox(ctx, tag, "relay", "r1", 10, 0)
		if err != nil {
			t.Fatalf("ReadOutbox(%s): %v", tag, err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.StreamID)
		}
		if err := s.Outbox().AckOutbox(ctx, tag, "relay", ids); err != nil {
			t.Fatal(err)
		}
		read += len(es)
	}
	if read != 3 {
		t.Fatalf("read %d outbox entries; want 3", read)
	}
	if ok, why, err := s.Archive().ArchiveSale(ctx, sale.ID, seckill.ArchiveRecorded{Reservations: 2}, "{}"); err != nil || ok {
		t.Fatalf("ArchiveSale with a reservation not in the database = %v %q, %v; want refused", ok, why, err)
	}
	if ok, why, err := s.Archive().ArchiveSale(ctx, sale.ID, seckill.ArchiveRecorded{Reservations: 3}, `{"balanced":true}`); err != nil || !ok {
		t.Fatalf("ArchiveSale = %v %q, %v; want archived", ok, why, err)
	}
	for _, tag := range tags {
		for _, k := range append(s.keys(tag), s.movesKey(tag), s.movesInKey(tag)) {
			if exists(t, s, k) != 0 {
				t.Errorf("key %s is still there", k)
			}
		}
	}
	// A relay that listed the sale before it was archived reads it once
	// more, blocking or not: it finds nothing and leaves nothing behind
	// (it drops the sale at its next listing, and nobody would delete a
	// stream it made).
	for _, tag := range tags {
		for _, block := range []time.Duration{0, 10 * time.Millisecond} {
			if es, err := s.Outbox().ReadOutbox(ctx, tag, "relay", "r2", 10, block); err != nil || len(es) != 0 {
				t.Errorf("ReadOutbox(%s, block %v) after archiving = %v, %v; want nothing", tag, block, es, err)
			}
		}
		if k := s.keys(tag)[keyOutbox]; exists(t, s, k) != 0 {
			t.Errorf("a relay's read after archiving left %s behind", k)
		}
	}
	if sum, ok, err := s.Archive().ArchivedSummary(ctx, sale.ID); err != nil || !ok || sum != `{"balanced":true}` {
		t.Errorf("ArchivedSummary = %q, %v, %v", sum, ok, err)
	}
	if kept, err := s.Archive().KeptSales(ctx); err != nil || slices.Contains(kept, sale.ID) {
		t.Errorf("KeptSales = %v, %v; want %s gone", kept, err, sale.ID)
	}
	after, err := s.Archive().Footprint(ctx, sale.ID)
	if err != nil || after.Total >= live.Total || after.Reservations != 0 || len(after.Keys) != 1 {
		t.Errorf("Footprint after archiving = %+v, %v; want only the summary (live: %+v)", after, err, live)
	}
	if ok, why, err := s.Archive().ArchiveSale(ctx, sale.ID, seckill.ArchiveRecorded{Reservations: 3}, "{}"); err != nil || ok || why != "not loaded" {
		t.Errorf("second ArchiveSale = %v %q, %v; want not loaded", ok, why, err)
	}
}

func exists(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	n, err := s.client.Do(context.Background(), s.client.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testCounters: the counters follow reservations and restores, batched or
// not, without a scan.
func testCounters(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(10, 3)
	if c, err := s.Ledger().Counters(ctx, sale.ID); err != nil || c.Loaded {
		t.Fatalf("Counters of a sale not loaded = %+v, %v", c, err)
	}
	mustPreheat(t, s, sale)
	reqs := []seckill.ReserveRequest{request(sale.ID, "a", 2, ""), request(sale.ID, "b", 1, ""), request(sale.ID, "c", 3, "")}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, reqs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restorer().RestoreReservation(ctx, reqs[0].ReservationID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restorer().RestoreReservations(ctx, sale.ID, []string{reqs[1].ReservationID, reqs[0].ReservationID}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Ledger().Counters(ctx, sale.ID)
	want := StockCounters{Loaded: true, Total: 10, Reserved: 3, Restored: 3, Records: 3, Outbox: 3}
	if err != nil || c != want {
		t.Fatalf("Counters = %+v, %v; want %+v", c, err, want)
	}
}

func mustTags(t *testing.T, s *Store, saleID string) []string {
	t.Helper()
	tags, err := s.tags(context.Background(), saleID)
	if err != nil {
		t.Fatalf("tags of %s: %v", saleID, err)
	}
	return tags
}

// saleKeys lists the keys of saleID's hash tag, on every node, by their
// suffix after "{sale}:".
func saleKeys(t *testing.T, s *Store, saleID string) []string {
	t.Helper()
	ctx := context.Background()
	pattern := s.prefix + ":{" + saleID + "}:*"
	var out []string
	for _, node := range s.client.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatalf("scan %s: %v", pattern, err)
			}
			for _, k := range e.Elements {
				out = append(out, k[len(pattern)-1:])
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// testArchiveAdmission: archiving a queue sale drops its waiting room
// with the rest of its keys; a lottery's entries and results go too, but
// only when the database holds at least as many entries and winners.
func testArchiveAdmission(t *testing.T, s *Store) {
	ctx := context.Background()
	queue := liveSale(10, 1)
	queue.Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 5}
	mustPreheat(t, s, queue)
	if _, err := s.Queue().JoinBatch(ctx, queue, 10, []seckill.QueueJoin{{UserID: "a", IP: "ip:192.0.2.1"}, {UserID: "b", IP: "ip:192.0.2.1"}, {UserID: "c"}}); err != nil {
		t.Fatalf("JoinBatch: %v", err)
	}
	lottery := liveSale(10, 1)
	lottery.Admission = seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: time.Now().Add(30 * time.Minute)}
	mustPreheat(t, s, lottery)
	if _, err := s.Lottery().EnterBatch(ctx, lottery, []seckill.EntryRequest{{EntryID: seckill.NewEntryID(), UserID: "a", Qty: 1}, {EntryID: seckill.NewEntryID(), UserID: "b", Qty: 1}}); err != nil {
		t.Fatalf("EnterBatch: %v", err)
	}
	if err := s.Lottery().CloseEntries(ctx, lottery.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Lottery().RecordWon(ctx, lottery.ID, map[string]string{"a": "r1"}); err != nil {
		t.Fatal(err)
	}
	copied := map[string]seckill.ArchiveRecorded{lottery.ID: {Entries: 2, Winners: 1}}
	for sale, want := range map[string][]string{
		queue.ID:   {"queue", "queue_ip", "queue_seq", "stock"},
		lottery.ID: {"entries", "lottery", "stock", "won"},
	} {
		if got := saleKeys(t, s, sale); !slices.Equal(got, want) {
			t.Fatalf("keys of %s before archiving = %v, want %v", sale, got, want)
		}
		if err := s.client.Do(ctx, s.client.B().Hset().Key(s.keys(sale)[keyStock]).FieldValue().FieldValue("end_ms", "1").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if c, ok := copied[sale]; ok {
			for _, short := range []seckill.ArchiveRecorded{{}, {Entries: 2}, {Entries: 1, Winners: 1}} {
				if ok, why, err := s.Archive().ArchiveSale(ctx, sale, short, "{}"); err != nil || ok || why != whyNotArchived(-3) {
					t.Fatalf("ArchiveSale(%s) with %+v copied = %v %q, %v; want refused: entries not copied", sale, short, ok, why, err)
				}
				if got := saleKeys(t, s, sale); !slices.Equal(got, want) {
					t.Fatalf("keys of %s after a refused archive = %v, want %v", sale, got, want)
				}
			}
			if ok, why, err := s.Archive().ArchiveSale(ctx, sale, c, "{}"); err != nil || !ok {
				t.Fatalf("ArchiveSale(%s) with %+v copied = %v %q, %v", sale, c, ok, why, err)
			}
			continue
		}
		if ok, why, err := s.Archive().ArchiveSale(ctx, sale, seckill.ArchiveRecorded{}, "{}"); err != nil || !ok {
			t.Fatalf("ArchiveSale(%s) = %v %q, %v", sale, ok, why, err)
		}
	}
	for _, sale := range []string{queue.ID, lottery.ID} {
		if got := saleKeys(t, s, sale); !slices.Equal(got, []string{"archived"}) {
			t.Errorf("keys of %s after archiving = %v, want [archived]", sale, got)
		}
	}
}
