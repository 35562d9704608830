package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestStockRestorer runs the restore and ledger suite on every backend,
// and the checks of what restoring does to this store's keys.
func TestStockRestorer(t *testing.T) {
	onBackends(t, func(t *testing.T, newStore func(*testing.T) *Store) {
		t.Run("Conformance", func(t *testing.T) {
			conformance.StockRestorer(t, func(t *testing.T) conformance.RestoringStockStore { return restoring(newStore(t)) })
		})
		runParallel(t, newStore, []storeTest{
			{"RestoredRecord", testRestoredRecord},
			{"Inconsistent", testRestoreInconsistent},
			{"ReservationsSorted", testReservationsSorted},
			{"ReservationsMalformed", testReservationsMalformed},
			{"RecordsWrittenBefore", testRecordsWrittenBefore},
			{"RestockedChannelPerPrefix", func(t *testing.T, s *Store) { testRestockedChannelPerPrefix(t, s, newStore(t)) }},
		})
	})
}

func hgetall(t *testing.T, s *Store, key string) map[string]string {
	t.Helper()
	m, err := s.client.Do(context.Background(), s.client.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	return m
}

// plantRecord replaces a reservation's record by rec: under its compact
// field when rec has the compact form (it starts with a digit or "-"),
// else under its whole id, as a record written before that form.
func plantRecord(t *testing.T, s *Store, key, id, rec string) {
	t.Helper()
	if err := s.client.Do(context.Background(), s.client.B().Hdel().Key(key).Field(recordFields(id)...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	field := id
	if rec != "" && (rec[0] == '-' || rec[0] >= '0' && rec[0] <= '9') {
		field = recordField(id)
	}
	hset(t, s, key, field, rec)
}

// testRecordsWrittenBefore: records of the form before the compact one
// (under the whole id, "<status>:<qty>:<ms>:<user>") are still listed,
// read, restored and released as they were, next to compact ones.
func testRecordsWrittenBefore(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 5))
	const user = "old:user"
	reqs := []seckill.ReserveRequest{request(sale.ID, user, 2, ""), request(sale.ID, user, 1, ""), request(sale.ID, "new", 1, "")}
	if res, err := s.StockStore().Reserve(ctx, sale.ID, reqs); err != nil || res[2].Outcome != seckill.OutcomeReserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	key := s.keys(sale.ID)[keyRes]
	plantRecord(t, s, key, reqs[0].ReservationID, "active:2:1700000000000:"+user)
	plantRecord(t, s, key, reqs[1].ReservationID, "active:1:1700000000001:"+user)

	got, err := s.Ledger().Reservations(ctx, sale.ID)
	if err != nil || len(got) != 3 {
		t.Fatalf("Reservations = %+v, %v; want 3", got, err)
	}
	byID := map[string]seckill.ReservationRecord{}
	for _, r := range got {
		byID[r.ReservationID] = r
	}
	if r := byID[reqs[0].ReservationID]; r.UserID != user || r.Qty != 2 || r.Restored || !r.ReservedAt.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("old record listed as %+v; want %s, qty 2, active, at 1700000000000", r, user)
	}
	if r := byID[reqs[2].ReservationID]; r.UserID != "new" || r.Qty != 1 || time.Since(r.ReservedAt) > time.Minute {
		t.Errorf("compact record listed as %+v; want new, qty 1, reserved just now", r)
	}
	of, err := s.Ledger().ReservationsOf(ctx, sale.ID, requestIDs(reqs))
	if err != nil || len(of) != 3 || of[reqs[0].ReservationID] != byID[reqs[0].ReservationID] || of[reqs[2].ReservationID] != byID[reqs[2].ReservationID] {
		t.Errorf("ReservationsOf = %+v, %v; want what Reservations lists", of, err)
	}
	if u, qty, status, err := s.StockStore().Reservation(ctx, reqs[0].ReservationID); err != nil || u != user || qty != 2 || status != StatusActive {
		t.Errorf("Reservation of an old record = %q, %d, %q, %v", u, qty, status, err)
	}

	// Restored by the script, an old record keeps its form and field.
	if restored, err := s.Restorer().RestoreReservation(ctx, reqs[0].ReservationID); err != nil || !restored {
		t.Fatalf("RestoreReservation(old) = %v, %v", restored, err)
	}
	if rec := hgetall(t, s, key)[reqs[0].ReservationID]; rec != "restored:2:1700000000000:"+user {
		t.Errorf("old record after restore = %q", rec)
	}
	// Released by a heal, too; and a heal adds nothing for an old record.
	token := "t1"
	if _, err := s.Healer().BeginHeal(ctx, sale, token); err != nil {
		t.Fatal(err)
	}
	added, released, err := s.Healer().ApplyHeal(ctx, sale, token,
		[]seckill.ReservationRecord{{ReservationID: reqs[1].ReservationID, UserID: user, Qty: 1, ReservedAt: time.UnixMilli(1700000000001)}},
		[]seckill.ReservationRecord{{ReservationID: reqs[1].ReservationID, UserID: user, Qty: 1}})
	if err != nil || added != 0 || released != 1 {
		t.Fatalf("ApplyHeal = %d added, %d released, %v; want 0, 1", added, released, err)
	}
	if rec := hgetall(t, s, key); rec[reqs[1].ReservationID] != "restored:1:1700000000001:"+user || rec[recordField(reqs[1].ReservationID)] != "" {
		t.Errorf("old record after a heal released it = %q (compact field %q)", rec[reqs[1].ReservationID], rec[recordField(reqs[1].ReservationID)])
	}
	if lvl, err := s.StockStore().Stock(ctx, sale.ID); err != nil || lvl.Reserved != 1 {
		t.Errorf("stock after restoring and releasing the old records = %+v, %v; want 1 reserved", lvl, err)
	}
}

