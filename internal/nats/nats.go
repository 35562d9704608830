// Package nats is the NATS JetStream adapter of the broker port
// (seckill.Broker), on an external server by URL or on one embedded in the
// process (StartEmbedded).
//
// For a stream S:
//
//	stream S       subject S.msgs, file storage, work-queue retention: a
//	               message lives until a consumer acks it; Nats-Msg-Id is
//	               the reservation id, so a re-published event within the
//	               duplicate window is stored once
//	consumer work  durable pull consumer on S: explicit acks; a delivery
//	               not settled within AckWait (a crashed consumer) is
//	               redelivered
//	stream S_dead  subject S.dead, the dead letters, with durable consumer dead
//
// A Publish of N events stores one message, a pack (brokerpack.EncodePack),
// and the consumer unpacks it into N deliveries settled one by one. When
// the handler is done with a pack, the adapter stores the copies it needs
// (one pack per back-off delay with the events to retry, marked
// Seckill-Not-Before; one dead letter per event that spent MaxAttempts on
// S.dead) and then acks the pack. A pack that arrives before its
// Seckill-Not-Before is NAKed with the remaining delay without being
// handed out: that is the back-off, and that one early delivery is not
// counted as an attempt (up to maxDeferrals such early deliveries).
//
// Every pack carries the namespace of the deployment that published it. A
// consumer of another namespace puts it back untouched (a copy with a new
// Nats-Msg-Id, held back for a second) and acks its own delivery, so the
// owner's attempt counts are not spent by strangers.
//
// Two consumer settings are left alone on purpose. MaxDeliver is
// unlimited: at MaxDeliver the server merely stops delivering, and the
// message would sit in the stream seen by no one, whereas the adapter's own
// limit cannot strand a message even when the dead-letter publish fails
// (a message delivered more than MaxAttempts times is dead-lettered on
// arrival). BackOff is unset: the server uses it in place of AckWait as the
// deadline of each delivery, so it would also stretch every NakWithDelay by
// BackOff[n]-AckWait (measured: a 400ms retry arriving after 7s), and servers
// before 2.10 refuse it with an unlimited MaxDeliver.
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/brokerpack"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Headers on dead-letter copies.
const (
	hdrAttempts  = "Seckill-Attempts"
	hdrReason    = "Seckill-Reason"
	hdrNotBefore = "Seckill-Not-Before" // unix ms before which a pack is not handed out
)

// foreignPause is how long a pack of another namespace is held back before
// it is offered again, so two deployments on one stream do not spin.
const foreignPause = time.Second

// maxDeferrals is how many deliveries of a held-back pack (one with
// Seckill-Not-Before) are taken for early offers rather than crashes.
const maxDeferrals = 3

// fetchMore bounds the broker messages of one fetch after the first.
const fetchMore = 64

const (
	workConsumer = "work"
	deadConsumer = "dead"
	// publishChunk bounds the asynchronous publishes awaiting acks from one
	// call, well inside the client's pending limit.
	publishChunk = 2048
	// idlePoll is how long one pull request waits for a first message.
	idlePoll = 5 * time.Second
	// settleTimeout bounds the dead-letter publishes that settle a batch.
	settleTimeout = 30 * time.Second
)

// Option configures a Broker.
type Option func(*config)

type config struct {
	retry          brokerpack.RetryPolicy
	logger         *slog.Logger
	ackWait        time.Duration
	replicas       int
	publishTimeout time.Duration
	namespace      string
	syncAlways     bool
}

// pingInterval is how often the client pings the server.
const pingInterval = 5 * time.Second

