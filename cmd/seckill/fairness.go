package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill/internal/jwt"
)

// fairnessOptions are the crowd of `seckill bench fairness`.
type fairnessOptions struct {
	Buyers   int
	Units    int
	BotShare float64
	Spread   time.Duration // people arrive over this after the opening instant
	MinLat   time.Duration // a person's latency, uniform in [MinLat, MaxLat]
	MaxLat   time.Duration
	Rate     int // the queue's admit_per_second
}

// fairnessResult is one admission mode's outcome.
type fairnessResult struct {
	Mode            string
	BotUnits, Units int
	Bots, Buyers    int
}

// runBenchFairness is `seckill bench fairness`: the same crowd, bots at
// the opening instant on a zero-latency path and people over the first
// seconds with 50-500 ms latency, against a first_come, a lottery and a
// queue sale of an embedded engine; it reports the bots' share of the
// units under each.
func runBenchFairness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := fairnessOptions{Buyers: 2000, Units: 100, BotShare: 0.10, Spread: 3 * time.Second,
		MinLat: 50 * time.Millisecond, MaxLat: 500 * time.Millisecond}
	var rounds int
	fs := flagSet("bench fairness", stderr)
	fs.IntVar(&o.Buyers, "buyers", o.Buyers, "buyers in the crowd")
	fs.IntVar(&o.Units, "units", o.Units, "units on sale (limit 1 a buyer)")
	fs.Float64Var(&o.BotShare, "bots", o.BotShare, "share of the crowd that are bots")
	fs.DurationVar(&o.Spread, "spread", o.Spread, "people arrive uniformly over this after the opening instant")
	fs.IntVar(&o.Rate, "admit-per-second", 0, "the queue sale's admission rate (0: units/5, the stock admitted over 5 s)")
	fs.IntVar(&rounds, "rounds", 3, "crowds per mode")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Buyers < 10 || o.Units < 1 || o.BotShare <= 0 || o.BotShare >= 1 || rounds < 1 {
		return fmt.Errorf("--buyers at least 10, --units at least 1, --bots in (0, 1), --rounds at least 1")
	}
	if o.Rate == 0 {
		o.Rate = max(o.Units/5, 1)
	}
	dir, err := os.MkdirTemp("", "seckill-fairness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := DefaultConfig()
	cfg.HTTPAddr, cfg.DataDir = "127.0.0.1:0", dir
	cfg.JWTSecret, cfg.AdminToken = randomSecret(), randomSecret()
	cfg.RateLimitIP, cfg.RateLimitUser, cfg.MaxInFlight = "off", "off", -1
	cfg.DrawInterval = 50 * time.Millisecond
	cfg.QueuePerIP = 0 // the whole crowd comes from 127.0.0.1
	m := &Main{Config: cfg, Stdout: io.Discard, Logger: slog.New(slog.DiscardHandler)}
	if err := m.Run(ctx); err != nil {
		return err
	}
	defer m.Close(context.Background())
	f := &fairness{o: o, base: "http://" + m.Addr(), cfg: cfg,
		client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 1024}}}
	fmt.Fprintf(stdout, "seckill bench fairness: %d buyers (%d%% bots at the opening instant, zero latency; people over %s with %s-%s latency), %d units, limit 1, queue admits %d/s, %d round(s)\n",
		o.Buyers, int(math.Round(o.BotShare*100)), o.Spread, o.MinLat, o.MaxLat, o.Units, o.Rate, rounds)
	fmt.Fprintf(stdout, "  %-10s  %-22s  %s\n", "mode", "bots' share of units", "each round")
	for _, mode := range []string{"first_come", "lottery", "queue"} {
		var shares []string
		var bot, all int
		for r := range rounds {
			res, err := f.run(ctx, mode, r)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			bot, all = bot+res.BotUnits, all+res.Units
			shares = append(shares, fmt.Sprintf("%d/%d", res.BotUnits, res.Units))
		}
		fmt.Fprintf(stdout, "  %-10s  %5.1f%% (%4d of %4d)   %s\n", mode, 100*float64(bot)/float64(max(all, 1)), bot, all, strings.Join(shares, " · "))
	}
	if n := f.failed.Load(); n > 0 {
		fmt.Fprintf(stdout, "  %d requests failed in transport (retried)\n", n)
	}
	p := o.BotShare
	sd := math.Sqrt(p * (1 - p) / float64(o.Units*rounds))
	fmt.Fprintf(stdout, "  the bots' share of the crowd is %.0f%%; by binomial chance alone a fair draw of %d units lands within %.1f%%-%.1f%% (2 sd)\n",
		100*p, o.Units*rounds, 100*max(p-2*sd, 0), 100*(p+2*sd))
	return nil
}

