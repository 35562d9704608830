// Package rush drives a flash-sale rush against seckill's HTTP API, as
// `seckill demo` and `seckill bench rush` run it: it creates and preheats a
// sale, releases a crowd of buyers at its start instant over keep-alive
// connections (internal/loadgen), polls every claim until it is an order,
// and reports the outcome with the two numbers that must be zero:
// oversold, and claimed without an order.
package rush

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/loadgen"
	"github.com/seckill-dev/seckill/internal/startstop"
)

// Options describe one flash sale and its crowd.
type Options struct {
	URLs        []string // base URLs of the API nodes; buyers are spread over them
	AdminToken  string
	JWTSecret   string
	Stock       int
	Buyers      int
	Concurrency int // connections, hence buyers in flight at once
	Limit       int // per-user limit of the sale; every buyer asks for one unit
	// Lead is how long after its creation the sale starts: time to
	// preheat it and open every connection before the start instant.
	Lead time.Duration
	// OrderTimeout is how long after the start every claim may take to
	// become an order before it counts as claimed without one.
	OrderTimeout time.Duration
	// PollInterval is how often a claimed reservation is polled.
	PollInterval time.Duration
	// IdempotencyKeys makes every buyer send an Idempotency-Key. A keyed
	// request always reaches Redis (it may be the retry of the request
	// that took the last unit), so the node's sold-out flag cannot
	// answer it: the crowd after the sell-out costs a script call each.
	IdempotencyKeys bool

	Backend    string    // the backends, for the report
	ProgressTo io.Writer // where the live progress line goes
	Observers  []func(Progress)
}

// DefaultOptions is the demo's sale: 10,000 buyers for 200 units.
func DefaultOptions() Options {
	return Options{
		Stock: 200, Buyers: 10_000, Concurrency: 256, Limit: 1,
		Lead: 2 * time.Second, OrderTimeout: 2 * time.Minute, PollInterval: 100 * time.Millisecond,
	}
}

// Validate checks the options, naming the flags of the commands that set
// them.
func (o *Options) Validate() error {
	switch {
	case o.Stock < 1:
		return errors.New("--stock must be at least 1")
	case o.Buyers < 1:
		return errors.New("--buyers must be at least 1")
	case o.Concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case o.Limit < 1:
		return errors.New("--limit must be at least 1")
	case o.Lead < 100*time.Millisecond:
		return errors.New("--lead must be at least 100ms")
	case o.PollInterval <= 0 || o.OrderTimeout <= 0:
		return errors.New("--poll-interval and --order-timeout must be positive")
	}
	return nil
}

// Progress is one tick of a running rush.
type Progress struct {
	Elapsed   time.Duration `json:"elapsed_ns"` // since the start instant
	Answered  int64         `json:"answered"`
	Buyers    int           `json:"buyers"`
	Sold      int64         `json:"sold"` // claims answered so far
	Stock     int           `json:"stock"`
	Remaining int64         `json:"remaining"` // as the public sale shows it; -1 unknown
	Rate      float64       `json:"requests_per_sec"`
	Persisted int64         `json:"orders_persisted"`
}

