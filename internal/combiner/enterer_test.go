package combiner

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seckill-dev/seckill"
)

// memEntries is a stock store's side of a lottery in memory: one entry a
// buyer, a second answering the first.
type memEntries struct {
	mu      sync.Mutex
	calls   int
	entries map[string]seckill.LotteryEntry
}

func (m *memEntries) EnterBatch(_ context.Context, _ *seckill.Sale, reqs []seckill.EntryRequest) ([]seckill.EntryResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	out := make([]seckill.EntryResult, len(reqs))
	for i, r := range reqs {
		if e, ok := m.entries[r.UserID]; ok {
			out[i] = seckill.EntryResult{Entry: e}
			continue
		}
		e := seckill.LotteryEntry{ID: r.EntryID, UserID: r.UserID, Qty: r.Qty}
		m.entries[r.UserID] = e
		out[i] = seckill.EntryResult{Entry: e, New: true}
	}
	return out, nil
}

func (m *memEntries) callCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// gatedKeeper keeps entries in memory; its first call waits for release.
// It keeps the entry it had of a buyer (had), as the database does.
type gatedKeeper struct {
	release chan struct{}
	fail    error
	mu      sync.Mutex
	batches [][]seckill.LotteryEntry
	had     map[string]seckill.LotteryEntry
}

func (k *gatedKeeper) Keep(_ context.Context, _ string, entries []seckill.LotteryEntry) ([]seckill.LotteryEntry, error) {
	k.mu.Lock()
	first := len(k.batches) == 0
	k.batches = append(k.batches, entries)
	k.mu.Unlock()
	if first {
		<-k.release
	}
	if k.fail != nil {
		return nil, k.fail
	}
	out := make([]seckill.LotteryEntry, len(entries))
	for i, e := range entries {
		out[i] = e
		if h, ok := k.had[e.UserID]; ok {
			out[i] = h
		}
	}
	return out, nil
}

func (k *gatedKeeper) batchSizes() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int
	for _, b := range k.batches {
		out = append(out, len(b))
	}
	return out
}

func enterAs(e *Enterer, s *seckill.Sale, user string) (seckill.EntryResult, error) {
	return e.Enter(context.Background(), s, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: user, Qty: 1})
}

// TestEntererPipelinesTheStockStoreAndTheKeeper: while the database
// writes one entry, entries keep going through the stock store's script
// (the stages overlap), and those waiting for the database go together in
// its next write; nobody is answered before the keeper kept their entry,
// and a buyer the database knew with another entry is answered that one,
// not new.
func TestEntererPipelinesTheStockStoreAndTheKeeper(t *testing.T) {
	sale := &seckill.Sale{ID: "lot"}
	store := &memEntries{entries: map[string]seckill.LotteryEntry{}}
	before := seckill.LotteryEntry{ID: seckill.NewEntryID(), UserID: "u7", Qty: 2}
	keeper := &gatedKeeper{release: make(chan struct{}), had: map[string]seckill.LotteryEntry{"u7": before}}
	e := NewEnterer(store, keeper, Config{})
	defer e.Stop(context.Background())

	var answered atomic.Int64
	first := make(chan seckill.EntryResult, 1)
	go func() {
		r, err := enterAs(e, sale, "u0")
		if err != nil {
			t.Error(err)
		}
		answered.Add(1)
		first <- r
	}()
	for len(keeper.batchSizes()) == 0 {
		runtime.Gosched()
	}
	var wg sync.WaitGroup
	results := make([]seckill.EntryResult, 10)
	for i := 1; i < 10; i++ {
		wg.Go(func() {
			r, err := enterAs(e, sale, "u"+string(rune('0'+i)))
			if err != nil {
				t.Error(err)
			}
			answered.Add(1)
			results[i] = r
		})
	}
	// Every one of them passes the stock store while the keeper holds,
	// and waits for the keeper's next write.
	for {
		e.keep.mu.Lock()
		n := len(e.keep.lanes["lot"].pending)
		e.keep.mu.Unlock()
		if n == 9 {
			break
		}
		runtime.Gosched()
	}
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d entries answered before the database kept them", n)
	}
	close(keeper.release)
	results[0] = <-first
	wg.Wait()
	if sizes := keeper.batchSizes(); !slices.Equal(sizes, []int{1, 9}) {
		t.Fatalf("keeper batches %v (over %d script calls); want the first alone, then the 9 waiting together", sizes, store.callCount())
	}
	for i, r := range results {
		if i == 7 {
			if r.New || r.Entry != before {
				t.Errorf("u7 = %+v; want the database's entry %+v, not new", r, before)
			}
			continue
		}
		if !r.New {
			t.Errorf("u%d = %+v; want new", i, r)
		}
	}
}

// TestEntererAnswersTryLaterWhenNotKept: an entry the keeper fails is
// answered its error, which the API turns into try later.
func TestEntererAnswersTryLaterWhenNotKept(t *testing.T) {
	down := &seckill.Error{Code: seckill.ETRYLATER, Message: "not kept"}
	keeper := &gatedKeeper{release: make(chan struct{}), fail: down}
	close(keeper.release)
	e := NewEnterer(&memEntries{entries: map[string]seckill.LotteryEntry{}}, keeper, Config{})
	defer e.Stop(context.Background())
	if r, err := enterAs(e, &seckill.Sale{ID: "lot"}, "ann"); !errors.Is(err, down) {
		t.Fatalf("entry not kept = %+v, %v; want its error", r, err)
	}
}
