// Package nemesis is the partition suite's fault injector: Shopify's
// toxiproxy, run in-process, with one TCP proxy (a Link) between a node
// and a backend. A Link passes everything until told to fail in one of the
// ways a network fails: drop what goes one way or both (a partition, a
// host that vanished without a reset), add latency, reset connections.
// Heal ends the fault; connections whose bytes were dropped are closed
// then, as a stream with a hole in it must be.
//
// It is for tests only.
package nemesis

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Nemesis is one in-process toxiproxy server.
type Nemesis struct {
	server *toxiproxy.ApiServer
}

// New starts a toxiproxy server (no HTTP API: tests drive it directly).
// Its proxies stop when t ends.
func New(t testing.TB) *Nemesis {
	t.Helper()
	n := &Nemesis{server: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())}
	t.Cleanup(func() { _ = n.server.Collection.Clear() })
	return n
}

// Link is one proxy: a node's connections to one backend.
type Link struct {
	Name  string
	proxy *toxiproxy.Proxy
}

// Link starts a proxy named name on a free loopback port to upstream
// ("host:port").
func (n *Nemesis) Link(t testing.TB, name, upstream string) *Link {
	t.Helper()
	p := toxiproxy.NewProxy(n.server, name, "127.0.0.1:0", upstream)
	if err := n.server.Collection.Add(p, true); err != nil {
		t.Fatalf("nemesis: start proxy %s: %v", name, err)
	}
	return &Link{Name: name, proxy: p}
}

// LinkURL starts a Link to the host of rawURL (redis://, nats://, amqp://,
// postgres://, mysql://…) and returns it with rawURL rewritten to go
// through it.
func (n *Nemesis) LinkURL(t testing.TB, name, rawURL string) (*Link, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("nemesis: URL of %s has no host (%v)", name, err)
	}
	host := u.Host
	if u.Port() == "" {
		port := map[string]string{"redis": "6379", "nats": "4222", "amqp": "5672", "postgres": "5432", "postgresql": "5432", "mysql": "3306"}[u.Scheme]
		host += ":" + port
	}
	l := n.Link(t, name, host)
	u.Host = l.Addr()
	return l, u.String()
}

// Addr is the proxy's listening address.
func (l *Link) Addr() string { return l.proxy.Listen }

// Fault is one way a Link fails.
type Fault struct {
	Name   string
	toxics []string // toxiproxy toxic JSON
}

func (f Fault) String() string { return f.Name }

// timeout with 0 drops every byte on the ground and never closes.
func drop(stream string) string {
	return fmt.Sprintf(`{"name":"drop_%s","type":"timeout","stream":%q,"attributes":{"timeout":0}}`, stream, stream)
}

var (
	// Blackhole drops every byte both ways: a partition, or a host gone
	// without a reset. Connections stay open; new ones are accepted and
	// hear nothing.
	Blackhole = Fault{"blackholed", []string{drop("upstream"), drop("downstream")}}
	// DropReplies drops what the backend sends; requests arrive and are
	// carried out.
	DropReplies = Fault{"replies dropped", []string{drop("downstream")}}
	// DropRequests drops what the node sends.
	DropRequests = Fault{"requests dropped", []string{drop("upstream")}}
	// Reset resets every connection that sends a byte (TCP RST).
	Reset = Fault{"connections reset", []string{`{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":0}}`}}
)

// Slow delays every reply by latency ± jitter.
func Slow(latency, jitter time.Duration) Fault {
	return Fault{fmt.Sprintf("slow %s±%s", latency, jitter), []string{fmt.Sprintf(
		`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":%d,"jitter":%d}}`,
		latency.Milliseconds(), jitter.Milliseconds())}}
}

// Inject starts f on l.
func (l *Link) Inject(f Fault) error {
	for _, tx := range f.toxics {
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(tx)); err != nil {
			return fmt.Errorf("nemesis: %s on %s: %w", f.Name, l.Name, err)
		}
	}
	return nil
}

// Heal ends every fault on l.
func (l *Link) Heal() { l.proxy.Toxics.ResetToxics(context.Background()) }
