// Package servicetest finds the real services that adapter tests run
// against. Each address comes from an environment variable with a local
// default. A test whose service is unreachable skips with a message naming
// the service, unless SECKILL_TEST_REQUIRE_SERVICES=1 (as in CI), when it
// fails instead, so that CI can never pass by skipping. It also holds the
// one way tests wait for a condition (WaitFor, Eventually), and the keyset
// page of in-memory ledger fakes (PageAfter).
package servicetest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Service describes one external service tests may need.
type Service struct {
	Name    string // human name used in skip messages
	EnvVar  string // variable overriding the URL
	Default string // default URL
}

var (
	Redis    = Service{"Redis", "SECKILL_TEST_REDIS_URL", "redis://127.0.0.1:6379"}
	MySQL    = Service{"MariaDB/MySQL", "SECKILL_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"}
	Postgres = Service{"PostgreSQL", "SECKILL_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test"}
	RabbitMQ = Service{"RabbitMQ", "SECKILL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"}
	NATS     = Service{"NATS JetStream", "SECKILL_TEST_NATS_URL", "nats://127.0.0.1:4222"}
)

// Required reports whether tests must fail rather than skip when a service
// is unreachable.
func Required() bool { return os.Getenv("SECKILL_TEST_REQUIRE_SERVICES") == "1" }

var (
	mu        sync.Mutex
	reachable = map[string]error{}
)

// URL returns the service's URL, skipping (or failing, when services are
// required) the test if nothing answers at its address.
func (s Service) URL(t testing.TB) string {
	t.Helper()
	raw := s.Default
	if v := os.Getenv(s.EnvVar); v != "" {
		raw = v
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: bad URL in %s: %v", s.Name, s.EnvVar, err)
	}
	host := u.Host
	mu.Lock()
	err, seen := reachable[host]
	if !seen {
		var c net.Conn
		c, err = net.DialTimeout("tcp", host, 2*time.Second)
		if err == nil {
			c.Close()
		}
		reachable[host] = err
	}
	mu.Unlock()
	if err != nil {
		if Required() {
			t.Fatalf("%s is required (SECKILL_TEST_REQUIRE_SERVICES=1) but unreachable at %s: %v", s.Name, host, err)
		}
		t.Skipf("skipping: %s unreachable at %s (set %s to point elsewhere): %v", s.Name, host, s.EnvVar, err)
	}
	return raw
}

// UniqueName returns a name unique to this test run, made of lowercase
// letters, digits and '_', starting with prefix: for sale ids, key
// prefixes, queue names, databases and schemas, so tests can run in
// parallel against shared services without touching each other's data.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(prefix) + hex.EncodeToString(b[:])
}
