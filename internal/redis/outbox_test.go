package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestOutboxRelaySide covers the relay's side of the outbox on every
// backend: the registry, reading with a consumer group, re-reading,
// claiming, acking and counting.
func TestOutboxRelaySide(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		runParallel(t, newStore, []storeTest{
			{"Registry", testOutboxRegistry},
			{"Forget", testOutboxForget},
			{"ReadAck", testOutboxReadAck},
			{"AckOnlyDelivered", testOutboxAckOnlyDelivered},
			{"AckOutOfOrder", testOutboxAckOutOfOrder},
			{"Block", testOutboxBlock},
			{"Group", testOutboxGroup},
			{"ReadPending", testOutboxReadPending},
			{"Claim", testOutboxClaim},
			{"Malformed", testOutboxMalformed},
			{"Batches", testOutboxBatches},
			{"KeysTravel", testOutboxKeysTravel},
			{"MalformedBatches", testOutboxMalformedBatches},
			{"EntriesOfOne", testOutboxEntriesOfOne},
			{"InvalidArgs", testOutboxInvalidArgs},
		})
	})
}

const testGroup = "relay"

// reserveN reserves one unit for each of n fresh users, one Reserve call
// (so one outbox entry) each, and returns the requests, in outbox order.
func reserveN(t *testing.T, s *Store, saleID string, n int) []seckill.ReserveRequest {
	t.Helper()
	reqs := make([]seckill.ReserveRequest, n)
	for i := range reqs {
		reqs[i] = reserveBatch(t, s, saleID, 1)[0]
	}
	return reqs
}

// reserveBatch reserves one unit for each of n fresh users in one Reserve
// call, one outbox entry, and returns the requests, in outbox order.
func reserveBatch(t *testing.T, s *Store, saleID string, n int) []seckill.ReserveRequest {
	t.Helper()
	reqs := make([]seckill.ReserveRequest, n)
	for i := range reqs {
		reqs[i] = request(saleID, servicetest.UniqueName("u"), 1, "")
	}
	res, err := s.StockStore().Reserve(context.Background(), saleID, reqs)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	for i, r := range res {
		if r.Outcome != seckill.OutcomeReserved {
			t.Fatalf("Reserve: results[%d] = %+v; want reserved", i, r)
		}
	}
	return reqs
}

// idsOf is the id of each of xs.
func idsOf[T any](xs []T, id func(T) string) []string {
	ids := make([]string, len(xs))
	for i, x := range xs {
		ids[i] = id(x)
	}
	return ids
}

func streamIDs(es []seckill.OutboxEntry) []string {
	return idsOf(es, func(e seckill.OutboxEntry) string { return e.StreamID })
}

func reservationIDs(es []seckill.OutboxEntry) []string {
	return idsOf(es, func(e seckill.OutboxEntry) string { return e.Event.ReservationID })
}

func requestIDs(reqs []seckill.ReserveRequest) []string {
	return idsOf(reqs, func(r seckill.ReserveRequest) string { return r.ReservationID })
}

func wantCounts(t *testing.T, s *Store, saleID string, wantLen, wantPending int64) {
	t.Helper()
	ctx := context.Background()
	if n, err := s.Outbox().OutboxLen(ctx, saleID); err != nil || n != wantLen {
		t.Errorf("OutboxLen = %d, %v; want %d", n, err, wantLen)
	}
	if n, err := s.Outbox().OutboxPending(ctx, saleID, testGroup); err != nil || n != wantPending {
		t.Errorf("OutboxPending = %d, %v; want %d", n, err, wantPending)
	}
}

// ackWant acks ids for testGroup and checks the counts after it.
func ackWant(t *testing.T, s *Store, saleID string, ids []string, wantLen, wantPending int64) {
	t.Helper()
	if err := s.Outbox().AckOutbox(context.Background(), saleID, testGroup, ids); err != nil {
		t.Fatalf("AckOutbox(%v): %v", ids, err)
	}
	wantCounts(t, s, saleID, wantLen, wantPending)
}