type fairness struct {
	failed atomic.Int64 // transport errors, each retried
	o      fairnessOptions
	base   string
	cfg    Config
	client *http.Client
}

// call sends one request and returns its status and JSON body.
func (f *fairness) call(method, path, user string, body any, hdr ...string) (int, map[string]any) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.base+path, rd)
	if user != "" {
		tok, _ := jwt.Sign([]byte(f.cfg.JWTSecret), user, time.Hour, time.Now())
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	var (
		resp *http.Response
		err  error
	)
	raw, _ := json.Marshal(body)
	for try := 0; ; try++ {
		if body != nil {
			req.Body = io.NopCloser(bytes.NewReader(raw))
		}
		if resp, err = f.client.Do(req); err == nil || try == 4 {
			break
		}
		f.failed.Add(1)
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// run plays one crowd against a fresh sale in mode.
func (f *fairness) run(ctx context.Context, mode string, round int) (fairnessResult, error) {
	sale, open, err := f.createSale(mode, round)
	if err != nil {
		return fairnessResult{}, err
	}
	crowd, bots := f.crowd(sale, open, round)
	var botUnits, units atomic.Int64
	won := func(b fairBuyer) {
		units.Add(1)
		if b.bot {
			botUnits.Add(1)
		}
	}
	var wg sync.WaitGroup
	for _, b := range crowd {
		wg.Go(func() { f.play(ctx, mode, sale, b, won) })
	}
	wg.Wait()
	if mode == "lottery" {
		if err := f.lotteryWinners(sale, crowd, won); err != nil {
			return fairnessResult{}, err
		}
	}
	return fairnessResult{Mode: mode, BotUnits: int(botUnits.Load()), Units: int(units.Load()), Bots: bots, Buyers: f.o.Buyers}, nil
}

// createSale creates a fresh sale in mode and returns it with its opening
// instant: when the sale takes its first request, the start for
// first_come and lottery, the waiting room's opening for a queue (whose
// sale starts once the crowd is in).
func (f *fairness) createSale(mode string, round int) (sale string, open time.Time, err error) {
	o := f.o
	open = time.Now().Add(time.Second)
	start, end := open, open.Add(time.Hour)
	sale = fmt.Sprintf("fair-%s-%d-%d", strings.ReplaceAll(mode, "_", ""), round, time.Now().UnixNano()%1e9)
	body := map[string]any{"id": sale, "name": "drop", "price_cents": 100, "stock": o.Units, "per_user_limit": 1}
	switch mode {
	case "lottery":
		body["admission"] = map[string]any{"mode": "lottery", "entries_close_at": open.Add(o.Spread + o.MaxLat + time.Second).Format(time.RFC3339Nano)}
	case "queue":
		start = open.Add(o.Spread + o.MaxLat + time.Second)
		body["admission"] = map[string]any{"mode": "queue", "admit_per_second": o.Rate}
	}
	if mode == "queue" && f.cfg.QueueOpensBefore < start.Sub(open) {
		return "", open, fmt.Errorf("the queue opens %s before the start; the crowd needs %s", f.cfg.QueueOpensBefore, start.Sub(open))
	}
	body["start_at"], body["end_at"] = start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano)
	req, _ := json.Marshal(body)
	hreq, _ := http.NewRequest("POST", f.base+"/admin/v1/sales", bytes.NewReader(req))
	hreq.Header.Set("Authorization", "Bearer "+f.cfg.AdminToken)
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(hreq)
	if err != nil {
		return "", open, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", open, fmt.Errorf("create sale: %s", resp.Status)
	}
	return sale, open, nil
}

// fairBuyer is one of the crowd: a bot arrives at the opening instant with
// no latency, a person over the first seconds with some.
type fairBuyer struct {
	user    string
	bot     bool
	arrival time.Time
	latency time.Duration
}

// crowd draws the round's buyers; the first bots of them are bots.
func (f *fairness) crowd(sale string, open time.Time, round int) (crowd []fairBuyer, bots int) {
	o := f.o
	bots = int(math.Round(float64(o.Buyers) * o.BotShare))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(round)))
	crowd = make([]fairBuyer, o.Buyers)
	for i := range crowd {
		b := fairBuyer{user: fmt.Sprintf("%s-b%d", sale, i), bot: i < bots, arrival: open}
		if !b.bot {
			b.arrival = open.Add(time.Duration(rng.Int64N(int64(o.Spread))))
			b.latency = o.MinLat + time.Duration(rng.Int64N(int64(o.MaxLat-o.MinLat)))
		}
		crowd[i] = b
	}
	return crowd, bots
}

