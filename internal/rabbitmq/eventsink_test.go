package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// shopExchange is a shop's exchange for one test, as a shop declares it
// and binds its queue before the sale: auto-deleted, and bound only by a
// queue of the test's own connection (exclusive), so that nothing is left
// on the server even when the test is killed. The queue takes created and
// paid events, never refunded ones.
func shopExchange(t *testing.T, url string) (ch *amqp.Channel, exchange, queue string) {
	t.Helper()
	conn, ch, err := dialChannel(url)
	if err != nil {
		t.Fatal(err)
	}
	exchange = servicetest.UniqueName("seckill_test.order_events_")
	t.Cleanup(func() {
		_ = ch.ExchangeDelete(exchange, false, false)
		_ = conn.Close()
	})
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"created", "paid"} {
		if err := ch.QueueBind(q.Name, key, exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ch, exchange, q.Name
}

func newTestEventSink(t *testing.T, url, exchange string) *EventSink {
	t.Helper()
	sink, err := NewEventSink(t.Context(), url, exchange, func(e seckill.OrderEvent) ([]byte, error) { return json.Marshal(e) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	return sink
}

// TestEventSinkRoutesEachEventByType: each event is one persistent message
// on the exchange, routed by its type's last word, carrying its id and
// type; a redelivery carries the same id, for the shop to drop.
func TestEventSinkRoutesEachEventByType(t *testing.T) {
	url := servicetest.RabbitMQ.URL(t)
	ch, exchange, queue := shopExchange(t, url)
	sink := newTestEventSink(t, url, exchange) // the shop's exchange, as it is
	o := &seckill.Order{ID: "o-x", ReservationID: "tea." + servicetest.UniqueName("r"), SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
	events := []seckill.OrderEvent{
		seckill.NewOrderEvent(seckill.EventOrderCreated, o, time.Now()),
		seckill.NewOrderEvent(seckill.EventOrderPaid, o, time.Now()),
	}
	for _, e := range append(events, events[0]) { // the created one twice
		if err := sink.Deliver(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 3 {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("the queue holds %d of the 3 messages published: %q", len(got), got)
		}
		var e seckill.OrderEvent
		if err := json.Unmarshal(d.Body, &e); err != nil {
			t.Fatalf("body %q: %v", d.Body, err)
		}
		if d.MessageId != e.ID || d.Type != string(e.Type) || d.DeliveryMode != amqp.Persistent || d.ContentType != "application/json" {
			t.Errorf("%s: message id %q, type %q, delivery mode %d, content type %q", e.ID, d.MessageId, d.Type, d.DeliveryMode, d.ContentType)
		}
		got = append(got, d.RoutingKey+" "+d.MessageId)
	}
	want := []string{"created " + events[0].ID, "paid " + events[1].ID, "created " + events[0].ID}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the queue got %q, want %q", got, want)
	}
}

// TestEventSinkFailsAnEventNoQueueTakes: an event no queue is bound for is
// not delivered: the broker returns it, and the outbox keeps it for a
// retry instead of counting it sent.
func TestEventSinkFailsAnEventNoQueueTakes(t *testing.T) {
	url := servicetest.RabbitMQ.URL(t)
	_, exchange, _ := shopExchange(t, url) // binds created and paid, never refunded
	sink := newTestEventSink(t, url, exchange)
	o := &seckill.Order{ID: "o-x", ReservationID: "tea." + servicetest.UniqueName("r"), SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
	err := sink.Deliver(t.Context(), seckill.NewOrderEvent(seckill.EventOrderRefunded, o, time.Now()))
	if err == nil || !strings.Contains(err.Error(), "unroutable") {
		t.Fatalf("an event no queue is bound for: %v, want an unroutable error", err)
	}
	// The sink stays usable.
	if err := sink.Deliver(t.Context(), seckill.NewOrderEvent(seckill.EventOrderCreated, o, time.Now())); err != nil {
		t.Fatalf("the next event: %v", err)
	}
}

// TestEventSinkDeclaresAMissingExchange: with no exchange of its name, the
// sink declares a durable topic exchange, which a shop's queue can bind.
func TestEventSinkDeclaresAMissingExchange(t *testing.T) {
	url := servicetest.RabbitMQ.URL(t)
	conn, ch, err := dialChannel(url)
	if err != nil {
		t.Fatal(err)
	}
	exchange := servicetest.UniqueName("seckill_test.order_events_")
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_ = ch.ExchangeDelete(exchange, false, false)
		}
		_ = conn.Close()
	})
	sink := newTestEventSink(t, url, exchange)
	// Passive: fails, closing the channel, unless it exists.
	if err := ch.ExchangeDeclarePassive(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatalf("the sink's exchange: %v", err)
	}
	if ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	// Redeclared as a durable topic exchange: refused if it were another kind.
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatalf("the sink's exchange is not a durable topic exchange: %v", err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	o := &seckill.Order{ID: "o-x", ReservationID: "tea.R", SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
	if err := sink.Deliver(t.Context(), seckill.NewOrderEvent(seckill.EventOrderRefunded, o, time.Now())); err != nil {
		t.Fatalf("an event once a queue is bound for every key: %v", err)
	}
	if d, ok, err := ch.Get(q.Name, true); err != nil || !ok || d.RoutingKey != "refunded" {
		t.Fatalf("the queue's message: %v %v, routing key %q", ok, err, d.RoutingKey)
	}
}

// TestEventSinkConfirmLost strikes at the worst instant: the broker has
// routed an event to the shop's queue and its confirm never reaches the
// sink (the proxy holds the broker's replies). The delivery fails, so the
// outbox sends it again once the link is back: the shop gets it twice
// with one message id, drops the repeat, and loses nothing. Repeated over
// several events.
func TestEventSinkConfirmLost(t *testing.T) {
	url := servicetest.RabbitMQ.URL(t)
	ch, exchange, queue := shopExchange(t, url)
	proxy, viaProxy := servicetest.ProxyURL(t, url)
	sink := newTestEventSink(t, viaProxy, exchange)
	get := func(what string) amqp.Delivery {
		var d amqp.Delivery
		servicetest.WaitFor(t, time.Minute, what, func() bool {
			got, ok, err := ch.Get(queue, true)
			d = got
			return err == nil && ok
		})
		return d
	}
	// One delivery first, so that the sink has a channel open: opening
	// one waits for the broker's reply too.
	warm := &seckill.Order{ID: "o-w", ReservationID: "tea.warm", SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
	if err := sink.Deliver(t.Context(), seckill.NewOrderEvent(seckill.EventOrderCreated, warm, time.Now())); err != nil {
		t.Fatal(err)
	}
	get("the first event")
	for i := range 5 {
		o := &seckill.Order{ID: "o-x", ReservationID: fmt.Sprintf("tea.%d", i), SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
		e := seckill.NewOrderEvent(seckill.EventOrderCreated, o, time.Now())
		proxy.HoldReplies()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := sink.Deliver(ctx, e)
		cancel()
		if err == nil {
			t.Fatalf("event %d: delivered although its confirm never came", i)
		}
		first := get("the event in the shop's queue, its confirm held")
		proxy.Cut() // the link notices, and redials once restored
		proxy.Restore()
		// The outbox's retry: again until the link is back.
		servicetest.WaitFor(t, time.Minute, "the redelivery", func() bool { return sink.Deliver(t.Context(), e) == nil })
		again := get("the second copy in the queue")
		if first.MessageId != e.ID || again.MessageId != e.ID {
			t.Fatalf("event %d: copies with message ids %q and %q, want %q for both", i, first.MessageId, again.MessageId, e.ID)
		}
	}
}

// TestEventSinkExchangeDeletedWhileRunning: the shop's exchange is deleted
// during a sale. Deliveries fail, saying the server has no such exchange
// (the outbox keeps the events and shows why), and succeed again once the
// shop declares its exchange and binds its queue anew: a queue cannot be
// bound to a missing exchange, so the shop's redeclaring is what brings
// the events back, and the sink needs no redial for it.
func TestEventSinkExchangeDeletedWhileRunning(t *testing.T) {
	url := servicetest.RabbitMQ.URL(t)
	ch, exchange, queue := shopExchange(t, url)
	sink := newTestEventSink(t, url, exchange)
	o := &seckill.Order{ID: "o-x", ReservationID: "tea." + servicetest.UniqueName("r"), SaleID: "tea", UserID: "u", Qty: 1, AmountCents: 100}
	e := seckill.NewOrderEvent(seckill.EventOrderCreated, o, time.Now())
	if err := sink.Deliver(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete(exchange, false, false); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // every attempt, on a fresh channel each time
		err := sink.Deliver(t.Context(), e)
		if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no exchange '"+exchange+"'") {
			t.Fatalf("attempt %d with the exchange deleted: %v, want the server's 404 naming %s", i, err, exchange)
		}
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(queue, "created", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := sink.Deliver(t.Context(), e); err != nil {
		t.Fatalf("once the shop declared its exchange again: %v", err)
	}
	for _, what := range []string{"the first delivery", "the delivery after the exchange came back"} {
		d, ok, err := ch.Get(queue, true)
		if err != nil || !ok || d.MessageId != e.ID {
			t.Fatalf("%s: got %v (%q), %v", what, ok, d.MessageId, err)
		}
	}
}

func TestEventSinkRefusesABadExchange(t *testing.T) {
	for _, name := range []string{"", "amq.topic", "with space", "tab\there", strings.Repeat("x", 256), "é"} {
		if _, err := NewEventSink(context.Background(), "amqp://127.0.0.1:1/", name, nil); err == nil || !strings.Contains(err.Error(), "exchange") {
			t.Errorf("exchange %q: %v, want a refusal naming it", name, err)
		}
	}
}