func testOutboxRegistry(t *testing.T, s *Store) {
	ctx := context.Background()
	if got, err := s.Outbox().OutboxSales(ctx); err != nil || len(got) != 0 {
		t.Fatalf("OutboxSales before any preheat = %v, %v; want none", got, err)
	}
	a, b := liveSale(5, 1), liveSale(5, 1)
	b.ID = "a" + a.ID // sorts after a
	mustPreheat(t, s, b)
	mustPreheat(t, s, a)
	want := fmt.Sprint([]string{b.ID, a.ID})
	if b.ID > a.ID {
		want = fmt.Sprint([]string{a.ID, b.ID})
	}
	if got, err := s.Outbox().OutboxSales(ctx); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("OutboxSales = %v, %v; want %s", got, err, want)
	}
	// A registration lost somehow is repaired by the next preheat, though
	// the sale is loaded already.
	if err := s.client.Do(ctx, s.client.B().Srem().Key(s.outboxRegistryKey()).Member(a.ID).Build()).Error(); err != nil {
		t.Fatalf("SREM: %v", err)
	}
	if created, err := s.StockStore().Preheat(ctx, a); err != nil || created {
		t.Fatalf("second Preheat = %v, %v; want false, nil", created, err)
	}
	if got, err := s.Outbox().OutboxSales(ctx); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("OutboxSales after a second preheat = %v, %v; want %s", got, err, want)
	}
	// A refused preheat registers nothing.
	bad := liveSale(0, 1)
	if _, err := s.StockStore().Preheat(ctx, bad); err == nil {
		t.Fatal("Preheat of stock 0 succeeded")
	}
	if got, err := s.Outbox().OutboxSales(ctx); err != nil || fmt.Sprint(got) != want {
		t.Fatalf("OutboxSales after a refused preheat = %v, %v; want %s", got, err, want)
	}
}

func registered(t *testing.T, s *Store, saleID string) bool {
	t.Helper()
	ok, err := s.client.Do(context.Background(), s.client.B().Sismember().Key(s.outboxRegistryKey()).Member(saleID).Build()).AsBool()
	if err != nil {
		t.Fatalf("SISMEMBER: %v", err)
	}
	return ok
}

func testOutboxForget(t *testing.T, s *Store) {
	ctx := context.Background()
	forget := func(saleID string, want bool) {
		t.Helper()
		got, err := s.Outbox().ForgetOutbox(ctx, saleID)
		if err != nil || got != want {
			t.Fatalf("ForgetOutbox(%s) = %v, %v; want %v, nil", saleID, got, err, want)
		}
		if registered(t, s, saleID) == want {
			t.Fatalf("after ForgetOutbox(%s) = %v: registered = %v", saleID, got, !want)
		}
	}

	// A live sale stays registered, with an empty outbox too: its next
	// reservation would otherwise go unseen.
	live := liveSale(5, 1)
	mustPreheat(t, s, live)
	forget(live.ID, false)
	reserveN(t, s, live.ID, 1)
	forget(live.ID, false)

	// So does a sale that ended less than forgetGrace ago.
	recent := liveSale(5, 1)
	recent.StartAt, recent.EndAt = time.Now().Add(-time.Hour), time.Now().Add(-forgetGrace/2)
	mustPreheat(t, s, recent)
	forget(recent.ID, false)

	// An ended sale goes once its outbox is empty, not before.
	ended := liveSale(5, 1)
	ended.StartAt, ended.EndAt = time.Now().Add(-time.Hour), time.Now().Add(-2*forgetGrace)
	mustPreheat(t, s, ended)
	key := s.keys(ended.ID)[keyOutbox]
	id, err := s.client.Do(ctx, s.client.B().Xadd().Key(key).Id("*").FieldValue().
		FieldValue(OutboxReservationID, seckill.NewReservationID(ended.ID, time.Now())).Build()).ToString()
	if err != nil {
		t.Fatalf("XADD: %v", err)
	}
	forget(ended.ID, false)
	if err := s.client.Do(ctx, s.client.B().Xdel().Key(key).Id(id).Build()).Error(); err != nil {
		t.Fatalf("XDEL: %v", err)
	}
	forget(ended.ID, true)
	forget(ended.ID, true) // again: nothing left to do

	// A registered sale that was never loaded (its preheat failed after
	// registering) can go too.
	unloaded := servicetest.UniqueName("sale_")
	if err := s.register(ctx, unloaded); err != nil {
		t.Fatalf("register: %v", err)
	}
	forget(unloaded, true)

	if _, err := s.Outbox().ForgetOutbox(ctx, "a{b}"); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("ForgetOutbox of a bad sale id: err = %v; want code %s", err, seckill.EINVALID)
	}
}

