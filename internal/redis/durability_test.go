package redis

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/conformance"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

func TestParseDurability(t *testing.T) {
	for in, want := range map[string]Durability{
		"":           {Mode: DurabilityNone},
		"none":       {Mode: DurabilityNone},
		"fsync":      {Mode: DurabilityFsync},
		"replicas:1": {Mode: DurabilityReplicas, Replicas: 1},
		"replicas:3": {Mode: DurabilityReplicas, Replicas: 3},
	} {
		if got, err := ParseDurability(in); err != nil || got != want {
			t.Errorf("ParseDurability(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"always", "replicas", "replicas:0", "replicas:-1", "replicas:x", "FSYNC", "replicas:1000"} {
		if _, err := ParseDurability(bad); err == nil {
			t.Errorf("ParseDurability(%q) accepted", bad)
		}
	}
}

// durableStore is a store on a private primary with one replica that
// waits for that replica after every batch.
func durableStore(t *testing.T) (*Store, *redistest.Server, *redistest.Server) {
	t.Helper()
	primary := redistest.StartServer(t)
	replica := redistest.StartReplica(t, primary)
	s := connect(t, primary.URL(), WithWaitReplicas(1, 3*time.Second)) // a replica on a loaded machine may lag well past 200ms
	return s, primary, replica
}

// TestWaitReplicas: with replicas:1 the store passes the stock-store
// conformance suite; with the replica gone, a batch that claims is
// refused with try_later (and its claim replays once the replica is
// back), while a batch that claims nothing is answered as usual.
func TestWaitReplicas(t *testing.T) {
	s, _, replica := durableStore(t)
	t.Run("Conformance", func(t *testing.T) {
		conformance.StockStore(t, func(t *testing.T) seckill.StockStore { return s.StockStore() })
	})

	ctx := context.Background()
	sale := mustPreheat(t, s, liveSale(10, 1))
	if res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "a", 1, "")}); err != nil || res[0].Outcome != seckill.OutcomeReserved {
		t.Fatalf("Reserve with the replica up = %+v, %v; want reserved", res, err)
	}

	replica.Kill()
	req := request(sale.ID, "b", 1, "key-b")
	_, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{req})
	if !errors.Is(err, ErrNotDurable) || seckill.ErrorCode(err) != seckill.ETRYLATER {
		t.Fatalf("Reserve with the replica down: %v; want ErrNotDurable (try_later)", err)
	}
	// A batch that claims nothing (a's limit is reached) needs no replica.
	if res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "a", 1, "")}); err != nil || res[0].Outcome != seckill.OutcomeLimitExceeded {
		t.Errorf("Reserve that claims nothing, replica down = %+v, %v; want limit_exceeded", res, err)
	}

	if err := replica.Start(); err != nil {
		t.Fatal(err)
	}
	// The retry with the same key replays the reservation that survived,
	// once the replica has caught up.
	retry := request(sale.ID, "b", 1, "key-b")
	for {
		res, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{retry})
		if err == nil {
			if res[0].Outcome != seckill.OutcomeReplayed || res[0].ReservationID != req.ReservationID {
				t.Fatalf("retry after the replica came back = %+v; want a replay of %s", res[0], req.ReservationID)
			}
			break
		} else if !errors.Is(err, ErrNotDurable) {
			t.Fatal(err)
		}
	}
}

// TestCheckFsync: fsync mode starts only on appendonly yes + appendfsync
// always, and names the setting that is wrong.
func TestCheckFsync(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"--appendonly", "yes", "--appendfsync", "always"}, ""},
		{[]string{"--appendonly", "yes", "--appendfsync", "everysec"}, "appendfsync"},
		{[]string{"--appendonly", "no", "--appendfsync", "always"}, "appendonly"},
		{[]string{"--rename-command", "CONFIG", `""`}, "refused CONFIG"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			s := connect(t, redistest.StartServer(t, tt.args...).URL())
			err := s.CheckFsync(context.Background())
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("CheckFsync: %v; want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("CheckFsync: %v; want an error naming %q", err, tt.want)
			}
		})
	}
}

// BenchmarkReserveDurability is the cost of one WAIT per batch: the
// reserve path on a private primary with one replica, with replicas:1
// against none in the same run. Each op (run with -benchtime=Nx) is one
// round: the same number of Reserve calls of `batch` requests, as the
// combiner makes them, from benchParallelism×GOMAXPROCS goroutines, first
// with none, then with replicas:1. It reports the median over the rounds
// of the per-round ratio of wall time (replicas:1 / none), and the wall
// and client CPU microseconds per batch of each mode.
func BenchmarkReserveDurability(b *testing.B) {
	primary := redistest.StartServer(b)
	redistest.StartReplica(b, primary)
	none := connect(b, primary.URL())
	durable := connect(b, primary.URL(), WithWaitReplicas(1, time.Second))
	for _, batch := range []int{1, 16} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			const calls = 4000
			var ratios []float64
			var wall, cpu [2]time.Duration
			for range b.N {
				var took [2]time.Duration
				for i, s := range []*Store{none, durable} {
					c0 := cpuTime()
					t0 := time.Now()
					reserveRound(b, s, batch, calls)
					took[i] = time.Since(t0)
					wall[i] += took[i]
					cpu[i] += cpuTime() - c0
				}
				ratios = append(ratios, float64(took[1])/float64(took[0]))
			}
			slices.Sort(ratios)
			perBatch := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*calls) }
			b.ReportMetric(ratios[len(ratios)/2], "ratio(replicas:1/none)")
			b.ReportMetric(perBatch(wall[0]), "µs/batch(none)")
			b.ReportMetric(perBatch(wall[1]), "µs/batch(replicas:1)")
			b.ReportMetric(perBatch(cpu[0]), "cpu-µs/batch(none)")
			b.ReportMetric(perBatch(cpu[1]), "cpu-µs/batch(replicas:1)")
		})
	}
}

// cpuTime is this process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reserveRound makes calls Reserve calls of batch requests on a fresh
// sale from benchParallelism×GOMAXPROCS goroutines.
func reserveRound(b *testing.B, s *Store, batch, calls int) {
	ctx := context.Background()
	sale := liveSale(seckill.MaxSaleStock, seckill.MaxPurchaseLimit)
	if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
		b.Fatal(err)
	}
	var next, users atomic.Int64
	var wg sync.WaitGroup
	for range benchParallelism * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reqs := make([]seckill.ReserveRequest, batch)
			for next.Add(1) <= int64(calls) {
				for i := range reqs {
					reqs[i] = seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()),
						UserID: "user-" + strconv.Itoa(int(users.Add(1)%benchUsers)), Qty: 1}
				}
				res, err := s.StockStore().Reserve(ctx, sale.ID, reqs)
				if err != nil {
					b.Errorf("Reserve: %v", err)
					return
				}
				if !slices.ContainsFunc(res, func(r seckill.ReserveResult) bool { return r.Outcome == seckill.OutcomeReserved }) {
					b.Errorf("no reservation in %+v", res)
					return
				}
			}
		}()
	}
	wg.Wait()
}