// Report is the outcome of a rush, printed as text or JSON.
type Report struct {
	SaleID      string   `json:"sale_id"`
	URLs        []string `json:"urls"`
	Backends    string   `json:"backends,omitempty"`
	Stock       int      `json:"stock"`
	Buyers      int      `json:"buyers"`
	Concurrency int      `json:"concurrency"`
	Limit       int      `json:"per_user_limit"`
	Keys        bool     `json:"idempotency_keys"`

	// Answered buyers got an HTTP answer. Unanswered buyers' requests
	// reached the engine whole and got no answer (the connection broke or
	// timed out while waiting). ClientFailures never reached it: the dial
	// failed or the connection broke while the request was written, the
	// load generator's failure, not the engine's.
	Answered       int64            `json:"answered"`
	Unanswered     int64            `json:"unanswered"`
	ClientFailures int64            `json:"client_failures"`
	Outcomes       map[string]int64 `json:"outcomes"` // "202 claimed", "409 sold_out", …
	Server5xx      int64            `json:"server_5xx"`
	// NotStartedRetries counts buyers' tries that came before the start
	// by the server's clock and were sent again.
	NotStartedRetries int64 `json:"not_started_retries"`
	Claimed           int64 `json:"claimed"`

	SoldOut            bool    `json:"sold_out"`
	SoldOutMS          float64 `json:"sold_out_ms,omitempty"` // start instant → last unit claimed
	AllAnsweredMS      float64 `json:"all_answered_ms"`
	AllPersistedMS     float64 `json:"all_persisted_ms,omitempty"` // start → last claim seen as an order
	RequestsPerSec     float64 `json:"requests_per_sec"`
	PollIntervalMS     float64 `json:"poll_interval_ms"`
	OrdersPersisted    int64   `json:"orders_persisted"`
	OrdersFailed       int64   `json:"orders_failed"`
	OrdersStillPending int64   `json:"orders_still_pending"`

	// Latency is per reservation request, from send to answer; TimeToAnswer
	// is from the start instant to a buyer's answer, the wait in the
	// crowd included.
	Latency      loadgen.Summary `json:"latency"`
	TimeToAnswer loadgen.Summary `json:"time_to_answer"`

	RemainingPublic int64 `json:"remaining_public"` // GET /api/v1/sales/{id}; -1 unknown
	UnsoldDatabase  int64 `json:"unsold_database"`  // GET /admin/v1/sales/{id}; -1 unknown

	Reconciliation Reconciliation `json:"reconciliation"`

	Oversold            int64 `json:"oversold"`
	ClaimedWithoutOrder int64 `json:"claimed_without_order"`
	OK                  bool  `json:"ok"`
}

// Reconciliation is what the reconciliation endpoint said after the rush.
type Reconciliation struct {
	Available bool            `json:"available"`
	Status    int             `json:"status,omitempty"`
	Oversold  int64           `json:"oversold"`
	Balanced  bool            `json:"balanced"`
	Report    json.RawMessage `json:"report,omitempty"`
}

// winner is a claimed reservation and the token of its buyer.
type winner struct{ id, token string }

// connectAhead is how long before the start instant the buyers'
// connections are opened: long enough to dial them all, short of any
// server's header timeout (5 s on seckill's), which closes a connection
// that sends nothing, however long the lead.
const connectAhead = time.Second

// Run creates a sale on opts.URLs[0], releases the buyers at its start
// instant, polls every claim until it is an order, and checks the result.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(opts.URLs) == 0 || opts.AdminToken == "" || opts.JWTSecret == "" {
		return nil, errors.New("a rush needs at least one URL, the admin token and the JWT secret")
	}
	targets := make([]loadgen.Target, len(opts.URLs))
	for i, u := range opts.URLs {
		t, err := loadgen.ParseTarget(u)
		if err != nil {
			return nil, err
		}
		targets[i] = t
	}
	admin := apiclient.New(opts.URLs[0])
	defer admin.Close()

	// Tokens first: minting 100,000 of them takes a moment, which must
	// not eat into the lead.
	run := runID()
	tokens, err := mintTokens(opts, run)
	if err != nil {
		return nil, err
	}
	saleID := "rush-" + run
	start := time.Now().Add(opts.Lead).Truncate(time.Millisecond)
	if err := createSale(ctx, admin, opts, saleID, start); err != nil {
		return nil, err
	}
	conns := make([]*loadgen.Conn, opts.Concurrency)
	for i := range conns {
		conns[i] = loadgen.NewConn(targets[i%len(targets)])
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err := connectBefore(ctx, conns, start.Add(-connectAhead)); err != nil {
		return nil, err
	}
	if time.Now().After(start) {
		return nil, fmt.Errorf("setting up took longer than --lead %s; give it more", opts.Lead)
	}
	r := &rusher{opts: opts, targets: targets, tokens: tokens, saleID: saleID, start: start,
		outcomes: map[string]int64{}, winners: make(chan winner, opts.Buyers),
		latency: loadgen.NewHistogram(), toAnswer: loadgen.NewHistogram(), conns: conns}
	res, err := r.rush(ctx)
	if err != nil {
		return nil, err
	}
	rep := r.report(res)
	r.check(ctx, admin, rep)
	return rep, nil
}