func testOutboxReadAck(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	// Reading before anything was reserved creates the group; the entries
	// reserved afterwards are then all delivered.
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0); err != nil || len(es) != 0 {
		t.Fatalf("ReadOutbox of an empty outbox = %v, %v; want none", es, err)
	}
	before := time.Now().Add(-time.Second)
	reqs := reserveN(t, s, sale.ID, 5)
	after := time.Now().Add(time.Second)

	first, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 3, 0)
	if err != nil || len(first) != 3 {
		t.Fatalf("ReadOutbox(count 3) = %d entries, %v; want 3", len(first), err)
	}
	for i, e := range first {
		ev, r := e.Event, reqs[i]
		if e.Err != nil || e.StreamID == "" || ev.ReservationID != r.ReservationID || ev.SaleID != sale.ID ||
			ev.UserID != r.UserID || ev.Qty != 1 || ev.ReservedAt.Before(before) || ev.ReservedAt.After(after) ||
			e.Fields != nil || e.Seq != 0 {
			t.Errorf("entry %d = %+v; want reservation %s of user %s, qty 1, reserved in [%s, %s]",
				i, e, r.ReservationID, r.UserID, before, after)
		}
	}
	// A second consumer of the group competes for the rest.
	rest, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c2", 10, 0)
	if err != nil || fmt.Sprint(reservationIDs(rest)) != fmt.Sprint(requestIDs(reqs[3:])) {
		t.Fatalf("ReadOutbox by c2 = %v, %v; want %v", reservationIDs(rest), err, requestIDs(reqs[3:]))
	}
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0); err != nil || len(es) != 0 {
		t.Fatalf("ReadOutbox once all were delivered = %v, %v; want none", es, err)
	}
	wantCounts(t, s, sale.ID, 5, 5)

	ackWant(t, s, sale.ID, streamIDs(first), 2, 2)
	// Acking again (a relay that lost the reply, or one that reclaimed
	// the entries) changes nothing.
	ackWant(t, s, sale.ID, streamIDs(first), 2, 2)
	ackWant(t, s, sale.ID, streamIDs(rest), 0, 0)
	if err := s.Outbox().AckOutbox(ctx, sale.ID, testGroup, nil); err != nil {
		t.Fatalf("AckOutbox of nothing: %v", err)
	}

	// The reservations themselves are untouched by acking their entries.
	if _, _, status, err := s.StockStore().Reservation(ctx, reqs[0].ReservationID); err != nil || status != StatusActive {
		t.Errorf("Reservation after ack = %q, %v; want %q", status, err, StatusActive)
	}
	if n, err := s.Outbox().OutboxPending(ctx, servicetest.UniqueName("sale_"), testGroup); err != nil || n != 0 {
		t.Errorf("OutboxPending of an unknown sale = %d, %v; want 0, nil", n, err)
	}
}

// testOutboxAckOnlyDelivered guards the rule that an entry is deleted only
// once the group has acknowledged it: an id the group never delivered, or
// one acked under another group, stays.
func testOutboxAckOnlyDelivered(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	reserveN(t, s, sale.ID, 2)
	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 1, 0)
	if err != nil || len(es) != 1 {
		t.Fatalf("ReadOutbox = %d entries, %v; want 1", len(es), err)
	}
	all, err := s.client.Do(ctx, s.client.B().Xrange().Key(s.keys(sale.ID)[keyOutbox]).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(all) != 2 {
		t.Fatalf("XRANGE = %d entries, %v; want 2", len(all), err)
	}
	undelivered := all[1].ID
	for _, tt := range []struct {
		group string
		ids   []string
	}{
		{testGroup, []string{undelivered}},
		{"othergroup", []string{es[0].StreamID, undelivered}},
		{testGroup, []string{"1-0"}}, // no such entry
	} {
		if err := s.Outbox().AckOutbox(ctx, sale.ID, tt.group, tt.ids); err != nil {
			t.Fatalf("AckOutbox(%s, %v): %v", tt.group, tt.ids, err)
		}
		wantCounts(t, s, sale.ID, 2, 1)
	}
	ackWant(t, s, sale.ID, []string{es[0].StreamID, undelivered}, 1, 0)
	if rest, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0); err != nil || len(rest) != 1 || rest[0].StreamID != undelivered {
		t.Fatalf("ReadOutbox = %v, %v; want the undelivered entry %s", streamIDs(rest), err, undelivered)
	}
}

// testOutboxAckOutOfOrder: a batch acked while an older one is still
// pending goes, and the older one and the entries never delivered stay
// (the ack trims the stream below the oldest pending entry only).
func testOutboxAckOutOfOrder(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(10, 1)
	mustPreheat(t, s, sale)
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0); err != nil || len(es) != 0 {
		t.Fatalf("ReadOutbox of an empty outbox = %v, %v; want none", es, err)
	}
	reqs := reserveN(t, s, sale.ID, 7)
	older, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 3, 0)
	if err != nil || len(older) != 3 {
		t.Fatalf("ReadOutbox by c1 = %d entries, %v; want 3", len(older), err)
	}
	newer, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c2", 3, 0)
	if err != nil || len(newer) != 3 {
		t.Fatalf("ReadOutbox by c2 = %d entries, %v; want 3", len(newer), err)
	}
	wantCounts(t, s, sale.ID, 7, 6)
	// The newer batch; then part of the older batch, not its first
	// entry; then that first entry.
	ackWant(t, s, sale.ID, streamIDs(newer), 4, 3)
	ackWant(t, s, sale.ID, streamIDs(older[1:]), 2, 1)
	ackWant(t, s, sale.ID, streamIDs(older[:1]), 1, 0)
	rest, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0)
	if err != nil || fmt.Sprint(reservationIDs(rest)) != fmt.Sprint(requestIDs(reqs[6:])) {
		t.Fatalf("ReadOutbox = %v, %v; want the entry never delivered, %v", reservationIDs(rest), err, requestIDs(reqs[6:]))
	}
}

