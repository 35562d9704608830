package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill/internal/eventdelivery"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/nats"
	"github.com/seckill-dev/seckill/internal/rabbitmq"
	"github.com/seckill-dev/seckill/internal/sqlstore"
	"github.com/seckill-dev/seckill/internal/webhook"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

// eventsConfig is the delivery of order events to the shop (README,
// Plugging it into a shop). With no URL nothing is recorded or sent.
type eventsConfig struct {
	WebhookURL    string
	WebhookSecret string
	RetryFor      time.Duration // attempts go on this long after the event
	Backoff       time.Duration // the first pause; each later one doubles
	MaxBackoff    time.Duration
	Timeout       time.Duration // one delivery
	Concurrency   int
	// NATSURL, if set, also publishes every event to JetStream, on
	// Subject.<type's last word>.
	NATSURL string
	Subject string
	// AMQPURL, if set, also publishes every event to RabbitMQ, on the
	// exchange Exchange, routed by the type's last word.
	AMQPURL  string
	Exchange string
	// Keep is how long a delivered event stays in the outbox; 0 keeps
	// them for ever. Pending and dead events are never deleted.
	Keep time.Duration
}

func defaultEventsConfig() eventsConfig {
	p := eventdelivery.DefaultPolicy
	return eventsConfig{RetryFor: p.RetryFor, Backoff: p.FirstBackoff, MaxBackoff: p.MaxBackoff, Timeout: 10 * time.Second, Concurrency: 16,
		Subject: nats.DefaultEventSubject, Exchange: rabbitmq.DefaultEventExchange, Keep: eventdelivery.DefaultKeep}
}

func (c *eventsConfig) register(fs *flag.FlagSet) error {
	stringFlag(fs, &c.WebhookURL, "order-webhook-url", c.WebhookURL, "the shop's URL that receives every order event as a signed POST; empty: no events")
	stringFlag(fs, &c.WebhookSecret, "order-webhook-secret", c.WebhookSecret, "HMAC-SHA256 secret (at least 32 bytes) signing the order events (Seckill-Signature header)")
	stringFlag(fs, &c.NATSURL, "order-events-nats-url", c.NATSURL, "also publish every order event to this NATS JetStream server (nats://…), for shops that consume from a broker")
	stringFlag(fs, &c.Subject, "order-events-subject", c.Subject, "NATS subject prefix of order events: <prefix>.created, .paid, .cancelled, .failed, .refund_due, .refunded")
	stringFlag(fs, &c.AMQPURL, "order-events-amqp-url", c.AMQPURL, "also publish every order event to this RabbitMQ server (amqp://…), for shops that consume from a broker; an event counts as sent once a queue bound to the exchange has it")
	stringFlag(fs, &c.Exchange, "order-events-exchange", c.Exchange, "RabbitMQ exchange of order events (the shop's if it exists, else a durable topic exchange), routing keys created, paid, cancelled, failed, refund_due, refunded")
	return errors.Join(
		durationFlag(fs, &c.RetryFor, "order-webhook-retry-for", c.RetryFor, "an order event not delivered this long after it happened is dead-lettered and alerted"),
		durationFlag(fs, &c.Backoff, "order-webhook-backoff", c.Backoff, "pause after an order event's first failed delivery; each later pause doubles"),
		durationFlag(fs, &c.MaxBackoff, "order-webhook-max-backoff", c.MaxBackoff, "longest pause between deliveries of one order event"),
		durationFlag(fs, &c.Timeout, "order-webhook-timeout", c.Timeout, "one delivery of an order event gives up after this"),
		durationFlag(fs, &c.Keep, "order-events-keep", c.Keep, "a delivered order event is deleted from the outbox this long after its delivery (pending and dead ones never are); 0: kept for ever"),
		intFlag(fs, &c.Concurrency, "order-webhook-concurrency", c.Concurrency, "order events in flight at once from this process (one order's events always go one at a time)"),
	)
}

func (c *eventsConfig) enabled() bool {
	return c.WebhookURL != "" || c.NATSURL != "" || c.AMQPURL != ""
}

