package nats

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-dev/seckill"
)

// EventSink publishes order events to JetStream for shops that consume
// from a broker: one message per event on "<subject>.<type's last word>"
// (seckill.order_events.created, .paid, …), in a stream of its own that
// keeps them for a week, each acknowledged by the server before it counts
// as delivered. The message id is the event's id, so the stream drops a
// redelivery within its duplicate window (two minutes).
type EventSink struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	encode  func(seckill.OrderEvent) ([]byte, error)
}

// DefaultEventSubject is the subject prefix of order events.
const DefaultEventSubject = "seckill.order_events"

// NewEventSink connects to url and creates or updates the stream of
// subject (named after it, dots as underscores). encode is the body of an
// event (the JSON the webhook sends).
func NewEventSink(ctx context.Context, url, subject string, encode func(seckill.OrderEvent) ([]byte, error)) (*EventSink, error) {
	if err := CheckEventSubject(subject); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, nats.Name("seckill order events"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: EventStream(subject), Subjects: []string{subject + ".*"},
		Storage: jetstream.FileStorage, MaxAge: 7 * 24 * time.Hour, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: order event stream: %w", err)
	}
	return &EventSink{nc: nc, js: js, subject: subject, encode: encode}, nil
}

// CheckEventSubject refuses a subject prefix that is not a plain subject
// (wildcards, spaces, empty tokens at either end), before anything connects.
func CheckEventSubject(subject string) error {
	if subject == "" || strings.ContainsAny(subject, "*> \t\r\n") || strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") {
		return fmt.Errorf("nats: bad order event subject %q", subject)
	}
	return nil
}

// EventStream is the name of the stream that keeps subject's events.
func EventStream(subject string) string { return strings.ReplaceAll(subject, ".", "_") }

// Deliver publishes e and waits for the server's acknowledgement.
func (s *EventSink) Deliver(ctx context.Context, e seckill.OrderEvent) error {
	body, err := s.encode(e)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(s.subject + "." + e.Type.Word())
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, e.ID)
	if _, err := s.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish order event %s to %s: %w", e.ID, msg.Subject, err)
	}
	return nil
}

// Close closes the connection.
func (s *EventSink) Close() error {
	s.nc.Close()
	return nil
}