// play is one buyer at the sale: arrive, then try as the mode asks.
func (f *fairness) play(ctx context.Context, mode, sale string, b fairBuyer, won func(fairBuyer)) {
	// A request travels latency/2 each way: it is sent at arrival, lands
	// latency/2 later, its answer is seen after another latency/2.
	send := func(method, path string, body any, hdr ...string) (int, map[string]any) {
		time.Sleep(b.latency / 2)
		st, out := f.call(method, path, b.user, body, hdr...)
		time.Sleep(b.latency / 2)
		return st, out
	}
	time.Sleep(time.Until(b.arrival))
	// One Idempotency-Key a buyer, as a client must send to retry a claim:
	// a claim answered try_later (made, but not yet stored durably in
	// time) is retried with it and gets its reservation back. Without it
	// the retry was a second claim, refused limit_exceeded (or sold_out
	// from the flag) although the buyer held a unit: a first round under
	// load once counted 0 of 100 units sold.
	key := "claim-" + b.user
	switch mode {
	case "first_come":
		for ctx.Err() == nil {
			st, out := send("POST", "/api/v1/sales/"+sale+"/reservations", map[string]any{"qty": 1}, "Idempotency-Key", key)
			if st == http.StatusAccepted {
				won(b)
				return
			}
			if !retryable(out) { // a bot a hair early retries at once
				return
			}
		}
	case "lottery":
		for ctx.Err() == nil {
			if _, out := send("POST", "/api/v1/sales/"+sale+"/entries", map[string]any{"qty": 1}); !retryable(out) {
				return
			}
		}
	case "queue":
		poll := time.Second
		if b.bot {
			poll = 100 * time.Millisecond
		}
		f.queueBuyer(ctx, sale, key, poll, send, func() { won(b) })
	}
}

// lotteryWinners waits for the draw, then counts each buyer who won.
func (f *fairness) lotteryWinners(sale string, crowd []fairBuyer, won func(fairBuyer)) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, d := f.call("GET", "/api/v1/sales/"+sale+"/draw", "", nil); d["drawn"] == true {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the draw did not run within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, b := range crowd {
		if _, r := f.call("GET", "/api/v1/sales/"+sale+"/entries/mine", b.user, nil); r["status"] == "won" {
			won(b)
		}
	}
	return nil
}

// queueBuyer joins, polls until admitted or sold out, then claims with
// the ticket.
// A person's page polls every second, a bot every 100 ms.
func (f *fairness) queueBuyer(ctx context.Context, sale, key string, poll time.Duration, send func(method, path string, body any, hdr ...string) (int, map[string]any), won func()) {
	for {
		st, out := send("POST", "/api/v1/sales/"+sale+"/queue", nil)
		if st == http.StatusOK {
			break
		}
		if !retryable(out) || ctx.Err() != nil {
			return
		}
	}
	for ctx.Err() == nil {
		_, q := send("GET", "/api/v1/sales/"+sale+"/queue/mine", nil)
		if q["sold_out"] == true || q == nil {
			return
		}
		if tk, _ := q["ticket"].(string); tk != "" {
			for ctx.Err() == nil {
				st, out := send("POST", "/api/v1/sales/"+sale+"/reservations", map[string]any{"qty": 1}, "Admission-Ticket", tk, "Idempotency-Key", key)
				if st == http.StatusAccepted {
					won()
				}
				if !retryable(out) {
					return
				}
			}
			return
		}
		time.Sleep(poll)
	}
}

// retryable reports whether an answer asks to try again: not open yet
// (a hair early), or a backend busy for a moment.
func retryable(body map[string]any) bool {
	switch code(body) {
	case "not_started", "try_later", "unavailable", "overloaded", "internal":
		return true
	}
	return false
}

func code(body map[string]any) string {
	if e, ok := body["error"].(map[string]any); ok {
		c, _ := e["code"].(string)
		return c
	}
	return ""
}

func randomSecret() string {
	b := make([]byte, 32)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}
