package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// drawnLottery is a drawn lottery's store that counts its reads of the
// whole entry list and holds the first until released.
type drawnLottery struct {
	archivedLottery
	entries []seckill.LotteryEntry
	reads   atomic.Int64
	release chan struct{}
}

func (d *drawnLottery) Entries(context.Context, string) ([]seckill.LotteryEntry, error) {
	if d.reads.Add(1) == 1 {
		<-d.release
	}
	return append([]seckill.LotteryEntry(nil), d.entries...), nil
}

// waitForRead waits until some request has started reading what, as
// counted by reads (which the fake then holds).
func waitForRead(t *testing.T, reads *atomic.Int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); reads.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no request read %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDrawEntriesReadOnce: GET /draw/entries of a drawn lottery reads the
// entry list from the stock store once per node, however many ask and
// whenever: the requests that come while it is read wait for that read,
// and later ones are answered from memory, byte for byte the same. The
// route is public and the read is an HGETALL of every entry.
func TestDrawEntriesReadOnce(t *testing.T) {
	d := &drawnLottery{release: make(chan struct{})}
	for i := range 500 {
		d.entries = append(d.entries, seckill.LotteryEntry{ID: fmt.Sprintf("e%05d", 499-i), UserID: fmt.Sprintf("u%d", i), Qty: 1})
	}
	e, _, _ := admissionEnv(t, func(cfg *Config) { cfg.Lottery.Store, cfg.Lottery.Draws = d, d })
	get := func() *httptest.ResponseRecorder {
		return e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/draw/entries"})
	}
	const together = 20
	answers := make([]*httptest.ResponseRecorder, together)
	var wg sync.WaitGroup
	for i := range together {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = get() }()
	}
	// Every request is in (the first holds the read) before it ends.
	waitForRead(t, &d.reads, "the entries")
	close(d.release)
	wg.Wait()
	for range 30 {
		answers = append(answers, get())
	}
	first := answers[0].Body.String()
	for i, w := range answers {
		if w.Code != http.StatusOK || w.Body.String() != first {
			t.Fatalf("answer %d: %d, %d bytes; want 200 and the first answer's %d bytes", i, w.Code, w.Body.Len(), len(first))
		}
	}
	if n := d.reads.Load(); n != 1 {
		t.Fatalf("%d requests read the entry list %d times; want once", len(answers), n)
	}
	if want := `{"entries":[{"entry_id":"e00000","qty":1},`; first[:len(want)] != want {
		t.Fatalf("the list starts %q; want it sorted by entry id, without buyers", first[:60])
	}
}

// TestBigEntryListReadAtMostEvery: a list too big to keep in memory is read
// again at most once every entryListRereadAfter; asked for in between, it
// is 503 with Retry-After, so a client in a loop cannot keep the stock
// store reading it. Before, each request after the last read ended read
// the whole list again.
func TestBigEntryListReadAtMostEvery(t *testing.T) {
	d := &drawnLottery{release: make(chan struct{})}
	close(d.release)
	for i := range 50 {
		d.entries = append(d.entries, seckill.LotteryEntry{ID: fmt.Sprintf("e%05d", i), UserID: fmt.Sprintf("u%d", i), Qty: 1})
	}
	e, _, _ := admissionEnv(t, func(cfg *Config) { cfg.Lottery.Store, cfg.Lottery.Draws = d, d })
	e.srv.entryLists.maxBytes = 100 // the 50 entries are some 1,300 bytes
	get := func() *httptest.ResponseRecorder {
		return e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/draw/entries"})
	}
	if w := get(); w.Code != http.StatusOK {
		t.Fatalf("the first read = %d %s", w.Code, w.Body)
	}
	for range 10 {
		if w := get(); w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "10" {
			t.Fatalf("a read right after = %d (Retry-After %q); want 503 with Retry-After 10", w.Code, w.Header().Get("Retry-After"))
		}
	}
	if n := d.reads.Load(); n != 1 {
		t.Fatalf("the list was read %d times; want once", n)
	}
	e.clock.Advance(entryListRereadAfter)
	if w := get(); w.Code != http.StatusOK {
		t.Fatalf("a read %s later = %d %s", entryListRereadAfter, w.Code, w.Body)
	}
	if n := d.reads.Load(); n != 2 {
		t.Fatalf("the list was read %d times; want twice", n)
	}
}

// undrawn is a lottery not drawn yet whose draw record's reads are counted,
// the first held until released.
type undrawn struct {
	archivedLottery
	reads   atomic.Int64
	release chan struct{}
}

func (u *undrawn) EnsureDraw(_ context.Context, saleID string) (seckill.DrawRecord, error) {
	if u.reads.Add(1) == 1 {
		<-u.release
	}
	return seckill.DrawRecord{SaleID: saleID, Seed: "00"}, nil
}

// TestDrawRecordReadOnceWhenStale: the requests that find a draw record
// not yet drawn and stale share one database read. Before, each of them
// read it.
func TestDrawRecordReadOnceWhenStale(t *testing.T) {
	u := &undrawn{release: make(chan struct{})}
	e, _, _ := admissionEnv(t, func(cfg *Config) { cfg.Lottery.Draws = u })
	const together = 20
	codes := make([]int, together)
	var wg sync.WaitGroup
	for i := range together {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/draw"}).Code
		}()
	}
	waitForRead(t, &u.reads, "the draw record")
	close(u.release)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("request %d = %d; want 200", i, c)
		}
	}
	if n := u.reads.Load(); n != 1 {
		t.Fatalf("%d requests read the draw record %d times; want once", together, n)
	}
}