// check refuses settings that cannot work, before anything opens.
func (c *eventsConfig) check() error {
	if c.WebhookURL == "" && c.WebhookSecret != "" {
		return errors.New("order webhook secret set without --order-webhook-url")
	}
	if !c.enabled() {
		return nil
	}
	if c.WebhookURL != "" {
		if _, err := webhook.NewSender(c.WebhookURL, []byte(c.WebhookSecret), nil); err != nil {
			return err
		}
	}
	if c.NATSURL != "" {
		if err := nats.CheckEventSubject(c.Subject); err != nil {
			return err
		}
	}
	if c.AMQPURL != "" {
		if err := rabbitmq.CheckEventExchange(c.Exchange); err != nil {
			return err
		}
	}
	if c.Backoff <= 0 || c.MaxBackoff < c.Backoff || c.RetryFor <= 0 || c.Timeout <= 0 || c.Concurrency < 1 {
		return fmt.Errorf("order webhook: want 0 < backoff <= max backoff, a positive retry window and timeout, concurrency >= 1")
	}
	if c.Keep < 0 {
		return fmt.Errorf("order events keep %s: want 0 (for ever) or more", c.Keep)
	}
	if c.WebhookURL != "" && len(c.WebhookSecret) < webhooksig.MinSecretBytes {
		return fmt.Errorf("order webhook secret: want at least %d bytes", webhooksig.MinSecretBytes)
	}
	return nil
}

// startEventDelivery has order changes record their events, and starts
// this process's deliverer of them, and its pruner of delivered events.
// Every process that runs one shares the outbox safely: each event is
// leased to one deliverer at a time, and two pruners deleting the same
// rows delete each once.
func (m *Main) startEventDelivery(ctx context.Context, w *wired) error {
	cfg := &m.Config.Events
	if !cfg.enabled() {
		return nil
	}
	sink, err := m.eventSinks(ctx, w.reg)
	if err != nil {
		return err
	}
	events := sqlstore.NewEventStore(m.db)
	w.events = events
	w.reg.MustRegister(eventdelivery.NewStatsCollector(events.Stats, m.now))
	worker, err := eventdelivery.New(eventdelivery.Config{
		Outbox: events, Sink: sink, Owner: deliveryOwner(),
		Policy:  eventdelivery.Policy{FirstBackoff: cfg.Backoff, MaxBackoff: cfg.MaxBackoff, RetryFor: cfg.RetryFor},
		Timeout: cfg.Timeout, Lease: 2*cfg.Timeout + 2*time.Second, Concurrency: cfg.Concurrency,
		Currency: m.Config.Currency, Registerer: w.reg, Logger: m.Logger, Now: m.now,
	})
	if err != nil {
		return err
	}
	w.eventsWake = worker.Wake
	m.start(ctx, worker)
	if cfg.Keep > 0 {
		pruner, err := eventdelivery.NewPruner(eventdelivery.PruneConfig{
			Outbox: events, Keep: cfg.Keep, Every: m.pruneEvery, Registerer: w.reg, Logger: m.Logger, Now: m.now,
		})
		if err != nil {
			return err
		}
		m.start(ctx, pruner)
	}
	return nil
}

// eventSinks are where order events go: the webhook, brokers, or several,
// each counted in the metrics by its name.
func (m *Main) eventSinks(ctx context.Context, reg prometheus.Registerer) (eventdelivery.Sink, error) {
	cfg := &m.Config.Events
	var routes []eventdelivery.Route
	if cfg.WebhookURL != "" {
		sender, err := webhook.NewSender(cfg.WebhookURL, []byte(cfg.WebhookSecret), nil)
		if err != nil {
			return nil, err
		}
		routes = append(routes, eventdelivery.Route{Name: "webhook", Sink: sender})
	}
	if cfg.NATSURL != "" {
		ns, err := nats.NewEventSink(ctx, cfg.NATSURL, cfg.Subject, webhook.Encode)
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, func(context.Context) error { return ns.Close() })
		routes = append(routes, eventdelivery.Route{Name: "nats", Sink: ns})
	}
	if cfg.AMQPURL != "" {
		rs, err := rabbitmq.NewEventSink(ctx, cfg.AMQPURL, cfg.Exchange, webhook.Encode, rabbitmq.WithLogger(m.Logger))
		if err != nil {
			return nil, err
		}
		m.closers = append(m.closers, func(context.Context) error { return rs.Close() })
		routes = append(routes, eventdelivery.Route{Name: "rabbitmq", Sink: rs})
	}
	return eventdelivery.NewFanout(eventdelivery.FanoutConfig{Registerer: reg, Logger: m.Logger, Now: m.now}, routes...)
}

// deliveryOwner names this process in the outbox's leases.
func deliveryOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%.40s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// orderEventsAPI is the outbox as the admin API sees it: nil (no routes)
// without order events (no webhook and no broker sink).
func orderEventsAPI(events *sqlstore.EventStore) httpapi.OrderEvents {
	if events == nil {
		return nil
	}
	return events
}
