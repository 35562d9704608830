package httpapi

import (
	"net/http"
	"net/netip"
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
	serveBench(b, e.h, path, toks, http.StatusOK)
}
