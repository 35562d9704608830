package servicetest

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a real service, for tests that cut the
// connection mid-run: Cut drops every open connection and refuses new ones
// until Restore. Clients see what they would in a real network outage.
// Blackhole is the nastier outage, a partition: connections stay open and
// new ones are accepted, but nothing goes through until Restore, so a
// client without deadlines hangs.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	down  bool
	black chan struct{} // non-nil while blackholed; closed by Restore
	held  chan struct{} // non-nil while replies are held; closed by Restore
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target
// ("host:port"). It stops in t.Cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// ProxyURL starts a Proxy to the host of rawURL (a service's URL, such as
// redis://…, amqp://… or postgres://…) and returns it with rawURL
// rewritten to go through it.
func ProxyURL(t testing.TB, rawURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("proxy: URL %q has no host (%v)", rawURL, err)
	}
	p := StartProxy(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		down, black := p.down, p.black
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		if black != nil {
			// Accepted and then silent, as a partitioned peer's SYN-ACK
			// from a middlebox would be; connected once the partition heals.
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				<-black
				p.connect(c)
			}()
			continue
		}
		p.connect(c)
	}
}

func (p *Proxy) connect(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	p.wg.Add(2)
	go p.pipe(up, c, false)
	go p.pipe(c, up, true)
}

// track registers a connection pair, or closes it if the proxy went down
// meanwhile.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// pipe copies src to dst; reply is the service's side, to the client.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// While blackholed, what was read is held (as TCP would keep
			// retransmitting it) and delivered after Restore; so are the
			// service's replies while they are held.
			p.mu.Lock()
			black, held := p.black, p.held
			p.mu.Unlock()
			if black != nil {
				<-black
			}
			if held != nil && reply {
				<-held
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every open connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	for _, c := range []*chan struct{}{&p.black, &p.held} { // what they held goes too
		if *c != nil {
			close(*c)
			*c = nil
		}
	}
}

// Retarget sends new connections to target from now on (a failover);
// open ones stay where they are until cut.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Blackhole stops forwarding: open connections and new ones stay up but
// carry nothing until Restore (or Cut).
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.black == nil {
		p.black = make(chan struct{})
	}
}

// HoldReplies lets the client's bytes through and holds the service's
// until Restore (or Cut): the service acts on a request and its answer
// does not arrive, as when a link fails between the two.
func (p *Proxy) HoldReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Restore accepts and forwards connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.down = false
	for _, c := range []*chan struct{}{&p.black, &p.held} {
		if *c != nil {
			close(*c)
			*c = nil
		}
	}
	p.mu.Unlock()
}
