package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

// BenchmarkScriptInstructions is what a claim costs Redis, counted in
// instructions by callgrind (redistest.Counted), which, unlike CPU time,
// a shared and busy machine does not change: per request, the textbook
// script (one EVALSHA each), the reserve script in batches of 32 without
// and with the API's two rate checks, and with an Idempotency-Key each (per address and per buyer, 10,000 of
// each, as in `seckill bench`), and the relay's read and ack of what the
// reserve script wrote (XREADGROUP of up to 500 entries, outbox_ack.lua),
// and a lottery's first entries and a waiting room's first joins (before
// the start) in batches of 32, without and with the two rate checks.
// Each runs once before it is counted, so that hashes and the script cache
// are warm. The ratios are to the textbook script's count in the same run:
//
//	go test -run '^$' -bench ScriptInstructions -benchtime 1x ./internal/redis
func BenchmarkScriptInstructions(b *testing.B) {
	const batches, batch, buyers = 200, 32, 10_000
	srv := redistest.StartCounted(b)
	ctx := context.Background()
	s := connect(b, "redis://"+srv.Addr)
	limit := seckill.RateLimit{Rate: 100_000, Period: time.Minute}

	textbook := func(sale *seckill.Sale) func() {
		script := rueidis.NewLuaScript(textbookLua)
		keys := s.keys(sale.ID)[:1]
		return func() {
			for range batches * batch {
				if err := script.Exec(ctx, s.client, keys, []string{"1"}).Error(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	next := 0
	reserve := func(checks int, keyed bool) func(sale *seckill.Sale) func() {
		return func(sale *seckill.Sale) func() {
			return func() {
				for range batches {
					reqs := make([]seckill.ReserveRequest, batch)
					for i := range reqs {
						u := strconv.Itoa(next % buyers)
						next++
						reqs[i] = seckill.ReserveRequest{ReservationID: seckill.NewReservationID(sale.ID, time.Now()), UserID: "user-" + u, Qty: 1}
						if keyed {
							reqs[i].IdempotencyKey = "key-" + strconv.Itoa(next)
						}
						if checks > 0 {
							reqs[i].RateChecks = []seckill.RateCheck{{Key: "ip:10.0." + u, Limit: limit}, {Key: "user:user-" + u, Limit: limit}}
						}
					}
					if !benchReserve(ctx, b, s, sale.ID, reqs) {
						b.FailNow()
					}
				}
			}
		}
	}
	drain := func(sale *seckill.Sale) func() {
		return func() {
			for {
				es, err := s.Outbox().ReadOutbox(ctx, sale.ID, "relay", "r1", 500, 0)
				if err != nil {
					b.Fatal(err)
				}
				if len(es) == 0 {
					return
				}
				ids := make([]string, 0, len(es))
				for i, e := range es {
					if i == 0 || e.StreamID != es[i-1].StreamID {
						ids = append(ids, e.StreamID)
					}
				}
				if err := s.Outbox().AckOutbox(ctx, sale.ID, "relay", ids); err != nil {
					b.Fatal(err)
				}
			}
		}
	}

	// enter is a lottery's entries in batches of 32, every one a new
	// buyer's (the stampede of first entries at the opening), with checks
	// rate checks as the API makes them.
	entrant := 0
	enter := func(checks int) func(sale *seckill.Sale) func() {
		return func(sale *seckill.Sale) func() {
			sale.Admission = seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: sale.EndAt}
			return func() {
				for range batches {
					reqs := make([]seckill.EntryRequest, batch)
					for i := range reqs {
						u := strconv.Itoa(entrant)
						entrant++
						reqs[i] = seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: "user-" + u, Qty: 1}
						if checks > 0 {
							ip := strconv.Itoa(entrant % buyers)
							reqs[i].RateChecks = []seckill.RateCheck{{Key: "ip:10.0." + ip, Limit: limit}, {Key: "user:user-" + u, Limit: limit}}
						}
					}
					res, err := s.Lottery().EnterBatch(ctx, sale, reqs)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						if !r.New {
							b.Fatalf("entry %+v: want a new entry", r)
						}
					}
				}
			}
		}
	}

	// join is a waiting room's joins before the start in batches of 32,
	// every one a new buyer's, from 10,000 addresses (no cap reached),
	// with checks rate checks.
	joiner := 0
	join := func(checks int) func(sale *seckill.Sale) func() {
		return func(sale *seckill.Sale) func() {
			sale.Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 100}
			sale.StartAt = time.Now().Add(time.Hour)
			return func() {
				for range batches {
					reqs := make([]seckill.QueueJoin, batch)
					for i := range reqs {
						u, ip := strconv.Itoa(joiner), strconv.Itoa(joiner%buyers)
						joiner++
						reqs[i] = seckill.QueueJoin{UserID: "user-" + u, IP: "10.0." + ip}
						if checks > 0 {
							reqs[i].RateChecks = []seckill.RateCheck{{Key: "ip:10.0." + ip, Limit: limit}, {Key: "user:user-" + u, Limit: limit}}
						}
					}
					res, err := s.Queue().JoinBatch(ctx, sale, 0, reqs)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range res {
						if r.Position < 1 {
							b.Fatalf("join %+v: want a place", r)
						}
					}
				}
			}
		}
	}

	cases := []struct {
		name string
		// fill, if set, runs before each run of work, uncounted.
		fill func(sale *seckill.Sale) func()
		work func(sale *seckill.Sale) func()
	}{
		{"textbook", nil, textbook},
		{"reserve", nil, reserve(0, false)},
		{"reserve-keyed", nil, reserve(0, true)},
		{"reserve-2-checks", nil, reserve(2, false)},
		{"relay", reserve(0, false), drain},
		{"enter-new", nil, enter(0)},
		{"enter-new-2-checks", nil, enter(2)},
		{"join-new", nil, join(0)},
		{"join-new-2-checks", nil, join(2)},
	}
	counts := map[string]float64{}
	for range b.N {
		for _, c := range cases {
			sale := benchSale()
			if _, err := s.StockStore().Preheat(ctx, sale); err != nil {
				b.Fatal(err)
			}
			work := c.work(sale)
			for run := range 2 { // the first warms the hashes and the script cache
				if c.fill != nil {
					c.fill(sale)()
				}
				n, err := srv.Count(work)
				if err != nil {
					b.Fatal(err)
				}
				if run == 1 {
					counts[c.name] = float64(n) / (batches * batch)
				}
			}
		}
	}
	for _, c := range cases {
		b.ReportMetric(counts[c.name], "instr/req:"+c.name)
		if c.name != "textbook" {
			b.ReportMetric(counts[c.name]/counts["textbook"], "ratio:"+c.name)
		}
	}
}