func testOutboxBlock(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	const block = 300 * time.Millisecond
	start := time.Now()
	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, block)
	if took := time.Since(start); err != nil || len(es) != 0 || took < block/2 {
		t.Fatalf("ReadOutbox(block %s) of an empty outbox = %v, %v after %s; want none after about %s", block, es, err, took, block)
	}
	// An entry appended while a read waits ends the wait.
	done := make(chan []seckill.OutboxEntry, 1)
	go func() {
		es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 10*time.Second)
		if err != nil {
			t.Errorf("blocked ReadOutbox: %v", err)
		}
		done <- es
	}()
	time.Sleep(50 * time.Millisecond)
	reqs := reserveN(t, s, sale.ID, 1)
	select {
	case es := <-done:
		if len(es) != 1 || es[0].Event.ReservationID != reqs[0].ReservationID {
			t.Fatalf("blocked ReadOutbox = %v; want %s", reservationIDs(es), reqs[0].ReservationID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocked ReadOutbox did not return when an entry was added")
	}
}

// testOutboxGroup: a read makes its group, and the outbox of a loaded sale
// if need be (testOutboxBlock waits on it before the first reservation);
// of a sale not loaded (archived, or never preheated) it makes nothing,
// yet reads an outbox that is there. Making the group again, as a second
// relay does that lost the race to make it, answers made too.
func testOutboxGroup(t *testing.T, s *Store) {
	ctx := context.Background()
	gone := liveSale(10, 1) // never preheated
	key := s.keys(gone.ID)[keyOutbox]
	for _, block := range []time.Duration{0, 10 * time.Millisecond} {
		if es, err := s.Outbox().ReadOutbox(ctx, gone.ID, testGroup, "c1", 10, block); err != nil || len(es) != 0 {
			t.Fatalf("ReadOutbox(block %v) of a sale not loaded = %v, %v; want nothing", block, es, err)
		}
	}
	if exists(t, s, key) != 0 {
		t.Fatalf("a read of a sale not loaded made %s", key)
	}
	// Entries without their sale (a stock store that lost the stock hash
	// but not the outbox) are still read.
	id := seckill.NewReservationID(gone.ID, time.Now())
	add := s.client.B().Xadd().Key(key).Id("*").FieldValue().FieldValue(OutboxReservationID, id).
		FieldValue(OutboxUserID, "u1").FieldValue(OutboxQty, "1").
		FieldValue(OutboxReservedAtMs, strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()
	if err := s.client.Do(ctx, add).Error(); err != nil {
		t.Fatal(err)
	}
	if es, err := s.Outbox().ReadOutbox(ctx, gone.ID, testGroup, "c1", 10, 0); err != nil || len(es) != 1 || es[0].Event.ReservationID != id {
		t.Fatalf("ReadOutbox of an outbox without its sale = %v, %v; want %s", reservationIDs(es), err, id)
	}

	sale := mustPreheat(t, s, liveSale(10, 1))
	for i := range 2 {
		if made, err := s.createGroup(ctx, sale.ID, testGroup); err != nil || !made {
			t.Fatalf("createGroup #%d of a loaded sale = %v, %v; want made", i+1, made, err)
		}
	}
	if exists(t, s, s.keys(sale.ID)[keyOutbox]) != 1 {
		t.Fatal("no outbox after making the group of a loaded sale")
	}
	reqs := reserveN(t, s, sale.ID, 2)
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0); err != nil || fmt.Sprint(reservationIDs(es)) != fmt.Sprint(requestIDs(reqs)) {
		t.Fatalf("ReadOutbox = %v, %v; want %v", reservationIDs(es), err, requestIDs(reqs))
	}
}

func testOutboxReadPending(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	// No group yet: nothing pending, and no error.
	if es, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c1", 10); err != nil || len(es) != 0 {
		t.Fatalf("ReadPendingOutbox before any read = %v, %v; want none", es, err)
	}
	reqs := reserveN(t, s, sale.ID, 4)
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 3, 0); err != nil || len(es) != 3 {
		t.Fatalf("ReadOutbox = %d, %v; want 3", len(es), err)
	}
	// A Publish failed: the same entries come back, oldest first, and
	// only to their consumer; reading them again delivers nothing new.
	for range 2 {
		es, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c1", 10)
		if err != nil || fmt.Sprint(reservationIDs(es)) != fmt.Sprint(requestIDs(reqs[:3])) {
			t.Fatalf("ReadPendingOutbox(c1) = %v, %v; want %v", reservationIDs(es), err, requestIDs(reqs[:3]))
		}
	}
	if es, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c1", 2); err != nil || len(es) != 2 {
		t.Fatalf("ReadPendingOutbox(count 2) = %d, %v; want 2", len(es), err)
	}
	if es, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c2", 10); err != nil || len(es) != 0 {
		t.Fatalf("ReadPendingOutbox(c2) = %v, %v; want none", reservationIDs(es), err)
	}
	wantCounts(t, s, sale.ID, 4, 3)
	es, _ := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c1", 10)
	if err := s.Outbox().AckOutbox(ctx, sale.ID, testGroup, streamIDs(es)); err != nil {
		t.Fatalf("AckOutbox: %v", err)
	}
	if es, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c1", 10); err != nil || len(es) != 0 {
		t.Fatalf("ReadPendingOutbox after ack = %v, %v; want none", reservationIDs(es), err)
	}
	wantCounts(t, s, sale.ID, 1, 0)
}

