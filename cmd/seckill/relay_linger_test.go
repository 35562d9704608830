package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestGatedClaimsDoNotWaitForTheLinger: over the in-process stock store a
// claim is answered only once the relay has stored it in the broker
// (#36), so there the relay must not linger between publishes, whatever
// --relay-linger says: with an hour's linger, the second of two claims
// made one after the other would wait out the hour (here: the request
// budget).
func TestGatedClaimsDoNotWaitForTheLinger(t *testing.T) {
	e := startEngine(t, func(c *Config) {
		c.RelayLinger = time.Hour
		c.RequestBudget = 10 * time.Second
	})
	if e.m.Config.RedisURL != "" {
		t.Fatal("the embedded default has no Redis URL")
	}
	sale := e.liveSale(10, 1)
	for i := range 3 {
		user := fmt.Sprint("linger-", i)
		if r := e.reserve(sale, e.token(user), 1, ""); r.status != http.StatusAccepted {
			t.Fatalf("claim %d: %d %v", i, r.status, r.body)
		}
	}
}
