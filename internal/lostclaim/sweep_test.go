package lostclaim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/claimid"
)

// claimingReserver answers every request reserved, under its own id.
type claimingReserver struct{}

func (claimingReserver) Reserve(_ context.Context, _ string, req seckill.ReserveRequest) (seckill.ReserveResult, error) {
	return seckill.ReserveResult{Outcome: seckill.OutcomeReserved, ReservationID: req.ReservationID, Qty: req.Qty}, nil
}

// fakeRecords holds the stock store's records; the rest it forgot.
type fakeRecords struct {
	mu   sync.Mutex
	have map[string]bool
}

func (f *fakeRecords) ReservationsOf(_ context.Context, _ string, ids []string) (map[string]seckill.ReservationRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]seckill.ReservationRecord{}
	for _, id := range ids {
		if f.have[id] {
			out[id] = seckill.ReservationRecord{ReservationID: id}
		}
	}
	return out, nil
}

// TestSweepFindsForgottenClaimsNobodyPolls: after a heal arms it, the
// sweeper records as failed the claims this node answered that neither
// the stock store nor the database has, once nothing in flight can carry
// them, without any buyer polling; claims the stock store still holds are
// left alone, and nothing is swept while unarmed.
func TestSweepFindsForgottenClaimsNobodyPolls(t *testing.T) {
	ids := claimid.NewMinter([]byte("k"))
	t0 := time.Now()
	now := t0
	clock := func() time.Time { return now }
	st := &recordingStore{}
	backlog := int64(0)
	r := New(st, ids, Config{
		After: time.Hour, MinAge: 5 * time.Second, Now: clock,
		Outbox: &fakeOutbox{empty: true}, Backlog: func(context.Context) (int64, error) { return backlog, nil },
	})
	recs := &fakeRecords{have: map[string]bool{}}
	s := NewSweeper(claimingReserver{}, r, recs, SweepConfig{Window: time.Minute, Now: clock})
	ctx := context.Background()
	var claimed []string
	for i, user := range []string{"alice", "bob", "carol"} {
		id := ids.New("tea", user, 1, t0)
		if _, err := s.Reserve(ctx, "tea", seckill.ReserveRequest{ReservationID: id, UserID: user, Qty: 1}); err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, id)
		if i == 0 {
			recs.have[id] = true // alice's record survived the loss
		}
	}
	now = t0.Add(6 * time.Second)
	s.tick(ctx)
	if len(st.failed) != 0 {
		t.Fatalf("unarmed sweep recorded %d failed orders; want none", len(st.failed))
	}
	s.Arm()
	backlog = 3 // events in the broker: they may carry them
	s.tick(ctx)
	if len(st.failed) != 0 {
		t.Fatalf("armed sweep with events in flight recorded %d failed orders; want none yet", len(st.failed))
	}
	backlog = 0
	s.tick(ctx)
	got := map[string]bool{}
	for _, f := range st.failed {
		got[f.ReservationID] = true
	}
	if len(st.failed) != 2 || !got[claimed[1]] || !got[claimed[2]] {
		t.Fatalf("armed sweep recorded %v; want bob's and carol's claims", got)
	}
	s.tick(ctx) // settled claims are not swept again
	if len(st.failed) != 2 {
		t.Errorf("a second sweep recorded %d failed orders in all; want still 2", len(st.failed))
	}
	s.mu.Lock()
	left := len(s.claims)
	s.mu.Unlock()
	if left != 0 {
		t.Errorf("%d claims still remembered after every one settled; want 0", left)
	}
}

// TestJournalCap: past Max the oldest claims are forgotten, a quarter at
// a time, and the newest kept.
func TestJournalCap(t *testing.T) {
	ids := claimid.NewMinter([]byte("k"))
	r := New(&recordingStore{}, ids, Config{})
	s := NewSweeper(claimingReserver{}, r, &fakeRecords{}, SweepConfig{Max: 8})
	var last string
	for i := range 20 {
		last = ids.New("tea", fmt.Sprint(i), 1, time.Now())
		if _, err := s.Reserve(context.Background(), "tea", seckill.ReserveRequest{ReservationID: last, UserID: fmt.Sprint(i), Qty: 1}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.claims); n > 8 || n < 6 {
		t.Errorf("%d claims remembered with Max 8; want 6 to 8", n)
	}
	if s.claims[len(s.claims)-1].id != last {
		t.Errorf("the newest claim was forgotten")
	}
}

// lockedStore is a recordingStore safe for a sweeper's own goroutine.
type lockedStore struct {
	mu sync.Mutex
	recordingStore
}

func (s *lockedStore) RecordFailedOrder(ctx context.Context, f *seckill.FailedOrder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordingStore.RecordFailedOrder(ctx, f)
}

func (s *lockedStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.failed)
}

// TestStartedSweeperRecordsLossesInTheBackground: a started Sweeper, once
// armed, records a forgotten claim on its own goroutine (nobody calls
// tick, no buyer polls), and stops twice without error.
func TestStartedSweeperRecordsLossesInTheBackground(t *testing.T) {
	ids := claimid.NewMinter([]byte("k"))
	t0 := time.Now().Add(-time.Minute) // the claim is past MinAge at once
	st := &lockedStore{}
	r := New(st, ids, Config{After: time.Hour, MinAge: time.Second, Outbox: &fakeOutbox{empty: true},
		Backlog: func(context.Context) (int64, error) { return 0, nil }})
	s := NewSweeper(claimingReserver{}, r, &fakeRecords{have: map[string]bool{}}, SweepConfig{Interval: 10 * time.Millisecond})
	id := ids.New("tea", "alice", 1, t0)
	if _, err := s.Reserve(context.Background(), "tea", seckill.ReserveRequest{ReservationID: id, UserID: "alice", Qty: 1}); err != nil {
		t.Fatal(err)
	}
	s.Start(context.Background())
	s.Arm()
	deadline := time.Now().Add(time.Minute)
	for st.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := st.count(); n != 1 {
		t.Errorf("the started sweeper recorded %d failed orders; want alice's claim", n)
	}
	for range 2 {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
}