// WithRetryPolicy sets the attempt limit and back-off (default
// brokerpack.DefaultRetryPolicy).
func WithRetryPolicy(p brokerpack.RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithLogger sets where consumer errors are logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithAckWait sets how long a delivery may go without word from its
// consumer before JetStream hands it to another (default 30s). A slow
// handler is not at risk: the adapter reports progress every AckWait/3.
func WithAckWait(d time.Duration) Option { return func(c *config) { c.ackWait = d } }

// WithNamespace sets the deployment's namespace, stamped on every pack
// published; packs of another namespace are left for their owner (default
// "default").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithSyncAlways makes the embedded server (StartEmbedded) fsync every
// write before it confirms it: a published pack survives a power cut, at
// one fsync per pack. Without it the server syncs every two minutes, and
// a confirmed pack survives only a crash of the process. It changes
// nothing on an external server, which has its own setting.
func WithSyncAlways(on bool) Option { return func(c *config) { c.syncAlways = on } }

// WithReplicas sets the streams' replica count on a clustered server
// (default 1).
func WithReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// Broker is a seckill.Broker on one JetStream stream. Safe for concurrent
// use.
type Broker struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	cfg     config
	stream  string
	subject string
	dead    string // dead-letter stream
	deadSub string
	work    jetstream.Consumer
	deadC   jetstream.Consumer

	closeOnce sync.Once
	closed    chan struct{}
	life      context.Context // cancelled by Close, to end pending fetches
	endLife   context.CancelFunc
}

var _ seckill.Broker = (*Broker)(nil)

// New connects to the NATS server at url, creates or updates the streams
// and consumers for stream, and returns a Broker. The connection redials on
// its own after a loss.
func New(ctx context.Context, url, stream string, opts ...Option) (*Broker, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, cfg.connectOptions(stream)...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	b, err := newBroker(ctx, nc, stream, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return b, nil
}

func newConfig(opts []Option) (config, error) {
	cfg := config{
		retry:          brokerpack.DefaultRetryPolicy(),
		logger:         slog.New(slog.DiscardHandler),
		ackWait:        30 * time.Second,
		replicas:       1,
		publishTimeout: 10 * time.Second,
		namespace:      "default",
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.retry.Validate(); err != nil {
		return cfg, fmt.Errorf("nats: %w", err)
	}
	if cfg.namespace == "" || len(cfg.namespace) > 100 {
		return cfg, fmt.Errorf("nats: namespace must be 1-100 bytes, got %q", cfg.namespace)
	}
	if cfg.ackWait < 100*time.Millisecond {
		return cfg, fmt.Errorf("nats: AckWait must be at least 100ms, got %s", cfg.ackWait)
	}
	return cfg, nil
}

// connectOptions keep the connection redialing forever and send its
// trouble to the logger (nats.go would print it to stderr).
func (c config) connectOptions(stream string) []nats.Option {
	return []nats.Option{
		nats.Name("seckill broker " + stream),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// A server that went silent (a cut network, a paused process) is
		// given up after two unanswered pings, about 10 s, not the
		// library's 4 minutes: the connection is then opened again.
		nats.PingInterval(pingInterval), nats.MaxPingsOutstanding(2),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.logger.Warn("nats: asynchronous error", "stream", stream, "err", err)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				c.logger.Warn("nats: disconnected; reconnecting", "stream", stream, "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			c.logger.Info("nats: reconnected", "stream", stream)
		}),
	}
}

func newBroker(ctx context.Context, nc *nats.Conn, stream string, cfg config) (*Broker, error) {
	// Stream names may not hold '.', '*', '>' or spaces; the subjects
	// derived from it must be single tokens.
	if stream == "" || len(stream) > 200 || strings.ContainsAny(stream, ".*> \t\r\n/\\") {
		return nil, fmt.Errorf("nats: bad stream name %q", stream)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(cfg.publishTimeout))
	if err != nil {
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	b := &Broker{
		nc:      nc,
		js:      js,
		cfg:     cfg,
		stream:  stream,
		subject: stream + ".msgs",
		dead:    stream + "_dead",
		deadSub: stream + ".dead",
		closed:  make(chan struct{}),
	}
	b.life, b.endLife = context.WithCancel(context.Background())
	for _, s := range []jetstream.StreamConfig{
		{Name: b.stream, Subjects: []string{b.subject}},
		{Name: b.dead, Subjects: []string{b.deadSub}},
	} {
		s.Retention = jetstream.WorkQueuePolicy
		s.Storage = jetstream.FileStorage
		s.Replicas = cfg.replicas
		if _, err := js.CreateOrUpdateStream(ctx, s); err != nil {
			return nil, fmt.Errorf("nats: stream %s: %w", s.Name, err)
		}
	}
	for _, c := range []struct {
		stream, name string
		dst          *jetstream.Consumer
	}{{b.stream, workConsumer, &b.work}, {b.dead, deadConsumer, &b.deadC}} {
		cons, err := js.CreateOrUpdateConsumer(ctx, c.stream, jetstream.ConsumerConfig{
			Durable:    c.name,
			AckPolicy:  jetstream.AckExplicitPolicy,
			AckWait:    cfg.ackWait,
			MaxDeliver: -1,
		})
		if err != nil {
			return nil, fmt.Errorf("nats: consumer %s on %s: %w", c.name, c.stream, err)
		}
		*c.dst = cons
	}
	return b, nil
}

func (b *Broker) isClosed() bool { return startstop.Closed(b.closed) }

// Close flushes pending acks and closes the connection. Safe to call twice.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		b.endLife()
		if b.nc.IsConnected() {
			_ = b.nc.FlushTimeout(time.Second)
		}
		b.nc.Close()
	})
	return nil
}