// mintTokens signs one buyer token per buyer of the run.
func mintTokens(opts Options, run string) ([]string, error) {
	tokens := make([]string, opts.Buyers)
	now := time.Now()
	for i := range tokens {
		tok, err := jwt.Sign([]byte(opts.JWTSecret), "rush-"+run+"-"+strconv.Itoa(i), 2*time.Hour, now)
		if err != nil {
			return nil, err
		}
		tokens[i] = tok
	}
	return tokens, nil
}

// createSale creates the rush's sale, starting at start, and preheats it.
func createSale(ctx context.Context, admin *apiclient.Client, opts Options, saleID string, start time.Time) error {
	var created map[string]any
	status, err := admin.Do(ctx, "POST", "/admin/v1/sales", opts.AdminToken, map[string]any{
		"id": saleID, "name": "Tea gift set (rush)", "price_cents": 9900, "stock": opts.Stock,
		"per_user_limit": opts.Limit, "start_at": start.UTC().Format(time.RFC3339Nano),
		"end_at": start.Add(time.Hour).UTC().Format(time.RFC3339Nano),
	}, &created)
	if err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	if status != http.StatusCreated {
		return fmt.Errorf("create sale: answered %d %v", status, created)
	}
	// Preheat on demand: the node that took the create preheats a sale due
	// soon by itself, but any node must find it loaded at the start.
	if status, err := admin.Do(ctx, "POST", "/admin/v1/sales/"+saleID+"/preheat", opts.AdminToken, nil, nil); err != nil || status != http.StatusOK {
		return fmt.Errorf("preheat sale: %d %v", status, err)
	}
	return nil
}

