package main

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/rabbitmq"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestOrderEventsToRabbitMQ: with a RabbitMQ sink and no webhook, a
// rush's events all reach the queue the shop bound to its exchange, each
// order's in order, routed by type, each carrying its event id: with the
// broker reachable throughout, cut mid-rush (connections dropped and
// refused), and blackholed mid-rush (connections kept, nothing through,
// messages in flight between publish and confirm). A faulted run restores
// the broker only once the engine has failed deliveries to it.
//
// The shop's exchange is auto-deleted and its queue belongs to the test's
// connection, so nothing is left on the server even if the test is killed.
func TestOrderEventsToRabbitMQ(t *testing.T) {
	amqpURL := servicetest.RabbitMQ.URL(t)
	for _, fault := range []string{"none", "cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			ch, exchange, queue := shopQueue(t, amqpURL)
			proxy, viaProxy := servicetest.ProxyURL(t, amqpURL)
			redisURL, prefix := sharedRedis(t)
			e := startEngine(t, func(c *Config) {
				c.DatabaseURL, c.RedisURL, c.RedisKeyPrefix = sqltest.SQLite(t), redisURL, prefix
				c.Events.AMQPURL, c.Events.Exchange = viaProxy, exchange
				c.Events.Backoff, c.Events.MaxBackoff, c.Events.Timeout = 20*time.Millisecond, 300*time.Millisecond, time.Second
			})
			sale := e.liveSale(200, 1)

			// The shop consumes as events come; the fault strikes once
			// the first 20 are in: mid-rush.
			s := newShop(t)
			faulted := make(chan struct{})
			consumeEvents(t, ch, queue, s, func(n int) {
				if n == 20 && fault != "none" {
					if fault == "cut" {
						proxy.Cut()
					} else {
						proxy.Blackhole()
					}
					close(faulted)
				}
			})
			claims := buyAndCancel(t, e.client, e.base, e.m.Config.JWTSecret, sale, 300, 3, "amqp")
			failed := `seckill_order_event_attempts_total{result="failed"}`
			if fault != "none" {
				servicetest.WaitFor(t, 2*time.Minute, "the first 20 events, then the fault", func() bool {
					select {
					case <-faulted:
						return true
					default:
						return false
					}
				})
				servicetest.WaitFor(t, 2*time.Minute, "50 failed deliveries to a broker that is "+fault, func() bool {
					return scrape(e.client, e.base, failed) >= 50
				})
				proxy.Restore()
			}
			f := s.awaitAllDelivered(func() (*seckill.SaleLedger, error) {
				return e.m.orders.Ledger.SaleLedger(context.Background(), sale)
			}, claims, 2*time.Minute)
			t.Logf("%v failed deliveries", scrape(e.client, e.base, failed))
			f.check(t, "RabbitMQ sink, fault "+fault)
		})
	}
}