func testOutboxClaim(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	if es, err := s.Outbox().ClaimStaleOutbox(ctx, sale.ID, testGroup, "c2", 0, 10); err != nil || len(es) != 0 {
		t.Fatalf("ClaimStaleOutbox without a group = %v, %v; want none", es, err)
	}
	reqs := reserveN(t, s, sale.ID, 4)
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "dead", 3, 0); err != nil || len(es) != 3 {
		t.Fatalf("ReadOutbox = %d, %v; want 3", len(es), err)
	}
	delivered := time.Now() // at or after the delivery to "dead"
	// Not idle long enough: a live relay's batch is left alone.
	if es, err := s.Outbox().ClaimStaleOutbox(ctx, sale.ID, testGroup, "c2", time.Hour, 10); err != nil || len(es) != 0 {
		t.Fatalf("ClaimStaleOutbox(min idle 1h) = %v, %v; want none", reservationIDs(es), err)
	}
	// The entries are to be idle 100ms for c2, and c2's claim is to
	// come long enough after the delivery that c3 below can tell the
	// entries c2 claimed from the one it did not, however slowly the
	// calls go on a loaded machine.
	const gap = 500 * time.Millisecond
	time.Sleep(gap)
	es, err := s.Outbox().ClaimStaleOutbox(ctx, sale.ID, testGroup, "c2", 100*time.Millisecond, 2)
	if err != nil || fmt.Sprint(reservationIDs(es)) != fmt.Sprint(requestIDs(reqs[:2])) {
		t.Fatalf("ClaimStaleOutbox(count 2) = %v, %v; want %v", reservationIDs(es), err, requestIDs(reqs[:2]))
	}
	for i, e := range es {
		if e.Err != nil || e.Event.UserID != reqs[i].UserID || e.Event.Qty != 1 {
			t.Errorf("claimed entry %d = %+v; want user %s, qty 1", i, e, reqs[i].UserID)
		}
	}
	// Claimed entries are fresh again: not stale for a third relay. Its
	// min idle is the third entry's idle time so far (it has been idle at
	// least that long), which is gap more than the time since c2 claimed
	// the other two: they are not stale for it unless this call takes
	// longer than gap to reach Redis.
	if es, err := s.Outbox().ClaimStaleOutbox(ctx, sale.ID, testGroup, "c3", time.Since(delivered).Truncate(time.Millisecond), 10); err != nil ||
		fmt.Sprint(reservationIDs(es)) != fmt.Sprint(requestIDs(reqs[2:3])) {
		t.Fatalf("ClaimStaleOutbox by c3 = %v, %v; want only %v", reservationIDs(es), err, requestIDs(reqs[2:3]))
	}
	pending := func(consumer string) []string {
		t.Helper()
		es, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, consumer, 10)
		if err != nil {
			t.Fatalf("ReadPendingOutbox(%s): %v", consumer, err)
		}
		return reservationIDs(es)
	}
	if got := pending("dead"); len(got) != 0 {
		t.Errorf("still pending for the dead relay: %v", got)
	}
	if got, want := pending("c2"), requestIDs(reqs[:2]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pending for c2 = %v; want %v", got, want)
	}
	// The undelivered fourth entry is never claimed: it is not pending.
	time.Sleep(150 * time.Millisecond)
	es, err = s.Outbox().ClaimStaleOutbox(ctx, sale.ID, testGroup, "c2", 100*time.Millisecond, 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("ClaimStaleOutbox of everything stale = %v, %v; want the 3 delivered entries", reservationIDs(es), err)
	}
	wantCounts(t, s, sale.ID, 4, 3)
	ackWant(t, s, sale.ID, streamIDs(es), 1, 0)
}

