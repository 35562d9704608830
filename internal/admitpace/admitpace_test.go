package admitpace

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeStore struct {
	mu    sync.Mutex
	moves []string // "sale rate"
	paces map[string]seckill.QueuePace
	reads int
}

func (f *fakeStore) AdvancePace(_ context.Context, s *seckill.Sale, rate int64) (seckill.QueuePace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves = append(f.moves, s.ID+" "+itoa(rate))
	p := seckill.QueuePace{Start: s.StartAt, Admitted: float64(10 * len(f.moves)), At: s.StartAt.Add(time.Minute), Rate: rate}
	f.paces[s.ID] = p
	return p, nil
}

func (f *fakeStore) Pace(_ context.Context, s *seckill.Sale) (seckill.QueuePace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if p, ok := f.paces[s.ID]; ok {
		return p, nil
	}
	return seckill.FixedQueuePace(s), nil
}

func (f *fakeStore) takeMoves() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.moves
	f.moves = nil
	return m
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fakeLatency answers each Take with the next of its windows.
type fakeLatency struct {
	windows []struct {
		mean time.Duration
		n    int64
	}
}

func (f *fakeLatency) Take() (time.Duration, int64) {
	w := f.windows[0]
	f.windows = f.windows[1:]
	return w.mean, w.n
}

type sales []*seckill.Sale

func (s sales) Loaded() []*seckill.Sale { return s }

// TestPacerAdaptsEachLiveAdaptiveSaleToTheLatency: each pass steps the
// rate of every started, unended adaptive queue sale by the latency of the
// claims since the last pass (up when fast, halved when slow) and moves its
// pace on at it; a pass without claims only reads the pace (the rate in
// force stays the other nodes'); fixed queues and sales not started are
// left alone.
func TestPacerAdaptsEachLiveAdaptiveSaleToTheLatency(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)
	adaptive := &seckill.Sale{ID: "ad", StartAt: t0.Add(-time.Minute), EndAt: t0.Add(time.Hour), Admission: seckill.Admission{
		Mode: seckill.AdmitQueue, AdmitPerSecond: 20, Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 2, MaxPerSecond: 102, TargetLatencyMS: 100}}}
	fixed := &seckill.Sale{ID: "fx", StartAt: t0.Add(-time.Minute), EndAt: t0.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 20}}
	early := &seckill.Sale{ID: "early", StartAt: t0.Add(time.Minute), EndAt: t0.Add(time.Hour), Admission: adaptive.Admission}
	store := &fakeStore{paces: map[string]seckill.QueuePace{}}
	lat := &fakeLatency{windows: []struct {
		mean time.Duration
		n    int64
	}{{20 * time.Millisecond, 50}, {20 * time.Millisecond, 50}, {300 * time.Millisecond, 80}, {0, 0}, {time.Second, 3}}}
	now := t0
	p := New(Config{Sales: sales{adaptive, fixed, early}, Store: store, Latency: lat, Interval: time.Second, Now: func() time.Time { return now }})

	for i, want := range []int64{30, 40, 20, 0, 10} {
		if err := p.Pass(context.Background()); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		got := store.takeMoves()
		if want == 0 { // no claims: the pace is read, not moved
			if len(got) != 0 {
				t.Fatalf("pass %d, without claims, moved %v", i, got)
			}
			continue
		}
		if len(got) != 1 || got[0] != "ad "+itoa(want) {
			t.Fatalf("pass %d moved %v; want only ad at %d", i, got, want)
		}
	}

	ctx := context.Background()
	if pace, err := p.Pace(ctx, fixed); err != nil || pace != seckill.FixedQueuePace(fixed) {
		t.Errorf("Pace of a fixed queue = %+v, %v", pace, err)
	}
	reads := store.reads
	pace, err := p.Pace(ctx, adaptive)
	if err != nil || pace.Rate != 10 || store.reads != reads {
		t.Errorf("Pace right after a pass = %+v, %v (%d store reads); want the moved pace at 10, from memory", pace, err, store.reads-reads)
	}
	now = now.Add(2 * time.Second) // another node may have moved it since
	if _, err := p.Pace(ctx, adaptive); err != nil || store.reads != reads+1 {
		t.Errorf("Pace an interval after the pass: %v, %d store reads; want 1", err, store.reads-reads)
	}
	if pace, err := p.Pace(ctx, early); err != nil || pace != seckill.FixedQueuePace(early) {
		t.Errorf("Pace of a sale not started = %+v, %v; want its starting pace", pace, err)
	}
}

