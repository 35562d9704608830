package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// link is one connection to RabbitMQ that redials on its own after a
// loss, declaring what its user needs on every new connection, and a pool
// of confirm-mode channels to publish on. The work queue's Broker and the
// order events' EventSink each have one. Publishes during an outage fail
// at once rather than wait or lie.
type link struct {
	url      string
	name     string // the connection's name, "seckill <name>"
	declare  func(*amqp.Connection) error
	logAttrs []any // what the log names the link by
	cfg      config

	mu     sync.Mutex
	conn   *amqp.Connection // nil while redialing
	up     chan struct{}    // closed while conn is usable
	idle   []*pubChannel    // confirm-mode channels of conn, free for reuse
	closed bool

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// maxIdleChannels bounds the pool of confirm-mode channels kept for reuse.
const maxIdleChannels = 8

// errNotConnected is returned by a publish while the link is redialing.
var errNotConnected = errors.New("not connected to rabbitmq (reconnecting)")

// newLink returns a link to url, not yet connected (start).
func newLink(url string, cfg config, name string, logAttrs ...any) *link {
	return &link{url: url, name: name, logAttrs: logAttrs, cfg: cfg, up: make(chan struct{}), done: make(chan struct{})}
}

// start connects, runs declare on the connection, and keeps it connected
// (and declared) until Close.
func (l *link) start(ctx context.Context, declare func(*amqp.Connection) error) error {
	l.declare = declare
	conn, err := l.dial(ctx)
	if err != nil {
		return err
	}
	l.setUp(conn)
	l.wg.Add(1)
	go l.supervise(conn)
	return nil
}

// dial opens a connection and declares what the link needs on it.
func (l *link) dial(ctx context.Context) (*amqp.Connection, error) {
	dialer := &net.Dialer{Timeout: l.cfg.dialTimeout}
	conn, err := amqp.DialConfig(l.url, amqp.Config{
		Heartbeat:  l.cfg.heartbeat,
		Locale:     "en_US",
		Properties: amqp.Table{"connection_name": "seckill " + l.name},
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// A deadline for the handshake; amqp091 clears it once open.
			return c, c.SetDeadline(time.Now().Add(l.cfg.dialTimeout))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: dial: %w", err)
	}
	if err := l.declare(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	return conn, nil
}

// supervise waits for conn to die and redials until it succeeds or the
// link is closed. It owns the connection's lifetime.
func (l *link) supervise(conn *amqp.Connection) {
	defer l.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		lost := conn.NotifyClose(make(chan *amqp.Error, 1))
		select {
		case err := <-lost:
			l.setDown(conn)
			if l.isClosed() {
				return
			}
			l.cfg.logger.Warn("rabbitmq connection lost; reconnecting", slices.Concat(l.logAttrs, []any{"err", err})...)
		case <-l.done:
			return
		}
		delay := l.cfg.reconnectMin
		for {
			select {
			case <-time.After(delay):
			case <-l.done:
				return
			}
			c, err := l.dial(ctx)
			if err == nil {
				conn = c
				break
			}
			l.cfg.logger.Warn("rabbitmq reconnect failed", slices.Concat(l.logAttrs, []any{"err", err, "retry_in", delay})...)
			delay = min(delay*2, l.cfg.reconnectMax)
		}
		if !l.setUp(conn) {
			conn.Close()
			return
		}
		l.cfg.logger.Info("rabbitmq reconnected", l.logAttrs...)
	}
}

// setUp installs a fresh connection; false when the link closed meanwhile.
func (l *link) setUp(conn *amqp.Connection) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conn = conn
	close(l.up)
	return true
}

// setDown forgets a dead connection and its pooled channels.
func (l *link) setDown(conn *amqp.Connection) {
	l.mu.Lock()
	if l.conn != conn {
		l.mu.Unlock()
		return
	}
	l.conn = nil
	l.up = make(chan struct{})
	idle := l.idle
	l.idle = nil
	l.mu.Unlock()
	for _, pc := range idle {
		pc.discard()
	}
}

// waitConn returns the live connection, waiting through an outage. It
// returns ctx.Err() or seckill.ErrClosed when waiting is over.
func (l *link) waitConn(ctx context.Context) (*amqp.Connection, error) {
	for {
		l.mu.Lock()
		conn, up, closed := l.conn, l.up, l.closed
		l.mu.Unlock()
		switch {
		case closed:
			return nil, seckill.ErrClosed
		case conn != nil && !conn.IsClosed():
			return conn, nil
		}
		select {
		case <-up:
		case <-l.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *link) isClosed() bool { return startstop.Closed(l.done) }

// Close closes the connection and stops reconnecting. Consumers return
// seckill.ErrClosed. Safe to call twice.
func (l *link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	conn, idle := l.conn, l.idle
	l.conn, l.idle = nil, nil
	close(l.done)
	l.mu.Unlock()

	for _, pc := range idle {
		pc.discard()
	}
	var err error
	if conn != nil && !conn.IsClosed() {
		if err = conn.Close(); errors.Is(err, amqp.ErrClosed) {
			err = nil
		}
	}
	l.wg.Wait()
	if err != nil {
		return fmt.Errorf("rabbitmq: close: %w", err)
	}
	return nil
}

// pubChannel is a confirm-mode channel used by one publish at a time, so
// the returns and confirms it sees belong to that publish alone.
type pubChannel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error // the server's reason, when it closes the channel
}

// why is the server's reason for closing the channel (a publish to an
// exchange deleted meanwhile: 404 NOT_FOUND, naming it), or "" if it gave
// none. The channel hands its reason over before it fails its confirms
// and closes its returns, so a publish that saw either finds it here.
func (pc *pubChannel) why() string {
	select {
	case err, ok := <-pc.closes:
		if ok && err != nil {
			return ": the server closed the channel: " + err.Error()
		}
	default:
	}
	return ""
}

// discard closes the channel without making the caller wait for the
// server's close-ok (a dead peer may take a heartbeat timeout to notice).
// The connection's reader goroutine may still be blocked handing it a
// basic.return, so returns are drained until the channel is gone.
func (pc *pubChannel) discard() {
	go func() {
		for range pc.returns {
		}
	}()
	go func() { _ = pc.ch.Close() }()
}

func (l *link) acquire() (*pubChannel, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, seckill.ErrClosed
	}
	conn := l.conn
	if conn == nil || conn.IsClosed() {
		l.mu.Unlock()
		return nil, errNotConnected
	}
	if n := len(l.idle); n > 0 {
		pc := l.idle[n-1]
		l.idle = l.idle[:n-1]
		l.mu.Unlock()
		return pc, nil
	}
	l.mu.Unlock()

	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("enable confirms: %w", err)
	}
	// The buffer lets the reader goroutine hand over a few returns while
	// the publisher is still sending; beyond it the reader waits for the
	// publisher, which reads returns while it waits for confirms.
	returns := ch.NotifyReturn(make(chan amqp.Return, 64))
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	return &pubChannel{conn: conn, ch: ch, returns: returns, closes: closes}, nil
}