// testOutboxMalformed checks that an entry that cannot be decoded is
// returned with an error, not dropped, so the relay can move it on.
func testOutboxMalformed(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	key := s.keys(sale.ID)[keyOutbox]
	good := map[string]string{
		OutboxReservationID: seckill.NewReservationID(sale.ID, time.Now()),
		OutboxUserID:        "u1",
		OutboxQty:           "1",
		OutboxReservedAtMs:  strconv.FormatInt(time.Now().UnixMilli(), 10),
	}
	tests := []struct {
		field, value string // value "" removes the field
	}{
		{OutboxReservationID, ""},
		{OutboxReservationID, seckill.NewReservationID("othersale", time.Now())},
		{OutboxUserID, ""},
		{OutboxQty, "x"},
		{OutboxQty, "0"},
		{OutboxReservedAtMs, "yesterday"},
	}
	for _, tt := range tests {
		cmd := s.client.B().Xadd().Key(key).Id("*").FieldValue()
		for f, v := range good {
			if f == tt.field {
				v = tt.value
			}
			if v != "" {
				cmd = cmd.FieldValue(f, v)
			}
		}
		if err := s.client.Do(ctx, cmd.Build()).Error(); err != nil {
			t.Fatalf("XADD: %v", err)
		}
	}
	reserveN(t, s, sale.ID, 1) // a good one after the bad ones
	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 100, 0)
	if err != nil || len(es) != len(tests)+1 {
		t.Fatalf("ReadOutbox = %d entries, %v; want %d", len(es), err, len(tests)+1)
	}
	for i, tt := range tests {
		e := es[i]
		if !errors.Is(e.Err, ErrMalformedOutboxEntry) || e.Event.SaleID != sale.ID || e.Fields[tt.field] != tt.value {
			t.Errorf("entry with %s=%q: %+v; want ErrMalformedOutboxEntry, the sale id and the raw fields", tt.field, tt.value, e)
		}
	}
	if last := es[len(tests)]; last.Err != nil {
		t.Errorf("good entry after bad ones: %v", last.Err)
	}

	// An entry deleted from the stream while pending comes back from a
	// re-read as gone (on servers that report it), never as a good entry.
	if err := s.client.Do(ctx, s.client.B().Xdel().Key(key).Id(es[0].StreamID).Build()).Error(); err != nil {
		t.Fatalf("XDEL: %v", err)
	}
	again, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c1", 100)
	if err != nil {
		t.Fatalf("ReadPendingOutbox: %v", err)
	}
	found := false
	for _, e := range again {
		if e.StreamID == es[0].StreamID {
			found = true
			if e.Fields != nil || !errors.Is(e.Err, ErrMalformedOutboxEntry) {
				t.Errorf("deleted pending entry = %+v; want nil fields and ErrMalformedOutboxEntry", e)
			}
		}
	}
	if !found && s.embedded == nil { // miniredis skips such entries; Redis reports them
		t.Errorf("ReadPendingOutbox = %v; want the deleted pending entry %s among them", streamIDs(again), es[0].StreamID)
	}
}

// testOutboxMalformedBatches: a batch whose count or time cannot be read
// is one reservation with an error and the entry's fields; a line that
// cannot be decoded is one with an error and the line's values, its good
// neighbours decoded as usual. Nothing is dropped.
func testOutboxMalformedBatches(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	key := s.keys(sale.ID)[keyOutbox]
	short := func() string { return seckill.NewReservationID(sale.ID, time.Now())[len(sale.ID)+1:] }
	good1, good2 := short(), short()
	at := strconv.FormatInt(time.Now().UnixMilli(), 10)
	add := func(n, at, b string) {
		t.Helper()
		if err := s.client.Do(ctx, s.client.B().Xadd().Key(key).Id("*").FieldValue().
			FieldValue(OutboxCount, n).FieldValue(OutboxAtMs, at).FieldValue(OutboxBatch, b).Build()).Error(); err != nil {
			t.Fatalf("XADD: %v", err)
		}
	}
	add("2", at, "1 "+short()+" u1") // count off
	add("1", "yesterday", "1 "+short()+" u1")
	add("4", at, "1 "+good1+" u1\nx "+short()+" u2\n1 NOTANID u3\n1 "+good2+" u 4")
	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0)
	if err != nil || len(es) != 6 {
		t.Fatalf("ReadOutbox = %d reservations, %v; want 6", len(es), err)
	}
	for i, want := range []struct {
		bad    bool
		seq    int
		field  string // a field of Fields, and its value
		value  string
		reserv string // the reservation id decoded
	}{
		{true, 0, OutboxCount, "2", ""},
		{true, 0, OutboxAtMs, "yesterday", ""},
		{false, 0, "", "", sale.ID + "." + good1},
		{true, 1, OutboxQty, "x", ""},
		{true, 2, OutboxReservationID, sale.ID + ".NOTANID", ""},
		{false, 3, "", "", sale.ID + "." + good2},
	} {
		e := es[i]
		if want.bad {
			if !errors.Is(e.Err, ErrMalformedOutboxEntry) || e.Seq != want.seq || e.Event.SaleID != sale.ID || e.Fields[want.field] != want.value {
				t.Errorf("reservation %d = %+v; want ErrMalformedOutboxEntry, seq %d, %s=%q among its fields", i, e, want.seq, want.field, want.value)
			}
		} else if e.Err != nil || e.Seq != want.seq || e.Fields != nil || e.Event.ReservationID != want.reserv {
			t.Errorf("reservation %d = %+v; want %s, seq %d, no fields", i, e, want.reserv, want.seq)
		}
	}
	if u := es[5].Event.UserID; u != "u 4" {
		t.Errorf("user of the last line = %q; want %q (the rest of the line)", u, "u 4")
	}
}

