package main

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/nats"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// TestOrderEventsToNATS: with a NATS JetStream sink and no webhook, a
// rush's events all land in the stream, each order's in order, on their
// type's subject, on each database.
func TestOrderEventsToNATS(t *testing.T) {
	natsURL := servicetest.NATS.URL(t)
	for _, b := range eventsBackends() {
		t.Run(b.name, func(t *testing.T) {
			subject := "seckill_test." + servicetest.UniqueName("ev")
			nc, err := natsgo.Connect(natsURL)
			if err != nil {
				t.Fatal(err)
			}
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = js.DeleteStream(ctx, nats.EventStream(subject))
				nc.Close()
			})
			redisURL, prefix := sharedRedis(t)
			e := startEngine(t, func(c *Config) {
				c.DatabaseURL, c.RedisURL, c.RedisKeyPrefix = b.url(t), redisURL, prefix
				c.DatabaseMaxConns = sqltest.MaxConns
				c.Events.NATSURL, c.Events.Subject = natsURL, subject
				c.Events.Backoff, c.Events.MaxBackoff = 20*time.Millisecond, 300*time.Millisecond
			})
			sale := e.liveSale(200, 1)
			claims := buyAndCancel(t, e.client, e.base, e.m.Config.JWTSecret, sale, 300, 3, "nats")

			// The stream is the shop: read it all, again and again, until
			// it holds every event the ledger calls for.
			s := newShop(t)
			var read uint64
			readStream := func() {
				cfg := jetstream.OrderedConsumerConfig{}
				if read > 0 {
					cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, read+1
				}
				cons, err := js.OrderedConsumer(context.Background(), nats.EventStream(subject), cfg)
				if err != nil {
					t.Error(err)
					return
				}
				batch, err := cons.FetchNoWait(1000)
				if err != nil {
					return
				}
				for m := range batch.Messages() {
					meta, _ := m.Metadata()
					read = meta.Sequence.Stream
					id, typ := s.consumed(m.Data())
					if want := subject + "." + seckill.OrderEventType(typ).Word(); m.Subject() != want {
						t.Errorf("%s on subject %s, want %s", id, m.Subject(), want)
					}
				}
			}
			var f figures
			servicetest.WaitFor(t, 2*time.Minute, "every event in the stream", func() bool {
				readStream()
				l, err := e.m.orders.Ledger.SaleLedger(context.Background(), sale)
				if err != nil || len(l.Orders)+len(l.Failed) < claims {
					return false
				}
				f = s.tally(l)
				return f.Missing == 0
			})
			f.check(t, "NATS sink/"+b.name)
		})
	}
}