func hset(t *testing.T, s *Store, key, field, value string) {
	t.Helper()
	if err := s.client.Do(context.Background(), s.client.B().Hset().Key(key).FieldValue().FieldValue(field, value).Build()).Error(); err != nil {
		t.Fatalf("HSET %s %s: %v", key, field, err)
	}
}

// testRestoredRecord checks the keys a restore writes: the record keeps
// its qty, time and user under the restored status; the buyer's field
// goes down, and is deleted at 0.
func testRestoredRecord(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 5))
	const user = "user:with:colons"
	a, b := request(sale.ID, user, 2, "k"), request(sale.ID, user, 1, "")
	if res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{a, b}); err != nil || res[1].Outcome != seckill.OutcomeReserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	keys := s.keys(sale.ID)
	field := recordField(a.ReservationID)
	recBefore := hgetall(t, s, keys[keyRes])[field]
	if recBefore != "2:"+user {
		t.Errorf("record of a reservation = %q under %q; want %q (its id carries its time)", recBefore, field, "2:"+user)
	}
	idemBefore := hgetall(t, s, keys[keyIdem])

	if restored, err := s.Restorer().RestoreReservation(ctx, a.ReservationID); err != nil || !restored {
		t.Fatalf("RestoreReservation = %v, %v; want true, nil", restored, err)
	}
	rec := hgetall(t, s, keys[keyRes])
	if want := "-" + recBefore; rec[field] != want {
		t.Errorf("record after restore = %q; want %q (was %q)", rec[field], want, recBefore)
	}
	if gotUser, qty, status, err := s.StockStore().Reservation(ctx, a.ReservationID); err != nil || gotUser != user || qty != 2 || status != StatusRestored {
		t.Errorf("Reservation = %q, %d, %q, %v; want %q, 2, %q", gotUser, qty, status, err, user, StatusRestored)
	}
	if got := hgetall(t, s, keys[keyBuyers]); fmt.Sprint(got) != fmt.Sprint(map[string]string{user: "1"}) {
		t.Errorf("buyers after restoring 2 of 3 units = %v; want %s: 1", got, user)
	}
	if got := hgetall(t, s, keys[keyIdem]); fmt.Sprint(got) != fmt.Sprint(idemBefore) {
		t.Errorf("idempotency entries after restore = %v; want unchanged %v", got, idemBefore)
	}

	if restored, err := s.Restorer().RestoreReservation(ctx, b.ReservationID); err != nil || !restored {
		t.Fatalf("RestoreReservation = %v, %v; want true, nil", restored, err)
	}
	if got := hgetall(t, s, keys[keyBuyers]); len(got) != 0 {
		t.Errorf("buyers after restoring every unit = %v; want the field deleted", got)
	}
	if n, err := s.Outbox().OutboxLen(ctx, sale.ID); err != nil || n != 2 {
		t.Errorf("OutboxLen = %d, %v; want 2: a restore appends nothing", n, err)
	}
}

