package nats

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestEventSinkPublishesEachEventOnce: events land on their type's
// subject in order, and a redelivery of one (same id) is dropped by the
// stream.
func TestEventSinkPublishesEachEventOnce(t *testing.T) {
	url := servicetest.NATS.URL(t)
	subject := "seckill_test." + servicetest.UniqueName("ev")
	ctx := t.Context()
	sink, err := NewEventSink(ctx, url, subject, func(e seckill.OrderEvent) ([]byte, error) { return json.Marshal(e) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err == nil {
			js, _ := jetstream.New(nc)
			_ = js.DeleteStream(context.Background(), EventStream(subject))
			nc.Close()
		}
		_ = sink.Close()
	})
	o := &seckill.Order{ID: "o-tea.A", ReservationID: "tea.A", SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
	events := []seckill.OrderEvent{
		seckill.NewOrderEvent(seckill.EventOrderCreated, o, time.Now()),
		seckill.NewOrderEvent(seckill.EventOrderPaid, o, time.Now()),
	}
	for _, e := range append(events, events[0]) { // the created one twice
		if err := sink.Deliver(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := sink.js.OrderedConsumer(ctx, EventStream(subject), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		var e seckill.OrderEvent
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Subject()+" "+e.ID)
	}
	want := []string{subject + ".created tea.A.created", subject + ".paid tea.A.paid"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("stream holds %q, want %q", got, want)
	}
}