func TestLatencyIsTheMeanOfEachWindow(t *testing.T) {
	var l Latency
	if mean, n := l.Take(); mean != 0 || n != 0 {
		t.Fatalf("empty window: %v, %d", mean, n)
	}
	l.Observe(10 * time.Millisecond)
	l.Observe(30 * time.Millisecond)
	if mean, n := l.Take(); mean != 20*time.Millisecond || n != 2 {
		t.Fatalf("Take = %v, %d; want 20ms, 2", mean, n)
	}
	if _, n := l.Take(); n != 0 {
		t.Fatalf("a window was counted twice")
	}
}

type slowReserver struct{ d time.Duration }

func (s slowReserver) Reserve(context.Context, string, seckill.ReserveRequest) (seckill.ReserveResult, error) {
	time.Sleep(s.d) // the claim's own time, what Timed measures
	return seckill.ReserveResult{Outcome: seckill.OutcomeReserved}, nil
}

func TestTimedObservesEachClaim(t *testing.T) {
	var l Latency
	r := Timed{Next: slowReserver{d: 5 * time.Millisecond}, Latency: &l}
	for range 3 {
		if res, err := r.Reserve(context.Background(), "s", seckill.ReserveRequest{}); err != nil || res.Outcome != seckill.OutcomeReserved {
			t.Fatalf("Reserve = %+v, %v", res, err)
		}
	}
	if mean, n := l.Take(); n != 3 || mean < 5*time.Millisecond {
		t.Fatalf("Take = %v, %d; want 3 claims of 5ms or more", mean, n)
	}
}

// keptPaces is a Keeper in memory.
type keptPaces map[string]seckill.QueuePace

func (k keptPaces) KeepPace(_ context.Context, saleID string, p seckill.QueuePace) error {
	k[saleID] = p
	return nil
}

// healingStore refuses every move, as the stock store does while a sale
// heals.
type healingStore struct{ fakeStore }

func (h *healingStore) AdvancePace(context.Context, *seckill.Sale, int64) (seckill.QueuePace, error) {
	return seckill.QueuePace{}, &seckill.Error{Code: seckill.ETRYLATER, Message: "healing"}
}

// TestPacerKeepsEachMoveAndWaitsOutAHeal: every pace a pass moves is
// given to the Keeper (from where a heal puts it back); while the sale
// heals the move is refused, the pass moves on without an error and
// keeps nothing.
func TestPacerKeepsEachMoveAndWaitsOutAHeal(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 15, 0, 0, 0, time.UTC)
	adaptive := &seckill.Sale{ID: "ad", StartAt: t0.Add(-time.Minute), EndAt: t0.Add(time.Hour), Admission: seckill.Admission{
		Mode: seckill.AdmitQueue, AdmitPerSecond: 20, Adaptive: &seckill.AdaptiveAdmission{MinPerSecond: 2, MaxPerSecond: 102, TargetLatencyMS: 100}}}
	busy := func() *fakeLatency {
		return &fakeLatency{windows: []struct {
			mean time.Duration
			n    int64
		}{{20 * time.Millisecond, 50}, {20 * time.Millisecond, 50}}}
	}
	kept := keptPaces{}
	store := &fakeStore{paces: map[string]seckill.QueuePace{}}
	p := New(Config{Sales: sales{adaptive}, Store: store, Latency: busy(), Keeper: kept, Now: func() time.Time { return t0 }})
	for range 2 {
		if err := p.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if kept["ad"] != store.paces["ad"] {
			t.Fatalf("kept %+v; want the pace moved, %+v", kept["ad"], store.paces["ad"])
		}
	}
	healing := &healingStore{fakeStore{paces: map[string]seckill.QueuePace{}}}
	kept = keptPaces{}
	p = New(Config{Sales: sales{adaptive}, Store: healing, Latency: busy(), Keeper: kept, Now: func() time.Time { return t0 }})
	if err := p.Pass(context.Background()); err != nil || len(kept) != 0 {
		t.Fatalf("a pass while the sale heals = %v, kept %v; want no error, nothing kept", err, kept)
	}
}