// testRestoreInconsistent checks that a restore whose keys disagree with
// the record is refused with ErrInconsistentReservation and changes
// nothing.
func testRestoreInconsistent(t *testing.T, s *Store) {
	ctx := context.Background()
	tests := []struct {
		name    string
		corrupt func(t *testing.T, keys []string, r seckill.ReserveRequest)
	}{
		{"reserved below qty", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			hset(t, s, keys[keyStock], "reserved", "1")
		}},
		{"stock hash gone", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			if err := s.client.Do(ctx, s.client.B().Del().Key(keys[keyStock]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}},
		{"buyer below qty", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			hset(t, s, keys[keyBuyers], r.UserID, "1")
		}},
		{"buyer gone", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			if err := s.client.Do(ctx, s.client.B().Hdel().Key(keys[keyBuyers]).Field(r.UserID).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}},
		{"unknown status", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "paused:2:1700000000000:"+r.UserID)
		}},
		{"qty not a number", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "active:two:1700000000000:"+r.UserID)
		}},
		{"qty 0", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "active:0:1700000000000:"+r.UserID)
		}},
		{"no user", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "active:2:1700000000000:")
		}},
		{"too few fields", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "active:2")
		}},
		{"compact qty 0", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "0:"+r.UserID)
		}},
		{"compact no user", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "2:")
		}},
		{"compact time empty", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "2@:"+r.UserID)
		}},
		{"compact time not a number", func(t *testing.T, keys []string, r seckill.ReserveRequest) {
			plantRecord(t, s, keys[keyRes], r.ReservationID, "2@x:"+r.UserID)
		}},
	}
	for _, tt := range tests {
		sale := mustPreheat(t, s, liveSale(10, 5))
		r := request(sale.ID, "u1", 2, "")
		if res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{r}); err != nil || res[0].Outcome != seckill.OutcomeReserved {
			t.Fatalf("Reserve = %+v, %v", res, err)
		}
		keys := s.keys(sale.ID)
		tt.corrupt(t, keys, r)
		var before []map[string]string
		for _, k := range keys[:keyOutbox] {
			before = append(before, hgetall(t, s, k))
		}
		restored, err := s.Restorer().RestoreReservation(ctx, r.ReservationID)
		if !errors.Is(err, ErrInconsistentReservation) || restored {
			t.Errorf("%s: RestoreReservation = %v, %v; want false, ErrInconsistentReservation", tt.name, restored, err)
		}
		for i, k := range keys[:keyOutbox] {
			if got := hgetall(t, s, k); fmt.Sprint(got) != fmt.Sprint(before[i]) {
				t.Errorf("%s: %s after a refused restore = %v; want unchanged %v", tt.name, k, got, before[i])
			}
		}
	}
}

func testReservationsSorted(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(100, 1))
	reqs := reserveN(t, s, sale.ID, 50)
	got, err := s.Ledger().Reservations(ctx, sale.ID)
	if err != nil {
		t.Fatalf("Reservations: %v", err)
	}
	ids := make([]string, len(got))
	for i, r := range got {
		ids[i] = r.ReservationID
	}
	want := requestIDs(reqs)
	slices.Sort(want)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("Reservations ids = %v; want sorted %v", ids, want)
	}
}