// Publish stores msgs on the stream as packs (one message per
// brokerpack.MaxPackEvents), sending them all before awaiting the acks (one
// round), and returns nil only when JetStream has acknowledged every one.
// The pack's id (brokerpack.PackID) is the Nats-Msg-Id, so publishing the
// same batch again within the duplicate window stores nothing new.
func (b *Broker) Publish(ctx context.Context, msgs []seckill.Message) error {
	if b.isClosed() {
		return fmt.Errorf("nats: publish: %w", seckill.ErrClosed)
	}
	if len(msgs) == 0 {
		return nil
	}
	var out []*nats.Msg
	for _, run := range brokerpack.SplitPacks(brokerpack.Packed(msgs, 1)) {
		out = append(out, b.packMsg(run, time.Time{}))
	}
	if err := b.send(ctx, b.stream, out); err != nil {
		return fmt.Errorf("nats: publish: %w", err)
	}
	return nil
}

// Requeue stores events on the work stream as packs that are handed out
// no sooner than notBefore, each counting as the attempt its Attempt says:
// the retry copies and crash returns of a broker in front of this one
// (internal/handoff), stored as this adapter stores its own.
func (b *Broker) Requeue(ctx context.Context, events []brokerpack.PackedMessage, notBefore time.Time) error {
	if b.isClosed() {
		return fmt.Errorf("nats: requeue: %w", seckill.ErrClosed)
	}
	var out []*nats.Msg
	for _, run := range brokerpack.SplitPacks(events) {
		out = append(out, b.packMsg(run, notBefore))
	}
	if err := b.send(ctx, b.stream, out); err != nil {
		return fmt.Errorf("nats: requeue: %w", err)
	}
	return nil
}

// DeadLetter stores letters on the dead-letter stream, as this adapter
// stores the events that spent their attempts.
func (b *Broker) DeadLetter(ctx context.Context, letters []seckill.DeadLetter) error {
	if b.isClosed() {
		return fmt.Errorf("nats: dead letter: %w", seckill.ErrClosed)
	}
	out := make([]*nats.Msg, len(letters))
	for i, dl := range letters {
		out[i] = b.deadMsg(dl)
	}
	if err := b.send(ctx, b.dead, out); err != nil {
		return fmt.Errorf("nats: dead letter: %w", err)
	}
	return nil
}

