package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// TestHostileClientsCannotFloodTheDrawOrTheQueue: lottery entries and
// queue joins pass the reservations' rate limits (per address, per buyer)
// and a queue place is capped per address (--queue-per-ip; an IPv6 client
// per /64). One address entering with 40 buyers' tokens gets the per-IP
// limit's 30 entries; one buyer coming from 20 addresses gets one entry,
// and every repeat answered with it from the node's memory before the
// limits, as a sold-out claim is (it costs no backend call). One address
// joining a queue with 40 buyers gets 10 places, and a /64 of addresses
// as many as one address.
func TestHostileClientsCannotFloodTheDrawOrTheQueue(t *testing.T) {
	e := startEngine(t, func(c *Config) {
		c.RateLimitIP, c.RateLimitUser, c.TrustedProxies = "30/1m", "3/1m", "127.0.0.1/32,::1/128"
		c.QueuePerIP = 10
	})
	lottery, _ := e.createLottery(100, 1, 30*time.Minute)
	queue := e.createQueue(100, 10, time.Now().Add(time.Minute))

	type tally map[int]int
	flood := func(path string, n int, buyer func(i int) string, from func(i int) string) tally {
		t.Helper()
		got := tally{}
		for i := range n {
			r := e.do("POST", path, e.token(buyer(i)), map[string]any{"qty": 1}, "X-Forwarded-For", from(i))
			got[r.status]++
			if r.status == http.StatusTooManyRequests && r.code() != seckill.ERATELIMITED {
				t.Errorf("%s: 429 with code %q", path, r.code())
			}
		}
		return got
	}
	many := func(prefix string) func(int) string { return func(i int) string { return fmt.Sprint(prefix, i) } }
	one := func(s string) func(int) string { return func(int) string { return s } }

	if got, want := flood("/api/v1/sales/"+lottery+"/entries", 40, many("bot-"), one("203.0.113.7")), (tally{201: 30, 429: 10}); !equalTally(got, want) {
		t.Errorf("one address, 40 buyers entering: %v, want %v (per-IP limit 30/1m)", got, want)
	}
	if got, want := flood("/api/v1/sales/"+lottery+"/entries", 20, one("hoarder"), many("198.51.100.")), (tally{201: 1, 200: 19}); !equalTally(got, want) {
		t.Errorf("one buyer, 20 addresses entering: %v, want %v (one entry, repeated from memory)", got, want)
	}
	n, err := e.m.stock.Lottery().EntrantCount(context.Background(), lottery)
	if err != nil || n != 31 {
		t.Errorf("entrants = %d, %v; want 31", n, err)
	}

	if got, want := flood("/api/v1/sales/"+queue+"/queue", 40, many("qbot-"), one("203.0.113.8")), (tally{200: 10, 429: 30}); !equalTally(got, want) {
		t.Errorf("one address, 40 buyers joining: %v, want %v (10 places a address, then the 30/1m limit)", got, want)
	}
	ipv6 := func(i int) string { return fmt.Sprintf("2001:db8:1:2::%x", i+1) }
	if got, want := flood("/api/v1/sales/"+queue+"/queue", 20, many("v6bot-"), ipv6), (tally{200: 10, 429: 10}); !equalTally(got, want) {
		t.Errorf("one /64, 20 buyers from 20 addresses joining: %v, want %v (10 places a /64)", got, want)
	}
	if got, want := flood("/api/v1/sales/"+queue+"/queue", 20, one("qhoarder"), many("192.0.2.")), (tally{200: 3, 429: 17}); !equalTally(got, want) {
		t.Errorf("one buyer, 20 addresses joining: %v, want %v (one place; per-buyer limit 3/1m)", got, want)
	}
	if n, err := e.m.stock.Queue().Length(context.Background(), queue); err != nil || n != 21 {
		t.Errorf("queue length = %d, %v; want 21 (10 + 10 + the hoarder's one)", n, err)
	}
}

func equalTally(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// metric is the value of the series written exactly as series (name and
// labels as /metrics writes them) in /metrics; -1 when there is none.
func (e *engine) metric(series string) float64 {
	e.t.Helper()
	resp, err := e.client.Get(e.base + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("%s: %q", series, l)
			}
			return f
		}
	}
	return -1
}