func testOutboxInvalidArgs(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := servicetest.UniqueName("sale_")
	calls := map[string]func() error{
		"bad sale": func() error { _, err := s.Outbox().ReadOutbox(ctx, "a{b}", testGroup, "c", 1, 0); return err },
		"no group": func() error { _, err := s.Outbox().ReadOutbox(ctx, sale, "", "c", 1, 0); return err },
		"no consumer": func() error {
			_, err := s.Outbox().ReadPendingOutbox(ctx, sale, testGroup, "", 1)
			return err
		},
		"zero count": func() error {
			_, err := s.Outbox().ClaimStaleOutbox(ctx, sale, testGroup, "c", time.Second, 0)
			return err
		},
		"ack bad sale":     func() error { return s.Outbox().AckOutbox(ctx, "a b", testGroup, []string{"1-0"}) },
		"pending no group": func() error { _, err := s.Outbox().OutboxPending(ctx, sale, ""); return err },
	}
	for name, call := range calls {
		if err := call(); seckill.ErrorCode(err) != seckill.EINVALID {
			t.Errorf("%s: err = %v; want code %s", name, err, seckill.EINVALID)
		}
	}
}

// testOutboxBatches: an entry holds the reservations of one Reserve call.
// Reads count entries and return every reservation of each, in order,
// under its stream id; OutboxLen counts reservations, OutboxPending
// entries; an ack of the stream id settles them all, also out of order.
func testOutboxBatches(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(20, 1))
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0); err != nil || len(es) != 0 {
		t.Fatalf("ReadOutbox of an empty outbox = %v, %v; want none", es, err)
	}
	first := reserveBatch(t, s, sale.ID, 3)
	second := reserveBatch(t, s, sale.ID, 4)
	third := reserveBatch(t, s, sale.ID, 2)
	wantCounts(t, s, sale.ID, 9, 0)

	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 1, 0)
	if err != nil || fmt.Sprint(reservationIDs(es)) != fmt.Sprint(requestIDs(first)) {
		t.Fatalf("ReadOutbox(count 1) = %v, %v; want the first batch %v", reservationIDs(es), err, requestIDs(first))
	}
	for i, e := range es {
		if e.Err != nil || e.Seq != i || e.StreamID != es[0].StreamID || e.Event.UserID != first[i].UserID || e.Event.Qty != 1 {
			t.Errorf("reservation %d of the batch = %+v; want seq %d, stream id %s, user %s, qty 1", i, e, i, es[0].StreamID, first[i].UserID)
		}
	}
	later, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c2", 10, 0)
	if want := append(requestIDs(second), requestIDs(third)...); err != nil || fmt.Sprint(reservationIDs(later)) != fmt.Sprint(want) {
		t.Fatalf("ReadOutbox by c2 = %v, %v; want %v", reservationIDs(later), err, want)
	}
	wantCounts(t, s, sale.ID, 9, 3)
	pending, err := s.Outbox().ReadPendingOutbox(ctx, sale.ID, testGroup, "c2", 1)
	if err != nil || fmt.Sprint(reservationIDs(pending)) != fmt.Sprint(requestIDs(second)) {
		t.Fatalf("ReadPendingOutbox(count 1) = %v, %v; want the second batch %v", reservationIDs(pending), err, requestIDs(second))
	}
	// The third batch goes while the first is still pending, then the
	// first, then the second: each ack takes its batch's reservations.
	ackWant(t, s, sale.ID, []string{later[len(later)-1].StreamID}, 7, 2)
	ackWant(t, s, sale.ID, []string{es[0].StreamID}, 4, 1)
	ackWant(t, s, sale.ID, []string{later[0].StreamID}, 0, 0)
	ackWant(t, s, sale.ID, []string{later[0].StreamID}, 0, 0) // again: nothing changes

	// A claim takes whole entries too.
	fourth := reserveBatch(t, s, sale.ID, 2)
	if es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "dead", 10, 0); err != nil || len(es) != 2 {
		t.Fatalf("ReadOutbox = %v, %v; want the fourth batch", reservationIDs(es), err)
	}
	var claimed []seckill.OutboxEntry
	servicetest.WaitFor(t, 10*time.Second, "the fourth batch idle for 1ms", func() bool {
		claimed, err = s.Outbox().ClaimStaleOutbox(ctx, sale.ID, testGroup, "c3", time.Millisecond, 1)
		return err != nil || len(claimed) > 0
	})
	if err != nil || fmt.Sprint(reservationIDs(claimed)) != fmt.Sprint(requestIDs(fourth)) {
		t.Fatalf("ClaimStaleOutbox(count 1) = %v, %v; want the fourth batch %v", reservationIDs(claimed), err, requestIDs(fourth))
	}
	ackWant(t, s, sale.ID, []string{claimed[0].StreamID}, 0, 0)
}