// deadMsg is dl as a message of the dead-letter stream.
func (b *Broker) deadMsg(dl seckill.DeadLetter) *nats.Msg {
	return &nats.Msg{Subject: b.deadSub, Data: dl.Message.Body, Header: nats.Header{
		jetstream.MsgIDHeader: []string{dl.Message.ID},
		hdrAttempts:           []string{strconv.Itoa(dl.Attempts)},
		hdrReason:             []string{headerSafe(dl.Reason)},
	}}
}

// packMsg is one pack for the work stream, held back until notBefore if
// that is set.
func (b *Broker) packMsg(run []brokerpack.PackedMessage, notBefore time.Time) *nats.Msg {
	h := nats.Header{jetstream.MsgIDHeader: []string{brokerpack.PackID(run)}}
	if !notBefore.IsZero() {
		h[hdrNotBefore] = []string{strconv.FormatInt(notBefore.UnixMilli(), 10)}
	}
	return &nats.Msg{Subject: b.subject, Data: brokerpack.EncodePack(b.cfg.namespace, run), Header: h}
}

// send publishes out asynchronously and waits for every ack. Each message
// names the stream it expects, so one that no stream (or the wrong one)
// captures fails instead of vanishing.
func (b *Broker) send(ctx context.Context, stream string, out []*nats.Msg) error {
	for len(out) > publishChunk {
		if err := b.send(ctx, stream, out[:publishChunk]); err != nil {
			return err
		}
		out = out[publishChunk:]
	}
	futures := make([]jetstream.PubAckFuture, 0, len(out))
	for _, m := range out {
		f, err := b.js.PublishMsgAsync(m, jetstream.WithExpectStream(stream))
		if err != nil {
			return fmt.Errorf("send message %d of %d: %w", len(futures)+1, len(out), err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("message %d of %d not stored: %w", i+1, len(out), err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for acks: %w", ctx.Err())
		}
	}
	return nil
}

// Consume implements seckill.Broker.
func (b *Broker) Consume(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.Delivery)) error {
	opts = opts.WithDefaults()
	return b.consumeLoop(ctx, b.work, opts, func(ctx context.Context, msgs []jetstream.Msg) {
		b.handleWork(ctx, msgs, opts, handle)
	})
}

// ConsumeDeadLetters implements seckill.Broker.
func (b *Broker) ConsumeDeadLetters(ctx context.Context, opts seckill.ConsumeOptions, handle func(ctx context.Context, batch []seckill.DeadLetter) error) error {
	return b.consumeLoop(ctx, b.deadC, opts.WithDefaults(), func(ctx context.Context, msgs []jetstream.Msg) {
		b.handleDead(ctx, msgs, handle)
	})
}

func (b *Broker) consumeLoop(ctx context.Context, cons jetstream.Consumer, opts seckill.ConsumeOptions, process func(context.Context, []jetstream.Msg)) error {
	// Fetches end when ctx does or the broker closes; handlers see ctx.
	fetchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.life, cancel)()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if b.isClosed() {
			return seckill.ErrClosed
		}
		batch, err := fetchBatch(fetchCtx, cons, opts)
		if b.isClosed() && ctx.Err() == nil {
			return seckill.ErrClosed
		}
		if ctx.Err() != nil {
			// Fetched but never handed out: let another consumer have
			// them now rather than after AckWait.
			for _, m := range batch {
				_ = m.Nak()
			}
			return nil
		}
		if err != nil {
			for _, m := range batch {
				_ = m.Nak()
			}
			if b.isClosed() {
				return seckill.ErrClosed
			}
			b.cfg.logger.Warn("nats: fetch failed; retrying", "stream", b.stream, "err", err)
			select {
			case <-time.After(250 * time.Millisecond):
			case <-ctx.Done():
			case <-b.closed:
			}
			continue
		}
		if len(batch) > 0 {
			process(ctx, batch)
		}
	}
}