func (l *link) release(pc *pubChannel, healthy bool) {
	l.mu.Lock()
	if healthy && !l.closed && pc.conn == l.conn && !pc.ch.IsClosed() && len(l.idle) < maxIdleChannels {
		l.idle = append(l.idle, pc)
		pc = nil
	}
	l.mu.Unlock()
	if pc != nil {
		pc.discard()
	}
}

// outgoing is one message and its routing key (on the default exchange,
// its queue).
type outgoing struct {
	key string
	msg amqp.Publishing
}

// send publishes out to exchange ("" the default exchange, where each
// key is a queue) on one confirm-mode channel and waits for every
// confirm. Messages are mandatory: one the broker cannot route (its queue
// deleted, no queue bound) comes back as basic.return before its ack and
// fails the call.
func (l *link) send(ctx context.Context, exchange string, out []outgoing) (err error) {
	pc, err := l.acquire()
	if err != nil {
		return err
	}
	healthy := false
	defer func() { l.release(pc, healthy) }()

	confirms := make([]*amqp.DeferredConfirmation, 0, len(out))
	for _, o := range out {
		dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, o.key, true, false, o.msg)
		if err != nil {
			return fmt.Errorf("send: %w%s", err, pc.why())
		}
		confirms = append(confirms, dc)
	}

	returned := 0
	var firstReturn amqp.Return
	noteReturn := func(r amqp.Return) {
		if returned == 0 {
			firstReturn = r
		}
		returned++
	}
	for i, dc := range confirms {
	wait:
		for {
			select {
			case <-dc.Done():
				if !dc.Acked() {
					return fmt.Errorf("message %d of %d not confirmed (nacked or connection lost)%s", i+1, len(confirms), pc.why())
				}
				break wait
			case r, open := <-pc.returns:
				if !open {
					return fmt.Errorf("channel closed before message %d of %d was confirmed%s", i+1, len(confirms), pc.why())
				}
				noteReturn(r)
			case <-ctx.Done():
				return fmt.Errorf("waiting for confirms: %w", ctx.Err())
			}
		}
	}
	// Every return precedes its message's ack on the wire, and the reader
	// goroutine delivers it before it processes that ack: whatever is not
	// consumed yet is in the buffer now.
	drainReturns(pc.returns, noteReturn)
	if returned > 0 {
		return fmt.Errorf("%d of %d messages unroutable, first %q to %q: %d %s",
			returned, len(out), firstReturn.MessageId, firstReturn.RoutingKey, firstReturn.ReplyCode, firstReturn.ReplyText)
	}
	healthy = true
	return nil
}

// drainReturns hands note every return already buffered in returns and
// stops when none is left. A channel closed by a connection lost after its
// confirms arrived has nothing more to give: receiving from it again would
// yield zero returns for ever, and the publisher would spin in this loop,
// its relay wedged with the outbox never drained.
func drainReturns(returns <-chan amqp.Return, note func(amqp.Return)) {
	for {
		select {
		case r, open := <-returns:
			if !open {
				return
			}
			note(r)
		default:
			return
		}
	}
}