// testOutboxEntriesOfOne: entries written before entries held batches (one
// reservation each, in four fields) are read, counted and acked beside
// batches, in a sale loaded before the outbox was counted.
func testOutboxEntriesOfOne(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(20, 1))
	keys := s.keys(sale.ID)
	old := func() string {
		t.Helper()
		id := seckill.NewReservationID(sale.ID, time.Now())
		add := s.client.B().Xadd().Key(keys[keyOutbox]).Id("*").FieldValue().FieldValue(OutboxReservationID, id).
			FieldValue(OutboxUserID, servicetest.UniqueName("u")).FieldValue(OutboxQty, "1").
			FieldValue(OutboxReservedAtMs, strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()
		if err := s.client.Do(ctx, add).Error(); err != nil {
			t.Fatal(err)
		}
		return id
	}
	olds := []string{old(), old(), old()}
	wantCounts(t, s, sale.ID, 3, 0)
	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 1, 0)
	if err != nil || fmt.Sprint(reservationIDs(es)) != fmt.Sprint(olds[:1]) {
		t.Fatalf("ReadOutbox(count 1) = %v, %v; want %v", reservationIDs(es), err, olds[:1])
	}
	ackWant(t, s, sale.ID, streamIDs(es), 2, 0) // acked before the count exists
	batch := reserveBatch(t, s, sale.ID, 3)
	wantCounts(t, s, sale.ID, 5, 0)
	rest, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0)
	if want := append(olds[1:], requestIDs(batch)...); err != nil || fmt.Sprint(reservationIDs(rest)) != fmt.Sprint(want) {
		t.Fatalf("ReadOutbox = %v, %v; want %v", reservationIDs(rest), err, want)
	}
	ackWant(t, s, sale.ID, streamIDs(rest[:1]), 4, 2)
	ackWant(t, s, sale.ID, streamIDs(rest[1:]), 0, 0)
	c, err := s.Ledger().Counters(ctx, sale.ID)
	if err != nil || c.Outbox != 0 {
		t.Fatalf("Counters = %+v, %v; want an empty outbox", c, err)
	}
}

// testOutboxKeysTravel: a reservation made under an idempotency key reaches
// the relay with the key's digest, one without a key with none, in a batch
// that mixes both; a replay appends nothing.
func testOutboxKeysTravel(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	reqs := []seckill.ReserveRequest{
		request(sale.ID, servicetest.UniqueName("u"), 1, ""),
		request(sale.ID, servicetest.UniqueName("u"), 1, "key-of-b"),
		request(sale.ID, servicetest.UniqueName("u"), 1, ""),
	}
	for pass := range 2 { // the second pass replays the keyed one
		res, err := s.StockStore().Reserve(ctx, sale.ID, reqs[pass:2])
		if err != nil || res[len(res)-1].Outcome != []seckill.Outcome{seckill.OutcomeReserved, seckill.OutcomeReplayed}[pass] {
			t.Fatalf("Reserve pass %d = %+v, %v", pass, res, err)
		}
	}
	if _, err := s.StockStore().Reserve(ctx, sale.ID, reqs[2:]); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	es, err := s.Outbox().ReadOutbox(ctx, sale.ID, testGroup, "c1", 10, 0)
	if err != nil || len(es) != 3 {
		t.Fatalf("ReadOutbox = %+v, %v; want 3 reservations", es, err)
	}
	want := []string{"", seckill.IdempotencyDigest("key-of-b"), ""}
	for i, e := range es {
		if e.Err != nil || e.Event.ReservationID != reqs[i].ReservationID || e.Event.KeyDigest != want[i] {
			t.Errorf("entry %d = %+v; want %s with key digest %q", i, e, reqs[i].ReservationID, want[i])
		}
	}
}
