package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
	"github.com/seckill-dev/seckill/internal/httpapi"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a Handler on fakes, served by an httptest server.
type fixture struct {
	h     *Handler
	srv   *httptest.Server
	sales *fakestore.Sales
	stock *fakestore.Stock
}

const testAdminToken = "admin-token-for-tests"

var testStart = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	f := &fixture{
		sales: fakestore.NewSales(),
		stock: fakestore.NewStock(),
	}
	f.sales.Put(&seckill.Sale{ID: "tea", Name: "Tea gift set", PriceCents: 9900, Stock: 200, Unsold: 200, PurchaseLimit: 2,
		StartAt: testStart, EndAt: testStart.Add(time.Hour)})
	cfg := Config{Sales: f.sales, Stock: f.stock, AdminToken: testAdminToken}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	f.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		h.CloseStreams()
		f.srv.Close()
	})
	return f
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) code() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

func (f *fixture) do(t *testing.T, method, path, auth, body string, header ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestNewRequiresStores(t *testing.T) {
	if _, err := New(Config{Stock: &fakestore.Stock{}}); err == nil {
		t.Error("New without Sales succeeded")
	}
	if _, err := New(Config{Sales: &fakestore.Sales{}}); err == nil {
		t.Error("New without Stock succeeded")
	}
}

func TestTimeEndpoint(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	f := newFixture(t, func(c *Config) { c.Now = func() time.Time { return now } })
	a := f.do(t, "GET", "/api/v1/time", "", "")
	if a.status != 200 || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q", a.status, a.header.Get("Content-Type"))
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q, want no-store: a cached clock is a wrong clock", cc)
	}
	var got struct {
		Now    time.Time `json:"now"`
		UnixMS int64     `json:"unix_ms"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.UnixMS != now.UnixMilli() || !got.Now.Equal(now) {
		t.Errorf("got %+v, want %v", got, now)
	}
}

func TestDemoLogin(t *testing.T) {
	t.Run("off: the route does not exist", func(t *testing.T) {
		f := newFixture(t, nil)
		if a := f.do(t, "POST", "/demo/v1/login", "", `{"name":"alice"}`); a.status != 404 {
			t.Errorf("got %d, want 404", a.status)
		}
		// The page offers no name box either.
		if a := f.do(t, "GET", "/sales/tea", "", ""); strings.Contains(string(a.body), `id="demo-form"`) {
			t.Error("buyer page shows demo sign-in while it is off")
		}
	})

	var names []string
	f := newFixture(t, func(c *Config) {
		c.DemoLogin = func(name string) (string, error) {
			names = append(names, name)
			if name == "broken" {
				return "", errors.New("signing key unavailable")
			}
			return "token-for-" + name, nil
		}
	})
	if a := f.do(t, "GET", "/sales/tea", "", ""); !strings.Contains(string(a.body), `id="demo-form"`) {
		t.Error("buyer page hides demo sign-in while it is on")
	}
	a := f.do(t, "POST", "/demo/v1/login", "", `{"name":"  alice "}`, "Content-Type", "application/json")
	if a.status != 200 {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	var got loginResponse
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Token != "token-for-alice" || got.UserID != "alice" {
		t.Errorf("got %+v", got)
	}

	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"empty name", `{"name":""}`, 400, seckill.EINVALID},
		{"blank name", `{"name":"   "}`, 400, seckill.EINVALID},
		{"control character", `{"name":"a\u0007b"}`, 400, seckill.EINVALID},
		{"too long", `{"name":"` + strings.Repeat("n", maxDemoNameBytes+1) + `"}`, 400, seckill.EINVALID},
		{"unknown field", `{"name":"a","admin":true}`, 400, seckill.EINVALID},
		{"not JSON", `name=alice`, 400, seckill.EINVALID},
		{"two objects", `{"name":"a"}{"name":"b"}`, 400, seckill.EINVALID},
		{"no body", ``, 400, seckill.EINVALID},
		{"too large", `{"name":"` + strings.Repeat("x", 2*maxSmallBody) + `"}`, 413, seckill.ETOOLARGE},
		{"minting fails", `{"name":"broken"}`, 500, seckill.EINTERNAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do(t, "POST", "/demo/v1/login", "", tt.body)
			if a.status != tt.status || a.code() != tt.code {
				t.Errorf("got %d %q (%s), want %d %q", a.status, a.code(), a.body, tt.status, tt.code)
			}
		})
	}
	if a := f.do(t, "POST", "/demo/v1/login", "", `{"name":"a"}`, "Content-Type", "text/plain"); a.status != 400 {
		t.Errorf("text/plain body: %d", a.status)
	}
	if a := f.do(t, "POST", "/demo/v1/login", "", `{"name":"broken"}`); strings.Contains(string(a.body), "signing key") {
		t.Errorf("internal error text leaked: %s", a.body)
	}
}

func TestBuyerPage(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Currency = "EUR" })
	f.sales.Rows["xss"] = &seckill.Sale{ID: "xss", Name: `<script>alert(1)</script> & "tea"`, PriceCents: 5,
		Stock: 3, PurchaseLimit: 1, StartAt: testStart, EndAt: testStart.Add(time.Hour)}
	f.stock.Set("tea", seckill.StockLevel{Total: 200, Reserved: 50})

	a := f.do(t, "GET", "/sales/tea", "", "")
	if a.status != 200 || a.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("got %d %q", a.status, a.header.Get("Content-Type"))
	}
	body := string(a.body)
	for _, want := range []string{
		`<h1 id="sale-name">Tea gift set</h1>`, `data-remaining="150"`, `data-stock="200"`, `data-limit="2"`,
		`data-start-at="2030-01-02T10:00:00Z"`, `data-currency="EUR"`, `data-state="scheduled"`,
		`<span id="price">99.00</span>`, `role="status"`, `aria-live="polite"`, `role="progressbar"`,
		`<label for="qty">`, `<option value="2">`, `name="viewport"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("buyer page lacks %s", want)
		}
	}
	checkPageHeaders(t, a)

	a = f.do(t, "GET", "/sales/xss", "", "")
	if strings.Contains(string(a.body), "<script>alert") {
		t.Error("the sale name reached the page unescaped")
	}
	if strings.Contains(string(a.body), `<label for="qty">`) {
		t.Error("a limit of 1 still shows a quantity menu")
	}

	for _, path := range []string{"/sales/nope", "/sales/bad.id"} {
		if a := f.do(t, "GET", path, "", ""); a.status != 404 || !strings.Contains(string(a.body), "No such sale") {
			t.Errorf("GET %s: %d", path, a.status)
		}
	}
	f.sales.Mu.Lock()
	f.sales.Err = errors.New("database down")
	f.sales.Mu.Unlock()
	a = f.do(t, "GET", "/sales/tea", "", "")
	if a.status != 503 || strings.Contains(string(a.body), "database") {
		t.Errorf("sale store down: %d %s", a.status, a.body)
	}
	// The buyer sees a friendly page that retries by itself, and a client
	// the Retry-After it needs.
	if a.header.Get("Retry-After") == "" || a.header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(string(a.body), `http-equiv="refresh"`) || !strings.Contains(string(a.body), "retries by itself") {
		t.Errorf("sale store down: headers %v, body %s; want a busy page that refreshes itself, with Retry-After", a.header, a.body)
	}
	checkPageHeaders(t, a)
}