// fetchBatch waits (a while) for a first message, then takes what else
// has arrived: up to opts.BatchSize events, counting a pack's events, with
// one more pull request that waits opts.Linger at most (by default not at
// all).
func fetchBatch(ctx context.Context, cons jetstream.Consumer, opts seckill.ConsumeOptions) ([]jetstream.Msg, error) {
	fctx, cancel := context.WithTimeout(ctx, idlePoll)
	defer cancel()
	first, err := cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		return nil, err
	}
	var batch []jetstream.Msg
	events := 0
	for m := range first.Messages() {
		batch = append(batch, m)
		events += brokerpack.PackLen(m.Data())
	}
	if err := first.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return batch, err
	}
	want := opts.BatchSize - events
	if len(batch) == 0 || want <= 0 || ctx.Err() != nil {
		return batch, nil
	}
	var rest jetstream.MessageBatch
	if opts.Linger > 0 {
		rest, err = cons.Fetch(min(want, fetchMore), jetstream.FetchMaxWait(opts.Linger))
	} else {
		rest, err = cons.FetchNoWait(min(want, fetchMore))
	}
	if err != nil {
		return batch, nil // the first message is worth handling anyway
	}
	for m := range rest.Messages() {
		batch = append(batch, m)
	}
	return batch, nil
}