func testReservationsMalformed(t *testing.T, s *Store) {
	ctx := context.Background()
	if got, err := s.Ledger().Reservations(ctx, servicetest.UniqueName("sale_")); err != nil || len(got) != 0 {
		t.Errorf("Reservations of a sale never loaded = %+v, %v; want none", got, err)
	}
	if _, err := s.Ledger().Reservations(ctx, "a{b}"); seckill.ErrorCode(err) != seckill.EINVALID {
		t.Errorf("Reservations(a{b}): err = %v; want code %s", err, seckill.EINVALID)
	}
	for _, rec := range []string{"paused:1:1700000000000:u", "active:x:1700000000000:u", "active:1:-5:u", "active:1:1700000000000:", "active",
		"0:u", "1:", "1@:u", "1@-5:u", "-x:u", "--1:u"} {
		sale := mustPreheat(t, s, liveSale(10, 5))
		reserveN(t, s, sale.ID, 3)
		id := seckill.NewReservationID(sale.ID, time.Now())
		plantRecord(t, s, s.keys(sale.ID)[keyRes], id, rec)
		if got, err := s.Ledger().Reservations(ctx, sale.ID); err == nil || !strings.Contains(err.Error(), id) {
			t.Errorf("Reservations with record %q = %d records, %v; want an error naming %s", rec, len(got), err, id)
		}
	}
}

// subscribeRestocked subscribes s to restock announcements until ctx ends.
// The ids heard arrive on heard (beyond 100 unread, they are dropped); the
// subscription's end is sent on done.
func subscribeRestocked(ctx context.Context, s *Store) (heard chan string, done chan error) {
	heard, done = make(chan string, 100), make(chan error, 1)
	go func() {
		done <- s.Restorer().SubscribeRestocked(ctx, func(id string) {
			select {
			case heard <- id:
			default:
			}
		})
	}()
	return heard, done
}

// testRestockedChannelPerPrefix checks that stores under different key
// prefixes (two deployments on one Redis) do not hear each other.
func testRestockedChannelPerPrefix(t *testing.T, s, other *Store) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard, done := subscribeRestocked(ctx, other)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("SubscribeRestocked = %v; want nil", err)
		}
	}()
	mine := servicetest.UniqueName("sale_")
	deadline := time.After(5 * time.Second)
	for {
		if err := s.Restorer().PublishRestocked(ctx, mine); err != nil {
			t.Fatalf("PublishRestocked: %v", err)
		}
		if err := other.Restorer().PublishRestocked(ctx, "theirs"); err != nil {
			t.Fatalf("PublishRestocked: %v", err)
		}
		select {
		case id := <-heard:
			if id != "theirs" {
				t.Fatalf("a subscriber heard %q, announced under another prefix", id)
			}
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the subscriber heard nothing within 5s")
		}
	}
}

// TestSubscribeRestockedReconnects cuts the subscription's connection and
// checks that announcements are heard again once Redis is back.
func TestSubscribeRestockedReconnects(t *testing.T) {
	proxy, viaProxy := servicetest.ProxyURL(t, servicetest.Redis.URL(t))
	s := connect(t, viaProxy)
	saleID := servicetest.UniqueName("sale_")

	ctx, cancel := context.WithCancel(context.Background())
	heard, done := subscribeRestocked(ctx, s)
	announceUntilHeard := func(what string) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			// Fails while the connection comes back: keep announcing.
			_ = s.Restorer().PublishRestocked(context.Background(), saleID)
			select {
			case id := <-heard:
				if id == saleID {
					return
				}
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%s: the restock of %s was not heard within 15s", what, saleID)
			}
		}
	}
	announceUntilHeard("before the cut")
	for i := range 3 { // the back-off grows while Redis is away
		proxy.Cut()
		time.Sleep(time.Duration(i+1) * 300 * time.Millisecond)
		proxy.Restore()
	}
	for len(heard) > 0 {
		<-heard
	}
	announceUntilHeard("after the cut")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("SubscribeRestocked = %v; want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SubscribeRestocked still running 10s after cancel")
	}
}