// TestBuyerPageBudget: a sale store that never answers costs the buyer
// the page's budget, then the busy page; not a hang.
func TestBuyerPageBudget(t *testing.T) {
	const budget = 200 * time.Millisecond
	f := newFixture(t, func(c *Config) {
		c.Budget = budget
		c.Sales = hangingSales{}
	})
	start := time.Now()
	a := f.do(t, "GET", "/sales/tea", "", "")
	took := time.Since(start)
	if a.status != 503 {
		t.Fatalf("hanging sale store: %d after %s; want 503 after about %s", a.status, took, budget)
	}
	servicetest.WantWithin(t, "hanging sale store: the 503", took, budget+2*time.Second)
}

// hangingSales answers only when the caller gives up.
type hangingSales struct{}

func (hangingSales) Sale(ctx context.Context, _ string) (*seckill.Sale, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestOpenSaleRedirect(t *testing.T) {
	f := newFixture(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for q, want := range map[string]string{"?id=tea": "/sales/tea", "?id=../admin": "/", "": "/"} {
		resp, err := client.Get(f.srv.URL + "/sales" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("/sales%s: %d → %q, want %q", q, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

func checkPageHeaders(t *testing.T, a answer) {
	t.Helper()
	csp := a.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if a.header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("Referrer-Policy %q: a ?token= URL must not leak", a.header.Get("Referrer-Policy"))
	}
	if a.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no nosniff")
	}
}

func TestAdminPage(t *testing.T) {
	f := newFixture(t, nil)
	a := f.do(t, "GET", "/admin", "", "")
	if a.status != 200 || !strings.Contains(string(a.body), `id="admin-token"`) {
		t.Fatalf("got %d", a.status)
	}
	checkPageHeaders(t, a)
	if strings.Contains(string(a.body), testAdminToken) {
		t.Error("the admin page embeds the admin token")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(f.srv.URL + "/admin/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/admin" {
		t.Errorf("/admin/: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if a := f.do(t, "GET", "/", "", ""); a.status != 200 || !strings.Contains(string(a.body), `href="/admin"`) {
		t.Errorf("landing page: %d", a.status)
	}
}

func TestTicketEndpoint(t *testing.T) {
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, func(c *Config) { c.Now = func() time.Time { return now }; c.TicketTTL = 20 * time.Second })
	tests := []struct {
		name, auth, body string
		status           int
		code             string
	}{
		{"no token", "", `{"sale_id":"tea"}`, 401, seckill.EUNAUTHORIZED},
		{"wrong token", "not-the-admin-token", `{"sale_id":"tea"}`, 401, seckill.EUNAUTHORIZED},
		{"admin token with a suffix", testAdminToken + "x", `{"sale_id":"tea"}`, 401, seckill.EUNAUTHORIZED},
		{"bad sale id", testAdminToken, `{"sale_id":"a/b"}`, 400, seckill.EINVALID},
		{"no sale id", testAdminToken, `{}`, 400, seckill.EINVALID},
		{"unknown field", testAdminToken, `{"sale_id":"tea","ttl":3600}`, 400, seckill.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do(t, "POST", "/admin/v1/sse-ticket", tt.auth, tt.body)
			if a.status != tt.status || a.code() != tt.code {
				t.Errorf("got %d %q, want %d %q", a.status, a.code(), tt.status, tt.code)
			}
		})
	}

	a := f.do(t, "POST", "/admin/v1/sse-ticket", testAdminToken, `{"sale_id":"tea"}`)
	if a.status != 200 {
		t.Fatalf("got %d %s", a.status, a.body)
	}
	var got ticketResponse
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	if !got.ExpiresAt.Equal(now.Add(20 * time.Second)) {
		t.Errorf("expires %v, want %v", got.ExpiresAt, now.Add(20*time.Second))
	}
	if got.EventsURL != "/admin/v1/sales/tea/events?ticket="+got.Ticket {
		t.Errorf("events_url %q", got.EventsURL)
	}
	if strings.Contains(got.Ticket, testAdminToken) || strings.Contains(got.EventsURL, testAdminToken) {
		t.Error("the admin token appears in the ticket")
	}
	if err := f.h.tickets.verify(got.Ticket, "tea", now); err != nil {
		t.Errorf("issued ticket does not verify: %v", err)
	}

	// No admin token configured: nobody gets a ticket, not even with an
	// empty bearer.
	off := newFixture(t, func(c *Config) { c.AdminToken = "" })
	if a := off.do(t, "POST", "/admin/v1/sse-ticket", " ", `{"sale_id":"tea"}`); a.status != 401 {
		t.Errorf("no admin token configured: %d", a.status)
	}
}

func TestTicketSigning(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	s := newTicketSigner(testAdminToken, 30*time.Second)
	good, exp := s.sign("tea", now)
	if !exp.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("expiry %v, want %v", exp, now.Add(30*time.Second))
	}
	expPart, macPart, _ := strings.Cut(good, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	other, _ := newTicketSigner("another-admin-token", 30*time.Second).sign("tea", now)

	tests := []struct {
		name, ticket, sale string
		at                 time.Time
		want               error
	}{
		{"fresh", good, "tea", now, nil},
		{"a second before expiry", good, "tea", exp.Add(-time.Second), nil},
		{"at expiry", good, "tea", exp, errTicketExpired},
		{"long after", good, "tea", now.Add(time.Hour), errTicketExpired},
		{"another sale", good, "coffee", now, errTicketForged},
		{"signed with another admin token", other, "tea", now, errTicketForged},
		{"expiry pushed later", "1900009999." + macPart, "tea", now, errTicketForged},
		{"MAC changed", expPart + "." + flip(macPart, 5), "tea", now, errTicketForged},
		{"empty", "", "tea", now, errTicketMalformed},
		{"no dot", expPart + macPart, "tea", now, errTicketMalformed},
		{"leading zero", "0" + good, "tea", now, errTicketMalformed},
		{"signed expiry", "+" + good, "tea", now, errTicketMalformed},
		{"short MAC", good[:len(good)-1], "tea", now, errTicketMalformed},
		{"padded MAC", good + "=", "tea", now, errTicketMalformed},
		{"standard base64", expPart + "." + strings.NewReplacer("-", "+", "_", "/").Replace(macPart), "tea", now, errTicketMalformed},
		{"admin token itself", testAdminToken, "tea", now, errTicketMalformed},
		{"huge", strings.Repeat("9", 500) + "." + macPart, "tea", now, errTicketMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "standard base64" && !strings.ContainsAny(macPart, "-_") {
				t.Skip("this MAC has no character that differs between the encodings")
			}
			if got := s.verify(tt.ticket, tt.sale, tt.at); !errors.Is(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzTicket: no input panics the parser, and nothing but a ticket the
// signer made verifies.
func FuzzTicket(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	s := newTicketSigner(testAdminToken, time.Minute)
	good, _ := s.sign("tea", now)
	for _, seed := range []string{good, "", ".", "1.", "1900000060." + strings.Repeat("A", 43), good + good} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ticket string) {
		err := s.verify(ticket, "tea", now)
		if err == nil && ticket != good {
			t.Fatalf("%q verified but the signer never made it", ticket)
		}
	})
}

// event is one server-sent event.
type event struct {
	name string
	data string
}

// readEvent reads the next event, skipping comments and retry lines.
func readEvent(t *testing.T, r *bufio.Reader) (event, error) {
	t.Helper()
	var ev event
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data += line[len("data: "):]
		}
	}
}

// openEvents opens the live feed of sale with a fresh ticket.
func (f *fixture) openEvents(t *testing.T, sale string) (*bufio.Reader, func()) {
	t.Helper()
	return f.openEventsOn(t, f.srv, sale)
}

func (f *fixture) openEventsOn(t *testing.T, srv *httptest.Server, sale string) (*bufio.Reader, func()) {
	t.Helper()
	tk, _ := f.h.tickets.sign(sale, f.h.now())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/admin/v1/sales/"+sale+"/events?ticket="+tk, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
}

func nextSample(t *testing.T, r *bufio.Reader) point {
	t.Helper()
	for {
		ev, err := readEvent(t, r)
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		if ev.name == "sample" {
			var p point
			if err := json.Unmarshal([]byte(ev.data), &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
}

func TestEventsRefused(t *testing.T) {
	f := newFixture(t, nil)
	now := time.Now()
	expired, _ := newTicketSigner(testAdminToken, time.Second).sign("tea", now.Add(-time.Hour))
	forSomethingElse, _ := f.h.tickets.sign("coffee", now)
	for _, tt := range []struct {
		name, path string
		status     int
	}{
		{"no ticket", "/admin/v1/sales/tea/events", 401},
		{"expired ticket", "/admin/v1/sales/tea/events?ticket=" + expired, 401},
		{"another sale's ticket", "/admin/v1/sales/tea/events?ticket=" + forSomethingElse, 401},
		{"the admin token as ticket", "/admin/v1/sales/tea/events?ticket=" + testAdminToken, 401},
		{"unknown sale", "/admin/v1/sales/coffee/events?ticket=" + forSomethingElse, 404},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do(t, "GET", tt.path, "", "")
			if a.status != tt.status {
				t.Errorf("got %d %s, want %d", a.status, a.body, tt.status)
			}
		})
	}
	// A bearer admin token does not replace the ticket: one way in.
	if a := f.do(t, "GET", "/admin/v1/sales/tea/events", testAdminToken, ""); a.status != 401 {
		t.Errorf("admin bearer without ticket: %d", a.status)
	}
}

func TestEventsStream(t *testing.T) {
	var (
		mu    sync.Mutex
		calls int
		snap  = Snapshot{
			Reservations:    map[string]int64{"reserved": 0, "sold_out": 0},
			OutboxLen:       3,
			BrokerBacklog:   NA,
			OrdersPersisted: 10,
			FailedOrders:    1,
			ParkedRestores:  0,
			Reconciliation:  Reconciliation{State: "balanced"},
		}
	)
	f := newFixture(t, func(c *Config) {
		c.EventInterval = 40 * time.Millisecond
		c.Snapshot = func(_ context.Context, id string) (Snapshot, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			s := snap
			s.Reservations = map[string]int64{}
			for k, v := range snap.Reservations {
				s.Reservations[k] = v
			}
			return s, nil
		}
	})
	f.stock.Set("tea", seckill.StockLevel{Total: 200, Reserved: 0})

	r, done := f.openEvents(t, "tea")
	defer done()
	ev, err := readEvent(t, r)
	if err != nil || ev.name != "sale" || !strings.Contains(ev.data, `"name":"Tea gift set"`) {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	ev, err = readEvent(t, r)
	if err != nil || ev.name != "history" {
		t.Fatalf("second event %+v, %v", ev, err)
	}
	var hist struct{ Points []point }
	if err := json.Unmarshal([]byte(ev.data), &hist); err != nil || len(hist.Points) == 0 {
		t.Fatalf("history %s: %v", ev.data, err)
	}
	if !strings.Contains(ev.data, `"broker_backlog":null`) {
		t.Errorf("n/a must be null on the wire: %s", ev.data)
	}
	p := hist.Points[len(hist.Points)-1]
	if *p.Remaining != 200 || *p.Outbox != 3 || p.BrokerBacklog != nil || *p.Orders != 10 || *p.FailedOrders != 1 ||
		p.Reconciliation == nil || p.Reconciliation.State != "balanced" || !p.Preheated {
		t.Errorf("first point %+v", p)
	}

	// A rush: stock falls and the counters climb.
	f.stock.Set("tea", seckill.StockLevel{Total: 200, Reserved: 120})
	mu.Lock()
	snap.Reservations["reserved"] = 120
	snap.Reservations["sold_out"] = 40
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p = nextSample(t, r)
		if *p.Remaining == 80 && p.Rates["reserved"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample shows the rush: %+v", p)
		}
	}
	if p.Rates["sold_out"] <= 0 {
		t.Errorf("rates %v: sold_out should be positive", p.Rates)
	}

	// A second viewer gets the history the first built and shares the reads.
	r2, done2 := f.openEvents(t, "tea")
	defer done2()
	_, _ = readEvent(t, r2)
	ev, _ = readEvent(t, r2)
	if err := json.Unmarshal([]byte(ev.data), &hist); err != nil || len(hist.Points) < 2 {
		t.Errorf("second viewer's history has %d points", len(hist.Points))
	}
	mu.Lock()
	before := calls
	mu.Unlock()
	for range 10 { // 10 intervals, counted by the second viewer's samples
		nextSample(t, r2)
	}
	mu.Lock()
	reads := calls - before
	mu.Unlock()
	// Two viewers, 10 intervals: about 10 shared reads, never one per
	// viewer per tick (20).
	if reads > 15 {
		t.Errorf("%d snapshot reads in 10 intervals with 2 viewers: reads are not shared", reads)
	}

	// Shutdown ends every feed.
	f.h.CloseStreams()
	for _, rd := range []*bufio.Reader{r, r2} {
		for {
			if _, err := readEvent(t, rd); err != nil {
				break
			}
		}
	}
}

func TestEventsWhenReadsFail(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.EventInterval = 30 * time.Millisecond
		c.Snapshot = func(context.Context, string) (Snapshot, error) { return Snapshot{}, errors.New("metrics down") }
	})
	// Not preheated: the sale's own stock, nothing sold.
	r, done := f.openEvents(t, "tea")
	defer done()
	p := nextSample(t, r)
	if p.Preheated || *p.Remaining != 200 || *p.Reserved != 0 {
		t.Errorf("not preheated: %+v", p)
	}
	if p.Outbox != nil || p.Orders != nil || len(p.Problems) != 1 {
		t.Errorf("a failed snapshot must show n/a and say so: %+v", p)
	}
	f.stock.Mu.Lock()
	f.stock.Err = errors.New("redis down")
	f.stock.Mu.Unlock()
	p = nextSample(t, r)
	if p.Remaining != nil || len(p.Problems) != 2 {
		t.Errorf("stock down: %+v", p)
	}
}

func TestRates(t *testing.T) {
	got := rates(map[string]int64{"reserved": 10, "sold_out": 100}, map[string]int64{"reserved": 30, "sold_out": 50, "overloaded": 4}, 2*time.Second)
	want := map[string]float64{"reserved": 10, "sold_out": 25, "overloaded": 2}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	if rates(nil, map[string]int64{"a": 1}, 0) != nil {
		t.Error("no elapsed time must give no rates")
	}
}

func TestSeriesSetForgets(t *testing.T) {
	ss := newSeriesSet(time.Minute, time.Second)
	now := time.Now()
	for i := range maxSeries + 10 {
		ss.get(&seckill.Sale{ID: "s" + string(rune('a'+i%26)) + string(rune('a'+i/26))}, now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(ss.byID) > maxSeries {
		t.Errorf("%d series kept, want at most %d", len(ss.byID), maxSeries)
	}
	ss.get(&seckill.Sale{ID: "late"}, now.Add(time.Hour))
	if len(ss.byID) != 1 {
		t.Errorf("%d series kept after an hour idle, want only the new one", len(ss.byID))
	}
}

// TestEventsOutliveServerTimeouts: the engine's server has read and write
// timeouts meant for ordinary answers; a live feed must outlast both.
func TestEventsOutliveServerTimeouts(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.EventInterval = 50 * time.Millisecond })
	f.stock.Set("tea", seckill.StockLevel{Total: 200})
	srv := httptest.NewUnstartedServer(f.h)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	r, done := f.openEventsOn(t, srv, "tea")
	defer done()
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		nextSample(t, r)
	}
}

// TestBuyerPageCurrencyPerSale: a sale's own currency wins over the
// deployment's default; the Redis figure never shows above the
// database's unsold units.
func TestBuyerPageCurrencyPerSale(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Currency = "EUR" })
	f.sales.Rows["yen"] = &seckill.Sale{ID: "yen", Name: "Matcha", PriceCents: 120000, Currency: "JPY",
		Stock: 10, Unsold: 4, PurchaseLimit: 1, StartAt: testStart, EndAt: testStart.Add(time.Hour)}
	f.stock.Set("yen", seckill.StockLevel{Total: 10, Reserved: 2})
	body := string(f.do(t, "GET", "/sales/yen", "", "").body)
	for _, want := range []string{`data-currency="JPY"`, `data-remaining="4"`} {
		if !strings.Contains(body, want) {
			t.Errorf("buyer page lacks %s", want)
		}
	}
}

// TestEventsRemainingCappedByUnsold: the live feed never shows more units
// than the database has unsold, whatever Redis says, and follows the row
// as it changes.
func TestEventsRemainingCappedByUnsold(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.EventInterval = 30 * time.Millisecond })
	f.sales.Mu.Lock()
	f.sales.Rows["tea"].Unsold = 150
	f.sales.Mu.Unlock()
	f.stock.Set("tea", seckill.StockLevel{Total: 200, Reserved: 3}) // Redis says 197
	r, done := f.openEvents(t, "tea")
	defer done()
	if p := nextSample(t, r); *p.Remaining != 150 || *p.Total != 200 {
		t.Errorf("remaining %d of %d, want 150 (the unsold units) of 200", *p.Remaining, *p.Total)
	}
	f.sales.Mu.Lock()
	f.sales.Rows["tea"].Unsold = 300
	f.sales.Mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for p := nextSample(t, r); *p.Remaining != 197; p = nextSample(t, r) {
		if time.Now().After(deadline) {
			t.Fatalf("remaining %d, want Redis's 197 once the row allows it", *p.Remaining)
		}
	}
}

// TestErrorsAnswerThroughTheAPITable: every code the pages answer gets
// the status httpapi's one table gives it (the pages' own copy had
// drifted: a code it lacked was answered 500).
func TestErrorsAnswerThroughTheAPITable(t *testing.T) {
	for _, code := range []string{seckill.EINVALID, seckill.EUNAUTHORIZED, seckill.ESALENOTFOUND, seckill.ETOOLARGE,
		seckill.EUNAVAILABLE, seckill.ERATELIMITED, seckill.ECONFLICT, seckill.EINTERNAL} {
		rec := httptest.NewRecorder()
		writeError(rec, seckill.Errorf(code, "x"))
		if want := httpapi.ErrorStatus(code); rec.Code != want {
			t.Errorf("%s answered %d, want %d", code, rec.Code, want)
		}
	}
}
