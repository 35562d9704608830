package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// StartEmbedded runs a NATS server with JetStream inside this process,
// storing under dir, and returns a Broker on stream connected to it
// in-process (the server opens no port), and a shutdown func that closes
// the broker and stops the server. What was stored survives a restart on
// the same dir. WithSyncAlways makes what it confirms survive a power cut
// too.
func StartEmbedded(ctx context.Context, dir, stream string, opts ...Option) (*Broker, func(), error) {
	if dir == "" {
		return nil, nil, errors.New("nats: embedded server needs a storage directory")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, nil, err
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "seckill-embedded",
		DontListen: true,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: cfg.syncAlways,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	ns.Start()
	stopServer := func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
	if !ns.ReadyForConnections(10 * time.Second) {
		stopServer()
		return nil, nil, errors.New("nats: embedded server not ready after 10s")
	}
	nc, err := nats.Connect(ns.ClientURL(), append(cfg.connectOptions(stream), nats.InProcessServer(ns))...)
	if err != nil {
		stopServer()
		return nil, nil, fmt.Errorf("nats: connect in-process: %w", err)
	}
	b, err := newBroker(ctx, nc, stream, cfg)
	if err != nil {
		nc.Close()
		stopServer()
		return nil, nil, err
	}
	return b, func() {
		_ = b.Close()
		stopServer()
	}, nil
}
