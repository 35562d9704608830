package httpapi

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRepeatedEntryHandler is a buyer's repeated lottery entry,
// answered from this node's memory (internal/repeats), with the rate
// limits configured as serve does, so any check the repeat pays for (the
// block list's) is in it. Compare with BenchmarkSoldOutHandler in the same
// run: the same requests and writers. others_blocked has another address
// on the block list, so the repeat's lookups are made (under a flood).
func BenchmarkRepeatedEntryHandler(b *testing.B) {
	b.Run("none_blocked", func(b *testing.B) { benchRepeatedEntry(b, false) })
	b.Run("others_blocked", func(b *testing.B) { benchRepeatedEntry(b, true) })
}

func benchRepeatedEntry(b *testing.B, othersBlocked bool) {
	e, _, _ := admissionEnv(b, func(c *Config) {
		c.LimitInReserve = true
		c.RateLimitIP, c.RateLimitUser = DefaultRateLimitIP, DefaultRateLimitUser
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	toks := benchTokens(b)
	path := "/api/v1/sales/" + testLotteryID + "/entries"
	for _, tok := range toks {
		w := e.do(req{method: "POST", path: path, body: `{"qty":1}`, auth: tok})
		if w.Code != http.StatusCreated {
			b.Fatalf("first entry: %d %s", w.Code, w.Body)
		}
	}
	if othersBlocked {
		now := e.clock.Now()
		e.srv.guard.blocked.put("ip:10.200.0.1", now.Add(time.Hour), now)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		body := strings.NewReader(`{"qty":1}`)
		r := newRequest("POST", path, `{"qty":1}`)
		r.RemoteAddr = "192.0.2.1:5555"
		r.Header.Set("Content-Type", "application/json")
		r.Body = io.NopCloser(body)
		w := &nullWriter{h: http.Header{}}
		for pb.Next() {
			n := next.Add(1)
			r.Header["Authorization"] = toks[n%benchUsers : n%benchUsers+1]
			r.Header["X-Forwarded-For"] = benchAddrs[n%int64(len(benchAddrs)) : n%int64(len(benchAddrs))+1]
			body.Reset(`{"qty":1}`)
			clear(w.h)
			w.status = 0
			e.h.ServeHTTP(w, r)
			if w.status != http.StatusOK {
				b.Errorf("status %d, want 200", w.status)
				return
			}
		}
	})
}
