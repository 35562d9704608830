package seckill

import (
	"reflect"
	"testing"
)

func TestDecidePersist(t *testing.T) {
	ev := func(id, user string, qty int64) ReservationEvent {
		return ReservationEvent{ReservationID: id, SaleID: "tea", UserID: user, Qty: qty}
	}
	var (
		created   = PersistDecision{Outcome: PersistCreated, Status: OrderPlaced}
		duplicate = PersistDecision{Outcome: PersistDuplicate}
	)
	tests := []struct {
		name   string
		snap   PersistSnapshot
		events []ReservationEvent
		want   []PersistDecision
		taken  int64
	}{
		{
			name:   "an order within the stock and the limit is created and takes its qty",
			snap:   PersistSnapshot{Stock: 5, Limit: 2},
			events: []ReservationEvent{ev("r1", "ann", 2)},
			want:   []PersistDecision{created},
			taken:  2,
		},
		{
			name:   "the stock runs out in the batch's order: the first that does not fit is rejected, a smaller one after it still fits",
			snap:   PersistSnapshot{Stock: 3, Limit: 5},
			events: []ReservationEvent{ev("r1", "ann", 2), ev("r2", "bob", 2), ev("r3", "cat", 1)},
			want: []PersistDecision{created,
				{Outcome: PersistRejected, Reason: ReasonInsufficientStock + ": qty 2, 1 left"}, created},
			taken: 3,
		},
		{
			name:   "the limit counts what the buyer holds in the database",
			snap:   PersistSnapshot{Stock: 10, Limit: 2, Held: map[string]int64{"ann": 1}},
			events: []ReservationEvent{ev("r1", "ann", 2), ev("r2", "ann", 1)},
			want: []PersistDecision{{Outcome: PersistOverLimit, Reason: ReasonOverLimit + ": qty 2, buyer holds 1 of 2"},
				created},
			taken: 1,
		},
		{
			name:   "the limit counts the batch's own earlier orders of the buyer",
			snap:   PersistSnapshot{Stock: 10, Limit: 2},
			events: []ReservationEvent{ev("r1", "ann", 1), ev("r2", "bob", 2), ev("r3", "ann", 2)},
			want: []PersistDecision{created, created,
				{Outcome: PersistOverLimit, Reason: ReasonOverLimit + ": qty 2, buyer holds 1 of 2"}},
			taken: 3,
		},
		{
			name:   "the limit is checked before the stock",
			snap:   PersistSnapshot{Stock: 0, Limit: 1, Held: map[string]int64{"ann": 1}},
			events: []ReservationEvent{ev("r1", "ann", 1)},
			want:   []PersistDecision{{Outcome: PersistOverLimit, Reason: ReasonOverLimit + ": qty 1, buyer holds 1 of 1"}},
		},
		{
			name:   "a reservation with an order or a failed order, or seen earlier in the batch, is a duplicate and takes nothing",
			snap:   PersistSnapshot{Stock: 10, Limit: 5, Existing: map[string]bool{"r1": true}},
			events: []ReservationEvent{ev("r1", "ann", 1), ev("r2", "bob", 1), ev("r2", "bob", 1)},
			want:   []PersistDecision{duplicate, created, duplicate},
			taken:  1,
		},
		{
			name:   "a reservation whose restore was asked first becomes a cancelled order that takes no stock and counts toward no limit",
			snap:   PersistSnapshot{Stock: 1, Limit: 1, Restores: map[string]string{"r1": "buyer cancelled"}},
			events: []ReservationEvent{ev("r1", "ann", 1), ev("r2", "ann", 1)},
			want: []PersistDecision{{Outcome: PersistCreated, Status: OrderCancelled, CancelReason: "buyer cancelled", Restored: true},
				created},
			taken: 1,
		},
		{
			name:   "invalid events are rejected, even with a restore asked (which still settles)",
			snap:   PersistSnapshot{Stock: 10, Limit: 5, Restores: map[string]string{"r2": "x"}},
			events: []ReservationEvent{ev("r1", "", 1), ev("r2", "bob", 0), ev("r3", "cat", MaxPurchaseLimit+1)},
			want: []PersistDecision{
				{Outcome: PersistRejected, Reason: "invalid reservation event: bad user id"},
				{Outcome: PersistRejected, Reason: "invalid reservation event: qty 0 out of range", Restored: true},
				{Outcome: PersistRejected, Reason: "invalid reservation event: qty 1000001 out of range"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held := map[string]int64{}
			for k, v := range tt.snap.Held {
				held[k] = v
			}
			plan := DecidePersist(tt.snap, tt.events)
			if !reflect.DeepEqual(plan.Decisions, tt.want) {
				t.Errorf("decisions\n got %+v\nwant %+v", plan.Decisions, tt.want)
			}
			if plan.Taken != tt.taken {
				t.Errorf("taken %d, want %d", plan.Taken, tt.taken)
			}
			if len(tt.snap.Held) > 0 && !reflect.DeepEqual(tt.snap.Held, held) {
				t.Errorf("snapshot's holdings changed: %v, were %v", tt.snap.Held, held)
			}
		})
	}
}
