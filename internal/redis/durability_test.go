package redis

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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
	s, err := New(context.Background(), "redis://"+primary.Addr, WithWaitReplicas(1, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, primary, replica
}

// TestWaitReplicas: with replicas:1 the store passes the stock-store
// conformance suite; with the replica gone, a batch that claims is
// refused with try_later (and its claim replays once the replica is
// back), while a batch that claims nothing is answered as usual.
func TestWaitReplicas(t *testing.T) {
	s, _, replica := durableStore(t)
	t.Run("Conformance", func(t *testing.T) {
		conformance.StockStore(t, func(t *testing.T) seckill.StockStore { return s })
	})

	ctx := context.Background()
	sale := liveSale(10, 1)
	mustPreheat(t, s, sale)
	if res, err := s.Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "a", 1, "")}); err != nil || res[0].Outcome != seckill.OutcomeReserved {
		t.Fatalf("Reserve with the replica up = %+v, %v; want reserved", res, err)
	}

	replica.Kill()
	req := request(sale.ID, "b", 1, "key-b")
	_, err := s.Reserve(ctx, sale.ID, []seckill.ReserveRequest{req})
	if !errors.Is(err, ErrNotDurable) || seckill.ErrorCode(err) != seckill.ETRYLATER {
		t.Fatalf("Reserve with the replica down: %v; want ErrNotDurable (try_later)", err)
	}
	// A batch that claims nothing (a's limit is reached) needs no replica.
	if res, err := s.Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, "a", 1, "")}); err != nil || res[0].Outcome != seckill.OutcomeLimitExceeded {
		t.Errorf("Reserve that claims nothing, replica down = %+v, %v; want limit_exceeded", res, err)
	}

	if err := replica.Start(); err != nil {
		t.Fatal(err)
	}
	// The retry with the same key replays the reservation that survived,
	// once the replica has caught up.
	retry := request(sale.ID, "b", 1, "key-b")
	for {
		res, err := s.Reserve(ctx, sale.ID, []seckill.ReserveRequest{retry})
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
			srv := redistest.StartServer(t, tt.args...)
			s, err := New(context.Background(), "redis://"+srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = s.CheckFsync(context.Background())
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
// and with none, in the same run. Each op is one Reserve call of batch
// requests from one of benchParallelism×GOMAXPROCS goroutines, as the
// combiner makes them. Compare ns/op (and the ratio logged) of the two.
func BenchmarkReserveDurability(b *testing.B) {
	primary := redistest.StartServer(b)
	redistest.StartReplica(b, primary)
	for _, batch := range []int{1, 16} {
		for _, mode := range []string{"none", "replicas:1"} {
			b.Run("batch="+strconv.Itoa(batch)+"/"+mode, func(b *testing.B) {
				var opts []Option
				if mode != "none" {
					opts = append(opts, WithWaitReplicas(1, time.Second))
				}
				s, err := New(context.Background(), "redis://"+primary.Addr, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				benchReserve(b, s, batch)
			})
		}
	}
}

func benchReserve(b *testing.B, s *Store, batch int) {
	ctx := context.Background()
	sale := liveSale(math.MaxInt32, seckill.MaxPurchaseLimit)
	sale.Stock = seckill.MaxSaleStock
	if _, err := s.Preheat(ctx, sale); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		reqs := make([]seckill.ReserveRequest, batch)
		for pb.Next() {
			for i := range reqs {
				reqs[i] = seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()),
					UserID: "user-" + strconv.Itoa(int(next.Add(1)%benchUsers)), Qty: 1}
			}
			res, err := s.Reserve(ctx, sale.ID, reqs)
			if err != nil {
				b.Errorf("Reserve: %v", err)
				return
			}
			if !slices.ContainsFunc(res, func(r seckill.ReserveResult) bool { return r.Outcome == seckill.OutcomeReserved }) {
				b.Errorf("no reservation in %+v", res)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "reservations/s")
}
