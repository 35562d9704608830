package seckill

import "testing"

func TestOrderEventIDsDifferByTypeAndStayPerReservation(t *testing.T) {
	seen := map[string]OrderEventType{}
	for _, typ := range OrderEventTypes {
		id := OrderEventID(typ, "tea.0123456789ABCDEFGHJKMNPQRS")
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s share the id %s", prev, typ, id)
		}
		seen[id] = typ
		if again := OrderEventID(typ, "tea.0123456789ABCDEFGHJKMNPQRS"); again != id {
			t.Errorf("OrderEventID(%s) is not stable: %s then %s", typ, id, again)
		}
	}
	if got, want := OrderEventID(EventOrderCreated, "tea.X"), "tea.X.created"; got != want {
		t.Errorf("OrderEventID = %q, want %q", got, want)
	}
}

func TestOrderEventTypeWord(t *testing.T) {
	words := map[OrderEventType]string{
		EventOrderCreated: "created", EventOrderPaid: "paid", EventOrderCancelled: "cancelled",
		EventOrderFailed: "failed", EventOrderRefundDue: "refund_due", EventOrderRefunded: "refunded",
		"plain": "plain", "": "",
	}
	for typ, want := range words {
		if got := typ.Word(); got != want {
			t.Errorf("%q.Word() = %q, want %q", typ, got, want)
		}
	}
	for _, typ := range OrderEventTypes {
		if _, ok := words[typ]; !ok {
			t.Errorf("%s: not in the table", typ)
		}
	}
}