// consumeEvents hands s every event the shop's queue receives until the
// test ends, checking each message's id, type, routing key and
// persistence; after the n-th (1, 2, …) it calls after(n).
func consumeEvents(t *testing.T, ch *amqp.Channel, queue string, s *shop, after func(n int)) {
	t.Helper()
	deliveries, err := ch.Consume(queue, "shop", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	consumed := make(chan struct{})
	t.Cleanup(func() { _ = ch.Cancel("shop", false); <-consumed })
	go func() {
		defer close(consumed)
		n := 0
		for d := range deliveries {
			id, typ := s.consumed(d.Body)
			if d.MessageId != id || d.Type != typ || d.RoutingKey != seckill.OrderEventType(typ).Word() || d.DeliveryMode != amqp.Persistent {
				t.Errorf("%s: message id %q, type %q, routing key %q, delivery mode %d", id, d.MessageId, d.Type, d.RoutingKey, d.DeliveryMode)
			}
			n++
			after(n)
		}
	}()
}

// TestOrderEventsOneSinkDown: with the webhook and RabbitMQ both
// configured, the shop's webhook is down for the whole rush and long
// after, while its broker takes every order's first event at once. The
// broker gets each event exactly once although each of those is retried
// for the webhook several times (the node remembers which sink took it),
// the metrics name the webhook as the failing sink, and once the webhook
// is back both get every event, each order's in order.
func TestOrderEventsOneSinkDown(t *testing.T) {
	r := rushWithAFailingWebhook(t, "onedown", func(hook *shop) (string, time.Duration) {
		hook.down()
		return hook.url(), 0
	})
	e, hook, broker, ledger, claims, first := r.e, r.hook, r.broker, r.ledger, r.claims, r.first
	// Each of them retried for the webhook a few times over.
	hookFailed := `seckill_order_event_sink_attempts_total{result="failed",sink="webhook"}`
	servicetest.WaitFor(t, 2*time.Minute, "three failed webhook deliveries an event", func() bool {
		return scrape(e.client, e.base, hookFailed) >= 3*float64(first)
	})
	hook.up()
	fh := hook.awaitAllDelivered(ledger, claims, 2*time.Minute)
	t.Logf("%v failed deliveries to the webhook", scrape(e.client, e.base, hookFailed))
	fh.check(t, "the webhook, down and back")
	fb := broker.awaitAllDelivered(ledger, claims, 2*time.Minute)
	fb.check(t, "RabbitMQ, up throughout")
	if fb.Duplicates != 0 {
		t.Errorf("RabbitMQ got %d duplicates of %d events while the webhook was retried %v times: each event should reach it once",
			fb.Duplicates, fb.Expected, scrape(e.client, e.base, hookFailed))
	}
	for sample, want := range map[string]float64{
		`seckill_order_event_sink_attempts_total{result="failed",sink="rabbitmq"}`:    0,
		`seckill_order_event_sink_attempts_total{result="delivered",sink="rabbitmq"}`: float64(fb.Expected),
		`seckill_order_event_sink_attempts_total{result="delivered",sink="webhook"}`:  float64(fh.Expected),
	} {
		if got := scrape(e.client, e.base, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
}

// TestOrderEventsOneSinkBlackholed: the webhook is blackholed (a proxy
// that takes its bytes and never answers) through a rush, RabbitMQ up. A
// delivery to the webhook waits out its timeout, so the broker gets each
// order's first event only because the sinks are tried at once, and at
// the pace of a webhook that is down only because the webhook is not
// tried after a few timeouts in a row: fewer deliveries time out than
// there are events. Once the proxy passes bytes again, both sinks end
// with every event in order, and RabbitMQ with none twice.
func TestOrderEventsOneSinkBlackholed(t *testing.T) {
	var proxy *servicetest.Proxy
	r := rushWithAFailingWebhook(t, "blackholed", func(hook *shop) (string, time.Duration) {
		proxy = servicetest.StartProxy(t, hook.addr)
		proxy.Blackhole()
		return "http://" + proxy.Addr() + "/seckill/events", time.Second
	})
	e, hook, broker, ledger, claims, first := r.e, r.hook, r.broker, r.ledger, r.claims, r.first
	hookFailed := `seckill_order_event_sink_attempts_total{result="failed",sink="webhook"}`
	hookSkipped := `seckill_order_event_sink_attempts_total{result="skipped",sink="webhook"}`
	timedOut, skipped := scrape(e.client, e.base, hookFailed), scrape(e.client, e.base, hookSkipped)
	t.Logf("while blackholed: %v deliveries to the webhook timed out, %v skipped, for %d first events", timedOut, skipped, first)
	if timedOut >= float64(first) || skipped == 0 {
		t.Errorf("%v deliveries to the blackholed webhook timed out and %v were skipped, for %d events: want it tried less than once an event",
			timedOut, skipped, first)
	}
	proxy.Restore()
	fh := hook.awaitAllDelivered(ledger, claims, 2*time.Minute)
	fh.check(t, "the webhook, blackholed and back")
	fb := broker.awaitAllDelivered(ledger, claims, 2*time.Minute)
	fb.check(t, "RabbitMQ, up throughout")
	if fb.Duplicates != 0 {
		t.Errorf("RabbitMQ got %d duplicates of %d events: each event should reach it once", fb.Duplicates, fb.Expected)
	}
	if got := scrape(e.client, e.base, `seckill_order_event_sink_attempts_total{result="failed",sink="rabbitmq"}`); got != 0 {
		t.Errorf("%v failed deliveries to RabbitMQ; want none", got)
	}
}

// failingWebhookRush is what rushWithAFailingWebhook leaves: the engine,
// the webhook's shop and the broker's, the sale's ledger, the claims
// answered 202, and the orders and failed orders (first events) that all
// reached the broker.
type failingWebhookRush struct {
	e             *engine
	hook, broker  *shop
	ledger        func() (*seckill.SaleLedger, error)
	claims, first int
}

// rushWithAFailingWebhook runs a rush of 300 buyers for 200 units (every
// third cancelling) on an engine whose order events go to RabbitMQ and to
// the webhook at the URL (and with the delivery timeout, 0 for the shop's
// default) that fail returns, once it has made the webhook fail. An
// order's later events wait behind its first until every sink took that,
// so it waits until the broker has every order's first event.
func rushWithAFailingWebhook(t *testing.T, name string, fail func(hook *shop) (url string, timeout time.Duration)) failingWebhookRush {
	t.Helper()
	amqpURL := servicetest.RabbitMQ.URL(t)
	ch, exchange, queue := shopQueue(t, amqpURL)
	r := failingWebhookRush{broker: newShop(t), hook: startShop(t)}
	consumeEvents(t, ch, queue, r.broker, func(int) {})
	url, timeout := fail(r.hook)
	redisURL, prefix := sharedRedis(t)
	r.e = startEngine(t, func(c *Config) {
		withShop(t, r.hook, sqltest.SQLite(t), redisURL, prefix)(c)
		c.Events.WebhookURL = url
		if timeout > 0 {
			c.Events.Timeout = timeout
		}
		c.Events.AMQPURL, c.Events.Exchange = amqpURL, exchange
	})
	sale := r.e.liveSale(200, 1)
	r.claims = buyAndCancel(t, r.e.client, r.e.base, r.e.m.Config.JWTSecret, sale, 300, 3, name)
	r.ledger = func() (*seckill.SaleLedger, error) { return r.e.m.orders.Ledger.SaleLedger(context.Background(), sale) }
	servicetest.WaitFor(t, 2*time.Minute, "every order's first event at the broker", func() bool {
		l := mustLedger(t, r.ledger)
		r.first = len(l.Orders) + len(l.Failed)
		return r.first >= r.claims && r.broker.tally(l).Delivered >= r.first
	})
	return r
}

// mustLedger is the sale's ledger, read once more.
func mustLedger(t *testing.T, ledger func() (*seckill.SaleLedger, error)) *seckill.SaleLedger {
	t.Helper()
	l, err := ledger()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// shopQueue is the shop's side: an auto-deleted exchange and a queue of
// the test's own connection bound to it for every event.
func shopQueue(t *testing.T, amqpURL string) (ch *amqp.Channel, exchange, queue string) {
	t.Helper()
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if ch, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	exchange = servicetest.UniqueName("seckill_test.order_events_")
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "#", exchange, false, nil); err != nil {
		t.Fatal(err)
	}
	return ch, exchange, q.Name
}

// TestOrderEventsAMQPFlags: --order-events-amqp-url alone turns order
// events on, and the exchange has its default unless set.
func TestOrderEventsAMQPFlags(t *testing.T) {
	parse := func(args ...string) eventsConfig { return parseServe(t, args...).Events }
	if c := parse(); c.enabled() || c.Exchange != rabbitmq.DefaultEventExchange {
		t.Errorf("defaults: enabled %v, exchange %q; want off, %q", c.enabled(), c.Exchange, rabbitmq.DefaultEventExchange)
	}
	c := parse("--order-events-amqp-url", "amqp://shop:pw@mq:5672/", "--order-events-exchange", "shop.orders")
	if !c.enabled() || c.AMQPURL != "amqp://shop:pw@mq:5672/" || c.Exchange != "shop.orders" {
		t.Errorf("flags: enabled %v, %q, %q", c.enabled(), c.AMQPURL, c.Exchange)
	}
	if err := c.check(); err != nil {
		t.Errorf("a RabbitMQ sink without a webhook: check() = %v", err)
	}
	c.Exchange = "amq.topic"
	if err := c.check(); err == nil || !strings.Contains(err.Error(), "exchange") {
		t.Errorf("a reserved exchange: check() = %v, want a refusal naming it", err)
	}
	t.Setenv("SECKILL_ORDER_EVENTS_EXCHANGE", "from.env")
	if c := parse(); c.Exchange != "from.env" {
		t.Errorf("SECKILL_ORDER_EVENTS_EXCHANGE: %q", c.Exchange)
	}
}
