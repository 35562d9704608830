package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
)

// DefaultEventExchange is the exchange order events are published to.
const DefaultEventExchange = "seckill.order_events"

// EventSink publishes order events for shops that consume from RabbitMQ,
// to an exchange: the shop's, if it declared one of that name, else a
// durable topic exchange the sink declares. One persistent message per
// event, routed by the type's last word (created, paid, cancelled, failed,
// refund_due, refunded), whose message id is the event's id (a redelivery
// carries the same one: consumers drop repeats by it) and whose body is
// the JSON the webhook sends.
//
// An event counts as delivered only once the broker has confirmed it and
// routed it to a queue. The shop binds its queue to the exchange before
// the sale (binding key "#" for every event); until a queue is bound,
// events stay in the outbox and are retried, as they are while the shop's
// webhook is down.
type EventSink struct {
	*link
	exchange string
	encode   func(seckill.OrderEvent) ([]byte, error)
}

// NewEventSink connects to url and finds or declares exchange; encode is the body
// of an event. Only the connection options (logger, reconnect back-off,
// heartbeat) apply.
func NewEventSink(ctx context.Context, url, exchange string, encode func(seckill.OrderEvent) ([]byte, error), opts ...Option) (*EventSink, error) {
	if err := CheckEventExchange(exchange); err != nil {
		return nil, err
	}
	cfg, err := configOf(opts)
	if err != nil {
		return nil, err
	}
	s := &EventSink{link: newLink(url, cfg, "order events "+exchange, "exchange", exchange), exchange: exchange, encode: encode}
	if err := s.start(ctx, s.declare); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckEventExchange refuses an exchange name the server would refuse or
// reserves (amq.*), before anything connects.
func CheckEventExchange(name string) error {
	if name == "" || len(name) > 255 || strings.HasPrefix(name, "amq.") ||
		strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return fmt.Errorf("rabbitmq: bad order event exchange %q: want 1-255 printable ASCII bytes, not amq.*", name)
	}
	return nil
}

// declare uses the exchange as it is if the shop declared it (its own
// type, arguments and policies), and declares it a durable topic exchange
// otherwise.
func (s *EventSink) declare(conn *amqp.Connection) error {
	probe, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	err = probe.ExchangeDeclarePassive(s.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	_ = probe.Close() // after a 404 the server has closed it already
	var amqpErr *amqp.Error
	if err == nil || !errors.As(err, &amqpErr) || amqpErr.Code != amqp.NotFound {
		return exchangeErr(s.exchange, err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	return exchangeErr(s.exchange, ch.ExchangeDeclare(s.exchange, amqp.ExchangeTopic, true, false, false, false, nil))
}

func exchangeErr(name string, err error) error {
	if err != nil {
		return fmt.Errorf("declare exchange %s: %w", name, err)
	}
	return nil
}

// Deliver publishes e and waits for the broker's confirm. It fails if the
// broker cannot be reached, does not confirm, or has no queue for e.
func (s *EventSink) Deliver(ctx context.Context, e seckill.OrderEvent) error {
	body, err := s.encode(e)
	if err != nil {
		return err
	}
	err = s.send(ctx, s.exchange, []outgoing{{e.Type.Word(), amqp.Publishing{
		MessageId:    e.ID,
		Type:         string(e.Type),
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		Timestamp:    e.At,
		Body:         body,
	}}})
	if err != nil {
		return fmt.Errorf("publish order event %s to exchange %s: %w", e.ID, s.exchange, err)
	}
	return nil
}