// keepAlive tells JetStream that msgs are still being worked on, every
// AckWait/3, until the returned stop is called: a slow database must not
// make the batch look abandoned.
func (b *Broker) keepAlive(msgs []jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(b.cfg.ackWait / 3)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				for _, m := range msgs {
					_ = m.InProgress()
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// handleWork unpacks a batch of messages, hands the events of this
// namespace's packs to the handler, and settles each pack: retry packs and
// dead letters stored first, then the ack (brokerpack.Work, the algorithm
// RabbitMQ's consumer shares). Packs not yet due are NAKed for the rest of
// their delay; packs of another namespace are put back for their owner
// before the handler runs.
func (b *Broker) handleWork(ctx context.Context, msgs []jetstream.Msg, opts seckill.ConsumeOptions, handle func(context.Context, []seckill.Delivery)) {
	now := time.Now()
	taken := make([]brokerpack.Taken[jetstream.Msg], 0, len(msgs))
	for _, m := range msgs {
		delivered, notBefore := 1, int64(0)
		if md, err := m.Metadata(); err == nil {
			delivered = int(md.NumDelivered)
		}
		h := m.Headers()
		if v := h.Get(hdrNotBefore); v != "" {
			notBefore, _ = strconv.ParseInt(v, 10, 64)
			if wait := time.UnixMilli(notBefore).Sub(now); wait > 0 {
				_ = m.NakWithDelay(wait)
				continue
			}
		}
		crashes := delivered - 1
		if notBefore != 0 {
			// Early deliveries were held back, not crashed on: a pack
			// may be offered early more than once (several consumers,
			// a coarse NAK delay), and which deliveries those were is
			// not known. Up to maxDeferrals of them are taken for
			// deferrals, so a held-back pack's crash count starts late
			// but still bounds it.
			crashes = max(0, crashes-maxDeferrals)
		}
		taken = append(taken, brokerpack.Taken[jetstream.Msg]{Raw: m, ID: h.Get(jetstream.MsgIDHeader), Body: m.Data(), Crashes: crashes})
	}
	s, _ := brokerpack.Work(ctx, taken, opts, handle, brokerpack.Round[jetstream.Msg, *nats.Msg]{
		Namespace: b.cfg.namespace, Policy: b.cfg.retry,
		Logger: b.cfg.logger, Adapter: "nats", Where: "stream", WhereName: b.stream,
		PutBackForOwner: func(t brokerpack.Taken[jetstream.Msg]) *nats.Msg {
			return &nats.Msg{Subject: b.subject, Data: t.Body, Header: nats.Header{
				jetstream.MsgIDHeader: []string{fmt.Sprintf("%s~%s-%d", t.ID, b.cfg.namespace, now.UnixNano())},
				hdrNotBefore:          []string{strconv.FormatInt(now.Add(foreignPause).UnixMilli(), 10)},
			}}
		},
		PutBackFirst: func(copies []*nats.Msg, raws []jetstream.Msg) { b.putBack(ctx, copies, raws) },
		Around: func(mine []jetstream.Msg, n int, hand func()) bool {
			if n > 0 {
				stop := b.keepAlive(mine)
				hand()
				stop()
			}
			return true
		},
		Retry: func(_ time.Duration, due time.Time, run []brokerpack.PackedMessage) *nats.Msg {
			return b.packMsg(run, due)
		},
		Dead: b.deadMsg,
	})
	if len(s.Copies) > 0 {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		err := b.sendMixed(sctx, s.Copies)
		cancel()
		if err != nil {
			// The packs come back after the pause as one more delivery,
			// which counts as an attempt: at MaxAttempts+1 an event is
			// dead-lettered without bothering the handler again.
			b.cfg.logger.Error("nats: cannot store retry copies or dead letters; will retry", "stream", b.stream, "copies", len(s.Copies), "err", err)
			for _, m := range s.Moved {
				_ = m.NakWithDelay(b.cfg.retry.Backoff)
			}
			for _, m := range s.Acks {
				_ = m.Ack()
			}
			return
		}
	}
	for _, m := range s.Acks {
		_ = m.Ack()
	}
	for _, m := range s.Moved {
		_ = m.Ack()
	}
}

// sendMixed stores out, which holds messages for both streams.
func (b *Broker) sendMixed(ctx context.Context, out []*nats.Msg) error {
	var work, dead []*nats.Msg
	for _, m := range out {
		if m.Subject == b.deadSub {
			dead = append(dead, m)
		} else {
			work = append(work, m)
		}
	}
	if len(work) > 0 {
		if err := b.send(ctx, b.stream, work); err != nil {
			return err
		}
	}
	if len(dead) > 0 {
		return b.send(ctx, b.dead, dead)
	}
	return nil
}

// putBack stores copies of another namespace's packs, then acks the
// originals. If the copies cannot be stored the originals are NAKed for
// their owner (one delivery more on their count, which beats losing them).
func (b *Broker) putBack(ctx context.Context, copies []*nats.Msg, raws []jetstream.Msg) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := b.send(sctx, b.stream, copies); err != nil {
		b.cfg.logger.Error("nats: cannot put back another namespace's messages; NAKing them", "stream", b.stream, "err", err)
		for _, m := range raws {
			_ = m.NakWithDelay(foreignPause)
		}
		return
	}
	for _, m := range raws {
		_ = m.Ack()
	}
}

// headerSafe makes s fit in a NATS header value: one line, bounded.
func headerSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	if len(s) > 2048 {
		s = s[:2048]
	}
	return s
}

// handleDead hands dead letters to handle: acked on success, NAKed with a
// back-off on failure.
func (b *Broker) handleDead(ctx context.Context, msgs []jetstream.Msg, handle func(context.Context, []seckill.DeadLetter) error) {
	letters := make([]seckill.DeadLetter, len(msgs))
	for i, m := range msgs {
		h := m.Headers()
		attempts, _ := strconv.Atoi(h.Get(hdrAttempts))
		letters[i] = seckill.DeadLetter{
			Message:  seckill.Message{ID: h.Get(jetstream.MsgIDHeader), Body: m.Data()},
			Attempts: attempts,
			Reason:   h.Get(hdrReason),
		}
	}
	stop := b.keepAlive(msgs)
	err := handle(ctx, letters)
	stop()
	if err == nil {
		for _, m := range msgs {
			_ = m.Ack()
		}
		return
	}
	if ctx.Err() != nil {
		return // abandoned, like a crash
	}
	b.cfg.logger.Warn("nats: dead-letter handler failed; retrying later", "stream", b.dead, "count", len(msgs), "err", err)
	for _, m := range msgs {
		_ = m.NakWithDelay(b.cfg.retry.Delay(b.cfg.retry.MaxAttempts))
	}
}