// connectBefore waits until at, then opens every connection, a few at a
// time, so that the crowd does not dial at the start instant.
func connectBefore(ctx context.Context, conns []*loadgen.Conn, at time.Time) error {
	if err := startstop.Sleep(ctx, time.Until(at)); err != nil {
		return err
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for range min(len(conns), 32) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(conns)); i = next.Add(1) - 1 {
				if err := conns[i].Connect(); err != nil {
					errMu.Lock()
					first = cmp.Or(first, fmt.Errorf("connect to %s: %w", conns[i].Target.Addr, err))
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// rush releases the buyers at the start instant, with the pollers and the
// progress line running beside them, and returns when every buyer is
// answered and every claim settled (or the order timeout passed).
func (r *rusher) rush(ctx context.Context) (loadgen.Result, error) {
	pollCtx, cancelPolls := context.WithDeadline(ctx, r.start.Add(r.opts.OrderTimeout))
	defer cancelPolls()
	var polls sync.WaitGroup
	for i := range pollers(r.opts) {
		polls.Go(func() { r.poll(pollCtx, loadgen.NewConn(r.targets[i%len(r.targets)])) })
	}
	tickerDone := make(chan struct{})
	var ticks sync.WaitGroup
	ticks.Go(func() { r.showProgress(ctx, loadgen.NewConn(r.targets[0]), tickerDone) })

	res, err := loadgen.Run(ctx, loadgen.Options{Workers: r.opts.Concurrency, Requests: int64(r.opts.Buyers), Start: r.start}, r.buy)
	close(r.winners)
	if err == nil {
		err = ctx.Err() // interrupted: no report on half a rush
	}
	if err != nil {
		cancelPolls()
	}
	polls.Wait()
	close(tickerDone)
	ticks.Wait()
	return res, err
}

// report is what the rush counted, before check reads the sale back.
func (r *rusher) report(res loadgen.Result) *Report {
	o := r.opts
	rep := &Report{
		SaleID: r.saleID, URLs: o.URLs, Backends: o.Backend, Stock: o.Stock, Buyers: o.Buyers,
		Concurrency: o.Concurrency, Limit: o.Limit, Keys: o.IdempotencyKeys,
		Answered: r.answered.Load(), Unanswered: r.unanswered.Load(), ClientFailures: r.notSent.Load(),
		Outcomes: r.outcomes, Server5xx: r.server5xx.Load(), NotStartedRetries: r.retries.Load(),
		Claimed:         r.claimed.Load(),
		AllAnsweredMS:   loadgen.Millis(res.Elapsed),
		RequestsPerSec:  res.Throughput(),
		PollIntervalMS:  loadgen.Millis(o.PollInterval),
		OrdersPersisted: r.persisted.Load(), OrdersFailed: r.failed.Load(),
		Latency: r.latency.Summary(), TimeToAnswer: r.toAnswer.Summary(),
		RemainingPublic: -1, UnsoldDatabase: -1,
	}
	rep.OrdersStillPending = rep.Claimed - rep.OrdersPersisted - rep.OrdersFailed
	if at := r.soldOutAt.Load(); at > 0 {
		rep.SoldOut, rep.SoldOutMS = true, loadgen.Millis(time.Duration(at))
	}
	if at := r.lastPersisted.Load(); at > 0 && rep.OrdersStillPending == 0 && rep.OrdersFailed == 0 {
		rep.AllPersistedMS = loadgen.Millis(time.Duration(at))
	}
	return rep
}

func pollers(o Options) int { return min(max(o.Concurrency/8, 4), 32) }

// check reads the sale back from the API and the reconciliation endpoint
// and works out the two numbers that must be zero.
func (r *rusher) check(ctx context.Context, admin *apiclient.Client, rep *Report) {
	var pub struct {
		Remaining int64 `json:"remaining"`
	}
	if st, err := admin.Do(ctx, "GET", "/api/v1/sales/"+r.saleID, "", nil, &pub); err == nil && st == http.StatusOK {
		rep.RemainingPublic = pub.Remaining
	}
	var db struct {
		Unsold int64 `json:"unsold"`
	}
	if st, err := admin.Do(ctx, "GET", "/admin/v1/sales/"+r.saleID, r.opts.AdminToken, nil, &db); err == nil && st == http.StatusOK {
		rep.UnsoldDatabase = db.Unsold
	}
	var raw json.RawMessage
	st, err := admin.Do(ctx, "GET", "/admin/v1/sales/"+r.saleID+"/reconciliation", r.opts.AdminToken, nil, &raw)
	rep.Reconciliation.Status = st
	if err == nil && st == http.StatusOK {
		var rc struct {
			Oversold int64 `json:"oversold"`
			Balanced bool  `json:"balanced"`
		}
		if json.Unmarshal(raw, &rc) == nil {
			rep.Reconciliation = Reconciliation{Available: true, Status: st, Oversold: rc.Oversold, Balanced: rc.Balanced, Report: raw}
		}
	}

	stock := int64(r.opts.Stock)
	rep.Oversold = max(rep.Claimed-stock, rep.OrdersPersisted-stock, rep.Reconciliation.Oversold, 0)
	rep.ClaimedWithoutOrder = rep.Claimed - rep.OrdersPersisted
	rep.OK = rep.Oversold == 0 && rep.ClaimedWithoutOrder == 0
}

// rusher is one running rush.
type rusher struct {
	opts    Options
	targets []loadgen.Target
	tokens  []string
	saleID  string
	start   time.Time
	conns   []*loadgen.Conn
	winners chan winner
	// latency is per request, send to answer; toAnswer per buyer, from
	// the start instant to the final answer.
	latency, toAnswer *loadgen.Histogram

	mu       sync.Mutex
	outcomes map[string]int64

	answered, claimed, server5xx, retries atomic.Int64
	unanswered, notSent                   atomic.Int64
	persisted, failed                     atomic.Int64
	soldOutAt, lastPersisted              atomic.Int64 // nanoseconds since start
}

var (
	jsonContentType = loadgen.Header{Name: "Content-Type", Value: "application/json"}
	qtyOneBody      = []byte(`{"qty":1}`)
)

// buy is one buyer: one reservation request (sent again while the server
// says the sale has not started yet). Without an Idempotency-Key a resend
// is safe all the same: a buyer holds at most the per-user limit, and
// loadgen resends only a request that found its connection closed.
func (r *rusher) buy(ctx context.Context, c loadgen.Call) error {
	conn := r.conns[c.Worker]
	tok := r.tokens[c.Seq]
	headers := []loadgen.Header{{Name: "Authorization", Value: "Bearer " + tok}, jsonContentType}
	if r.opts.IdempotencyKeys {
		headers = append(headers, loadgen.Header{Name: "Idempotency-Key", Value: "rush-" + strconv.FormatInt(c.Seq, 10)})
	}
	req := conn.Target.AppendRequest(make([]byte, 0, 512), "POST", "/api/v1/sales/"+r.saleID+"/reservations", qtyOneBody, headers...)
	for {
		sent := time.Now()
		resp, err := conn.Do(req)
		r.latency.Record(time.Since(sent))
		if errors.Is(err, loadgen.ErrNotSent) {
			r.notSent.Add(1)
			return err
		}
		if err != nil {
			r.unanswered.Add(1)
			return err
		}
		code := apiclient.ErrorCode(resp.Body)
		if resp.Status == http.StatusConflict && code == "not_started" && time.Since(r.start) < 10*time.Second {
			r.retries.Add(1)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		r.answered.Add(1)
		r.toAnswer.Record(time.Since(r.start))
		if resp.Status >= 500 {
			r.server5xx.Add(1)
		}
		if resp.Status == http.StatusAccepted {
			var acc struct {
				ReservationID string `json:"reservation_id"`
			}
			if err := json.Unmarshal(resp.Body, &acc); err != nil || acc.ReservationID == "" {
				r.count("202 without a reservation id")
				return fmt.Errorf("202 without a reservation id: %q", resp.Body)
			}
			r.count("202 claimed")
			if n := r.claimed.Add(1); n == int64(r.opts.Stock) {
				r.soldOutAt.Store(int64(time.Since(r.start)))
			}
			r.winners <- winner{acc.ReservationID, tok}
			return nil
		}
		r.count(strconv.Itoa(resp.Status) + " " + code)
		return nil
	}
}

func (r *rusher) count(outcome string) {
	r.mu.Lock()
	r.outcomes[outcome]++
	r.mu.Unlock()
}

// poll takes claimed reservations as they come and polls each, as its
// buyer would, until it is an order (or failed), or ctx ends. Every
// pending reservation is polled once per round, one round per interval.
func (r *rusher) poll(ctx context.Context, conn *loadgen.Conn) {
	defer conn.Close()
	var pending []winner
	open := true
	for open || len(pending) > 0 {
		if len(pending) == 0 {
			select {
			case w, ok := <-r.winners:
				if !ok {
					return
				}
				pending = append(pending, w)
			case <-ctx.Done():
				return
			}
		}
	drain:
		for open {
			select {
			case w, ok := <-r.winners:
				if !ok {
					open = false
					break drain
				}
				pending = append(pending, w)
			default:
				break drain
			}
		}
		pending = slices.DeleteFunc(pending, func(w winner) bool { return r.pollOnce(conn, w) })
		if len(pending) == 0 {
			continue
		}
		select {
		case <-time.After(r.opts.PollInterval):
		case <-ctx.Done():
			return
		}
	}
}

// pollOnce asks for one reservation and reports whether it is settled.
func (r *rusher) pollOnce(conn *loadgen.Conn, w winner) bool {
	req := conn.Target.AppendRequest(make([]byte, 0, 512), "GET", "/api/v1/reservations/"+w.id, nil,
		loadgen.Header{Name: "Authorization", Value: "Bearer " + w.token})
	resp, err := conn.Do(req)
	if err != nil || resp.Status != http.StatusOK {
		return false // asked again next round
	}
	var st struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(resp.Body, &st) != nil {
		return false
	}
	switch st.Status {
	case "ordered", "paid":
		r.persisted.Add(1)
		storeMax(&r.lastPersisted, int64(time.Since(r.start)))
		return true
	case "failed", "cancelled":
		r.failed.Add(1)
		return true
	}
	return false
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// showProgress writes the progress line until done is closed: rewritten
// in place with \r on a terminal, one line per second otherwise.
func (r *rusher) showProgress(ctx context.Context, conn *loadgen.Conn, done <-chan struct{}) {
	defer conn.Close()
	tty := isTerminal(r.opts.ProgressTo)
	every := time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var (
		lastAnswered int64
		lastAt       = r.start
		remaining    = int64(-1)
		wrote        bool
	)
	emit := func(final bool) {
		if rem, ok := r.remaining(conn); ok {
			remaining = rem
		}
		now := time.Now()
		answered := r.answered.Load()
		p := Progress{
			Elapsed: max(now.Sub(r.start), 0), Answered: answered, Buyers: r.opts.Buyers,
			Sold: r.claimed.Load(), Stock: r.opts.Stock, Remaining: remaining,
			Rate: float64(answered-lastAnswered) / now.Sub(lastAt).Seconds(), Persisted: r.persisted.Load(),
		}
		lastAnswered, lastAt = answered, now
		for _, o := range r.opts.Observers {
			o(p)
		}
		if r.opts.ProgressTo == nil {
			return
		}
		line := p.String()
		switch {
		case tty && final:
			fmt.Fprintf(r.opts.ProgressTo, "\r%s\x1b[K\n", line)
		case tty:
			fmt.Fprintf(r.opts.ProgressTo, "\r%s\x1b[K", line)
		default:
			fmt.Fprintln(r.opts.ProgressTo, line)
		}
		wrote = true
	}
	for {
		select {
		case <-done:
			if wrote || time.Now().After(r.start) {
				emit(true)
			}
			return
		case <-ctx.Done():
			return
		case <-ticker.C:
			if time.Now().After(r.start) {
				emit(false)
			}
		}
	}
}

// remaining reads the public sale's remaining units.
func (r *rusher) remaining(conn *loadgen.Conn) (int64, bool) {
	resp, err := conn.Do(conn.Target.AppendRequest(nil, "GET", "/api/v1/sales/"+r.saleID, nil))
	if err != nil || resp.Status != http.StatusOK {
		return 0, false
	}
	var s struct {
		Remaining int64 `json:"remaining"`
	}
	if json.Unmarshal(resp.Body, &s) != nil {
		return 0, false
	}
	return s.Remaining, true
}

func (p Progress) String() string {
	rem := "?"
	if p.Remaining >= 0 {
		rem = loadgen.Thousands(p.Remaining)
	}
	return fmt.Sprintf("%6.1fs  sold %s/%s  remaining %s  %s req/s  answered %s/%s  orders persisted %s",
		p.Elapsed.Seconds(), loadgen.Thousands(p.Sold), loadgen.Thousands(int64(p.Stock)), rem, loadgen.Thousands(int64(p.Rate)),
		loadgen.Thousands(p.Answered), loadgen.Thousands(int64(p.Buyers)), loadgen.Thousands(p.Persisted))
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ErrPromiseBroken is Report.Err's verdict on a rush that oversold or
// lost a claim.
var ErrPromiseBroken = errors.New("promise broken")

// Err is nil when the rush kept its promises: nothing oversold, every
// claim an order.
func (rep *Report) Err() error {
	if rep.OK {
		return nil
	}
	return fmt.Errorf("%w: oversold %d, claimed without an order %d", ErrPromiseBroken, rep.Oversold, rep.ClaimedWithoutOrder)
}

// Print writes the report as text, headed "seckill <name>".
func (rep *Report) Print(w io.Writer, name string) {
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAILED"
	}
	keys := "no Idempotency-Keys"
	if rep.Keys {
		keys = "an Idempotency-Key each"
	}
	fmt.Fprintf(w, "seckill %s: %s buyers, %s units (limit %d per buyer), %d connections, %s\n",
		name, loadgen.Thousands(int64(rep.Buyers)), loadgen.Thousands(int64(rep.Stock)), rep.Limit, rep.Concurrency, keys)
	if rep.Backends != "" {
		fmt.Fprintf(w, "  backends                %s\n", rep.Backends)
	}
	fmt.Fprintf(w, "  sale                    %s on %s\n", rep.SaleID, strings.Join(rep.URLs, ", "))
	if rep.SoldOut {
		fmt.Fprintf(w, "  sold out after          %s\n", loadgen.FormatMillis(rep.SoldOutMS))
	} else {
		fmt.Fprintf(w, "  sold out after          did not sell out (%s of %s claimed)\n", loadgen.Thousands(rep.Claimed), loadgen.Thousands(int64(rep.Stock)))
	}
	fmt.Fprintf(w, "  every buyer answered    %s  (%s of %s, %s req/s)\n",
		loadgen.FormatMillis(rep.AllAnsweredMS), loadgen.Thousands(rep.Answered), loadgen.Thousands(int64(rep.Buyers)), loadgen.Thousands(int64(rep.RequestsPerSec)))
	if rep.AllPersistedMS > 0 {
		fmt.Fprintf(w, "  every order persisted   %s  (%s orders; polled every %s)\n",
			loadgen.FormatMillis(rep.AllPersistedMS), loadgen.Thousands(rep.OrdersPersisted), loadgen.FormatMillis(rep.PollIntervalMS))
	} else {
		fmt.Fprintf(w, "  every order persisted   not reached: %s ordered, %s failed, %s still pending\n",
			loadgen.Thousands(rep.OrdersPersisted), loadgen.Thousands(rep.OrdersFailed), loadgen.Thousands(rep.OrdersStillPending))
	}
	outcomes := make([]string, 0, len(rep.Outcomes))
	for k := range rep.Outcomes {
		outcomes = append(outcomes, k)
	}
	slices.Sort(outcomes)
	parts := make([]string, len(outcomes))
	for i, k := range outcomes {
		parts[i] = k + " " + loadgen.Thousands(rep.Outcomes[k])
	}
	fmt.Fprintf(w, "  outcomes                %s\n", strings.Join(parts, " · "))
	fmt.Fprintf(w, "  5xx answers             %s    unanswered %s    not-started retries %s\n",
		loadgen.Thousands(rep.Server5xx), loadgen.Thousands(rep.Unanswered), loadgen.Thousands(rep.NotStartedRetries))
	if rep.ClientFailures > 0 {
		fmt.Fprintf(w, "  never sent              %s  (the load generator's own failures: dial, or connection lost while writing)\n",
			loadgen.Thousands(rep.ClientFailures))
	}
	fmt.Fprintf(w, "  latency per request     %s\n", rep.Latency.String())
	fmt.Fprintf(w, "  time to answer          %s  (from the start instant, the wait in the crowd included)\n", rep.TimeToAnswer.String())
	rc := "not available (reconciliation endpoint answered " + strconv.Itoa(rep.Reconciliation.Status) + ")"
	if rep.Reconciliation.Available {
		rc = fmt.Sprintf("oversold %d, balanced %v", rep.Reconciliation.Oversold, rep.Reconciliation.Balanced)
	}
	fmt.Fprintf(w, "  reconciliation          %s\n", rc)
	fmt.Fprintf(w, "  stock left              %s in Redis, %s unsold in the database\n", orUnknown(rep.RemainingPublic), orUnknown(rep.UnsoldDatabase))
	fmt.Fprintf(w, "  oversold                %d  %s\n", rep.Oversold, mark(rep.Oversold == 0))
	fmt.Fprintf(w, "  claimed without order   %d  %s\n", rep.ClaimedWithoutOrder, mark(rep.ClaimedWithoutOrder == 0))
}

func orUnknown(n int64) string {
	if n == -1 {
		return "?"
	}
	return loadgen.Thousands(n)
}

// runID names one rush: its sale and its buyers.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
