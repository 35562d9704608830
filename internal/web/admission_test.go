package web

import (
	"bufio"
	"cmp"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

func TestStandingText(t *testing.T) {
	at := func(hh, mm int) time.Time { return time.Date(2030, 1, 2, hh, mm, 0, 0, time.UTC) }
	now := at(10, 0)
	lot, q := seckill.AdmitLottery, seckill.AdmitQueue
	for _, tc := range []struct {
		st       standing
		headline string
	}{
		{standing{Mode: lot, State: stSignIn}, "Sign in to enter the draw."},
		{standing{Mode: lot, State: stEnter, ResultsAt: at(10, 30)}, "Enter the draw."},
		{standing{Mode: lot, State: stEntered, ResultsAt: at(10, 30), EntryQty: 1}, "You're in the draw, results at 10:30 UTC."},
		{standing{Mode: lot, State: stWon, OrderStatus: "ordered", PayBy: at(10, 45)}, "You won, pay by 10:45 UTC."},
		{standing{Mode: lot, State: stWon, OrderStatus: "ordered", PayBy: at(9, 45)}, "You won, but the time to pay has passed."},
		{standing{Mode: lot, State: stWon}, "You won! Your order is being prepared."},
		{standing{Mode: lot, State: stWon, OrderStatus: "paid"}, "You won, and your order is paid."},
		{standing{Mode: lot, State: stLost}, "Not drawn this time."},
		{standing{Mode: lot, State: stNotOpen, OpensAt: at(11, 0)}, "The draw opens at 11:00 UTC."},
		{standing{Mode: q, State: stSignIn}, "Sign in to join the queue."},
		{standing{Mode: q, State: stJoin}, "Join the queue."},
		{standing{Mode: q, State: stWaiting, Position: 1234, Ahead: 1000, ETASeconds: 101}, "Position 1,234 — about 2 min."},
		{standing{Mode: q, State: stWaiting, Position: 7, Ahead: 6, ETASeconds: 59}, "Position 7 — less than a minute."},
		{standing{Mode: q, State: stWaiting, Position: 7, Ahead: 6, ETASeconds: 60}, "Position 7 — about 1 min."},
		{standing{Mode: q, State: stAdmitted}, "It's your turn."},
		{standing{Mode: q, State: stSoldOut}, "Sold out."},
		{standing{Mode: q, State: stUnavailable}, "Your standing cannot be read just now."},
	} {
		if got, _ := standingText(tc.st, now); got != tc.headline {
			t.Errorf("%s %s: headline %q, want %q", tc.st.Mode, tc.st.State, got, tc.headline)
		}
	}
}

// The headline of a buyer in the queue stays the same while only the
// seconds of their wait change: the live region is not re-announced every
// second.
func TestWaitingHeadlineChangesByTheMinute(t *testing.T) {
	heads := map[string]bool{}
	for eta := int64(61); eta <= 120; eta++ {
		h, _ := standingText(standing{Mode: seckill.AdmitQueue, State: stWaiting, Position: 5, ETASeconds: eta}, time.Time{})
		heads[h] = true
	}
	if len(heads) != 1 {
		t.Errorf("61 to 120 s of wait gave %d headlines, want 1: %v", len(heads), heads)
	}
}

// TestNoRecordStanding: a buyer with no entry or place is offered the
// form while the window is open, told when it opens before, and told it
// is over after, from the domain's window rules.
func TestNoRecordStanding(t *testing.T) {
	start := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	lottery := &seckill.Sale{StartAt: start, EndAt: start.Add(2 * time.Hour), Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: start.Add(time.Hour)}}
	queue := &seckill.Sale{StartAt: start, EndAt: start.Add(2 * time.Hour), Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 10}}
	opensBefore := 15 * time.Minute
	entry := func(now time.Time) noRecord {
		return noRecord{window: seckill.EntryWindow(lottery, now), open: stEnter, over: stClosed, opensAt: lottery.StartAt}
	}
	join := func(now time.Time) noRecord {
		return noRecord{window: seckill.QueueWindow(queue, now, opensBefore), open: stJoin, over: stEnded, opensAt: queue.StartAt.Add(-opensBefore)}
	}
	for _, tc := range []struct {
		name    string
		none    noRecord
		state   string
		opensAt time.Time
	}{
		{"lottery before the start", entry(start.Add(-time.Minute)), stNotOpen, start},
		{"lottery at the start", entry(start), stEnter, time.Time{}},
		{"lottery just before close", entry(start.Add(time.Hour - time.Millisecond)), stEnter, time.Time{}},
		{"lottery at close", entry(start.Add(time.Hour)), stClosed, time.Time{}},
		{"queue before it opens", join(start.Add(-opensBefore - time.Second)), stNotOpen, start.Add(-opensBefore)},
		{"queue open before the start", join(start.Add(-time.Minute)), stJoin, time.Time{}},
		{"queue during the sale", join(start.Add(time.Minute)), stJoin, time.Time{}},
		{"queue at the end", join(start.Add(2 * time.Hour)), stEnded, time.Time{}},
		{"a sale of another mode", noRecord{window: seckill.EntryWindow(queue, start), open: stEnter, over: stClosed, opensAt: start}, stClosed, time.Time{}},
	} {
		state, opensAt := tc.none.standing()
		if state != tc.state || !opensAt.Equal(tc.opensAt) {
			t.Errorf("%s: %q, opens %v; want %q, opens %v", tc.name, state, opensAt, tc.state, tc.opensAt)
		}
	}
}

func TestGrouped(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := grouped(n); got != want {
			t.Errorf("grouped(%d) = %q, want %q", n, got, want)
		}
	}
}

// fakeAPI answers the API's lottery and queue routes for the buyers of
// tokens "tok-<user>", and records what it was asked.
type fakeAPI struct {
	mu      sync.Mutex
	entered map[string]int64 // user -> qty
	won     map[string]bool
	drawn   bool
	places  map[string]int64
	calls   []string // "METHOD path user"
	keys    []string // the Idempotency-Keys of claims
	// claims is the status of each buyer's claim "res-<user>" on the
	// queue sale: pending (no order yet), ordered, paid, cancelled, …
	claims  map[string]string
	soldOut bool // the queue sale is sold out
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{entered: map[string]int64{}, won: map[string]bool{}, places: map[string]int64{}, claims: map[string]string{}}
}

type fakeVerifier struct{}

func (fakeVerifier) Verify(tok string) (string, error) {
	if u, ok := strings.CutPrefix(tok, "tok-"); ok && u != "" {
		return u, nil
	}
	return "", seckill.Errorf(seckill.EUNAUTHORIZED, "bad token")
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, err := fakeVerifier{}.Verify(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, r.Method+" "+r.URL.Path+" "+user)
	if err != nil {
		writeError(w, err)
		return
	}
	switch p := r.URL.Path; {
	case r.Method == "POST" && strings.HasSuffix(p, "/entries"):
		var body struct{ Qty int64 }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.Qty > 2 {
			writeError(w, seckill.Errorf(seckill.EPURCHASELIMIT, "over"))
			return
		}
		a.entered[user] = body.Qty
		writeJSON(w, 201, map[string]any{"entry_id": "e-" + user, "status": "entered"})
	case strings.HasSuffix(p, "/entries/mine"):
		qty, ok := a.entered[user]
		if !ok {
			writeError(w, seckill.Errorf(seckill.ENOTFOUND, "not entered"))
			return
		}
		status := "entered"
		resp := map[string]any{"entry_id": "e-" + user, "qty": qty}
		if a.drawn {
			status = "lost"
			if a.won[user] {
				status, resp["reservation_id"] = "won", "res-"+user
			}
		}
		resp["status"] = status
		writeJSON(w, 200, resp)
	case r.Method == "POST" && strings.HasSuffix(p, "/reservations"):
		if r.Header.Get("Admission-Ticket") != "ticket-of-"+user {
			writeError(w, seckill.Errorf(seckill.EADMISSION, "no ticket"))
			return
		}
		a.keys = append(a.keys, r.Header.Get("Idempotency-Key"))
		a.claims[user] = "ordered"
		writeJSON(w, 202, map[string]any{"reservation_id": "res-" + user, "status": "pending"})
	case strings.HasSuffix(p, "/reservations/mine"):
		resp := map[string]any{"sale_id": "q", "reservations": []any{}, "pending_units": 0}
		switch status, ok := a.claims[user]; {
		case status == "pending":
			resp["pending_units"] = 1
		case ok:
			resp["reservations"] = []any{map[string]any{"reservation_id": "res-" + user, "status": status, "pay_by": testStart.Add(20 * time.Minute)}}
		}
		writeJSON(w, 200, resp)
	case strings.HasPrefix(p, "/api/v1/reservations/"):
		status := cmp.Or(a.claims[user], "ordered")
		writeJSON(w, 200, map[string]any{"status": status, "pay_by": testStart.Add(20 * time.Minute), "pay_url": "https://pay.example/" + user})
	case r.Method == "POST" && strings.HasSuffix(p, "/queue"):
		if _, ok := a.places[user]; !ok {
			a.places[user] = int64(len(a.places) + 1)
		}
		writeJSON(w, 200, map[string]any{"position": a.places[user]})
	case strings.HasSuffix(p, "/queue/mine"):
		pos, ok := a.places[user]
		if !ok {
			writeError(w, seckill.Errorf(seckill.ENOTFOUND, "no place"))
			return
		}
		if a.soldOut {
			writeJSON(w, 200, map[string]any{"position": pos, "sold_out": true})
			return
		}
		if pos == 1 {
			writeJSON(w, 200, map[string]any{"position": 1, "admitted": true, "ticket": "ticket-of-" + user, "ticket_header": "Admission-Ticket"})
			return
		}
		writeJSON(w, 200, map[string]any{"position": pos, "ahead": pos - 1, "eta_seconds": 90 * (pos - 1)})
	default:
		http.NotFound(w, r)
	}
}

func (a *fakeAPI) called() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// newAdmissionFixture serves a lottery sale "lot" (entries close at 10:30)
// and a queue sale "q" (starts at 10:00, 5 a second), at 10:05.
func newAdmissionFixture(t *testing.T, api *fakeAPI) *fixture {
	t.Helper()
	now := testStart.Add(5 * time.Minute)
	f := newFixture(t, func(c *Config) {
		c.API, c.Buyers = api, fakeVerifier{}
		c.Now = func() time.Time { return now }
		c.BuyerEventInterval = 10 * time.Millisecond
	})
	f.sales.Put(&seckill.Sale{ID: "lot", Name: "Limited tea", PriceCents: 9900, Stock: 5, Unsold: 5, PurchaseLimit: 2,
		StartAt: testStart, EndAt: testStart.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitLottery, EntriesCloseAt: testStart.Add(30 * time.Minute)}})
	f.sales.Put(&seckill.Sale{ID: "q", Name: "Console", PriceCents: 49900, Stock: 5, Unsold: 5, PurchaseLimit: 1,
		StartAt: testStart, EndAt: testStart.Add(time.Hour),
		Admission: seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 5}})
	return f
}

// browser sends a page's requests as a signed-in buyer's browser would,
// with its session cookie, and follows no redirect.
type browser struct {
	t      *testing.T
	f      *fixture
	cookie string // the session cookie's value, as the jar would send it
}

func (b *browser) send(method, path string, form url.Values, header ...string) answer {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.f.srv.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.cookie != "" {
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: b.cookie})
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := *b.f.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			b.cookie = c.Value
			if c.MaxAge < 0 {
				b.cookie = ""
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != sessionPath {
				b.t.Errorf("session cookie %+v: want HttpOnly, SameSite=Lax, Path=%s", c, sessionPath)
			}
		}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// formTokenOf reads the form token the page rendered.
func formTokenOf(t *testing.T, page []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(page), `name="form_token" value="`)
	if !ok {
		t.Fatalf("no form token in the page:\n%s", page)
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}

func mustContain(t *testing.T, page []byte, wants ...string) {
	t.Helper()
	text := html.UnescapeString(string(page))
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("the page does not say %q", w)
		}
	}
}

// TestLotteryPageWithoutScript: a buyer signs in, enters the draw and sees
// their entry with plain form posts, each answered by a redirect to the
// page (post, redirect, get), the page rendered by the server.
func TestLotteryPageWithoutScript(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	b := &browser{t: t, f: f}

	a := b.send("GET", "/sales/lot", nil)
	mustContain(t, a.body, "Sign in to enter the draw.", `action="/sales/lot/session"`, `aria-live="polite"`)

	a = b.send("POST", "/sales/lot/session", url.Values{"token": {"tok-ann"}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/sales/lot?notice=signed_in" || b.cookie != "tok-ann" {
		t.Fatalf("sign in = %d %q, cookie %q", a.status, a.header.Get("Location"), b.cookie)
	}
	a = b.send("GET", "/sales/lot?notice=signed_in", nil)
	mustContain(t, a.body, "Enter the draw.", `action="/sales/lot/enter"`, "Signed in as <strong id=\"who\">ann</strong>", "Signed in.")
	tok := formTokenOf(t, a.body)

	a = b.send("POST", "/sales/lot/enter", url.Values{"form_token": {tok}, "qty": {"2"}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/sales/lot?notice=entered" {
		t.Fatalf("enter = %d %q", a.status, a.header.Get("Location"))
	}
	if api.entered["ann"] != 2 {
		t.Fatalf("the API has ann's entry as %v", api.entered)
	}
	a = b.send("GET", "/sales/lot", nil)
	mustContain(t, a.body, "You're in the draw, results at 10:30 UTC.", "You entered for 2 units.")

	api.mu.Lock()
	api.drawn, api.won["ann"] = true, true
	api.mu.Unlock()
	a = b.send("GET", "/sales/lot", nil)
	mustContain(t, a.body, "You won, pay by 10:20 UTC.")

	// Over the limit: the API's refusal comes back as a notice.
	a = b.send("POST", "/sales/lot/enter", url.Values{"form_token": {tok}, "qty": {"3"}})
	if loc := a.header.Get("Location"); loc != "/sales/lot?notice=limit_exceeded" {
		t.Errorf("entry over the limit went back to %q", loc)
	}

	// Another buyer sees only their own standing.
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	a = bob.send("GET", "/sales/lot", nil)
	mustContain(t, a.body, "Enter the draw.")
	if strings.Contains(string(a.body), "You won") || strings.Contains(string(a.body), "ann") {
		t.Error("bob's page shows ann's standing")
	}

	a = b.send("POST", "/sales/lot/session/end", url.Values{})
	if a.status != http.StatusSeeOther || b.cookie != "" {
		t.Fatalf("sign out = %d, cookie %q", a.status, b.cookie)
	}
	mustContain(t, b.send("GET", "/sales/lot", nil).body, "Sign in to enter the draw.")
}

// TestBuyerFormsRefuseForgeries: a form posted from another site, without
// the session's form token or with another session's, does nothing.
func TestBuyerFormsRefuseForgeries(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	ann := &browser{t: t, f: f, cookie: "tok-ann"}
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	bobs := formTokenOf(t, bob.send("GET", "/sales/lot", nil).body)
	anns := formTokenOf(t, ann.send("GET", "/sales/lot", nil).body)

	if a := ann.send("POST", "/sales/lot/enter", url.Values{"form_token": {anns}}, "Sec-Fetch-Site", "cross-site"); a.status != http.StatusUnauthorized {
		t.Errorf("cross-site post = %d, want 401", a.status)
	}
	if a := ann.send("POST", "/sales/lot/session", url.Values{"token": {"tok-mallory"}}, "Origin", "https://evil.example"); a.status != http.StatusUnauthorized {
		t.Errorf("cross-origin sign-in = %d, want 401", a.status)
	}
	for _, tok := range []string{"", bobs, anns + "x"} {
		a := ann.send("POST", "/sales/lot/enter", url.Values{"form_token": {tok}})
		if loc := a.header.Get("Location"); loc != "/sales/lot?notice=form_expired" {
			t.Errorf("form token %q: went back to %q", tok, loc)
		}
	}
	// Bob's token is for the lottery page; it does not act on the queue.
	qs := formTokenOf(t, bob.send("GET", "/sales/q", nil).body)
	if qs == bobs {
		t.Error("one form token for two sales")
	}
	for _, c := range api.called() {
		if strings.HasPrefix(c, "POST") {
			t.Errorf("the API was asked %q", c)
		}
	}
	if a := ann.send("POST", "/sales/lot/session", url.Values{"token": {"not-a-token"}}); a.header.Get("Location") != "/sales/lot?notice=sign_in_failed" || ann.cookie != "tok-ann" {
		t.Errorf("a bad token: %d %q, cookie %q", a.status, a.header.Get("Location"), ann.cookie)
	}
	if got := noticeOf("<script>"); got != "" {
		t.Errorf("an unknown notice shows %q", got)
	}
}

// TestQueuePageWithoutScript: a buyer joins the waiting room with a form
// and sees their place; the buyer at the front sees their turn, and the
// page never carries their ticket.
func TestQueuePageWithoutScript(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	ann := &browser{t: t, f: f, cookie: "tok-ann"}
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	for _, b := range []*browser{ann, bob} {
		page := b.send("GET", "/sales/q", nil)
		mustContain(t, page.body, "Join the queue.", `action="/sales/q/join"`, "5 a second from 10:00 UTC")
		a := b.send("POST", "/sales/q/join", url.Values{"form_token": {formTokenOf(t, page.body)}})
		if a.header.Get("Location") != "/sales/q?notice=joined" {
			t.Fatalf("join = %d %q", a.status, a.header.Get("Location"))
		}
	}
	page := ann.send("GET", "/sales/q", nil)
	mustContain(t, page.body, "It's your turn.")
	if strings.Contains(string(page.body), "ticket-of-ann") {
		t.Error("the page carries the admission ticket")
	}
	page = bob.send("GET", "/sales/q", nil)
	mustContain(t, page.body, "Position 2 — about 2 min.", "1 ahead of you.")
}

// TestBuyerFeed: the buyer feed sends the signed-in buyer's standing, with
// the ticket once it is their turn, and only to a signed-in buyer.
func TestBuyerFeed(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	if a := f.do(t, "GET", "/sales/q/events", "", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("feed without a session = %d", a.status)
	}
	api.places["ann"] = 1
	req, _ := http.NewRequest("GET", f.srv.URL+"/sales/q/events", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: "tok-ann"})
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var event string
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "standing" {
			var st standing
			if err := json.Unmarshal([]byte(d), &st); err != nil {
				t.Fatal(err)
			}
			if st.State != stAdmitted || st.Ticket != "ticket-of-ann" || st.Headline != "It's your turn." {
				t.Errorf("standing %+v", st)
			}
			break
		}
	}
	// The standing has not changed: the feed keeps the line alive without
	// sending it again.
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == ": keep-alive":
			return
		case strings.HasPrefix(line, "event: "):
			t.Fatalf("the feed sent %q again with nothing changed", line)
		}
	}
	t.Fatalf("the feed ended: %v", sc.Err())
}

// feed follows a buyer feed as the buyer of cookie: next is the next
// standing it sends, and keepAlive waits for a keep-alive line.
type feed struct {
	t  *testing.T
	sc *bufio.Scanner
}

func openFeed(t *testing.T, f *fixture, sale, cookie string) *feed {
	t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+"/sales/"+sale+"/events", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &feed{t: t, sc: bufio.NewScanner(resp.Body)}
}

func (fd *feed) next() standing {
	fd.t.Helper()
	var event string
	for fd.sc.Scan() {
		line := fd.sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "standing" {
			var st standing
			if err := json.Unmarshal([]byte(d), &st); err != nil {
				fd.t.Fatal(err)
			}
			return st
		}
	}
	fd.t.Fatalf("the feed ended: %v", fd.sc.Err())
	return standing{}
}

func (fd *feed) keepAlive() {
	fd.t.Helper()
	for fd.sc.Scan() {
		if fd.sc.Text() == ": keep-alive" {
			return
		}
	}
	fd.t.Fatalf("the feed ended: %v", fd.sc.Err())
}

// TestBuyerFeedFollowsTheClaim: the feed the script follows shows the
// buyer's claim as its order moves on, with no ticket while it holds.
func TestBuyerFeedFollowsTheClaim(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	api.places["ann"], api.claims["ann"] = 1, "pending"
	fd := openFeed(t, f, "q", "tok-ann")
	if st := fd.next(); st.Headline != "Reserved — your order is being prepared. Check again in a moment." || st.Ticket != "" || st.OrderStatus != "pending" {
		t.Errorf("on its way: %+v", st)
	}
	for _, c := range []struct{ status, headline, ticket string }{
		{"ordered", "Reserved — pay by 10:20 UTC.", ""},
		{"paid", "Paid. Your order is confirmed.", ""},
	} {
		api.mu.Lock()
		api.claims["ann"] = c.status
		api.mu.Unlock()
		if st := fd.next(); st.Headline != c.headline || st.Ticket != c.ticket || st.ReservationID != "res-ann" {
			t.Errorf("%s: %+v", c.status, st)
		}
	}
	// An ended claim frees the buyer's turn: the ticket comes back.
	api.mu.Lock()
	api.claims["ann"] = "cancelled"
	api.mu.Unlock()
	if st := fd.next(); st.Headline != "It's your turn." || st.Ticket != "ticket-of-ann" || st.ReservationID != "res-ann" || st.OrderStatus != "cancelled" {
		t.Errorf("cancelled: %+v", st)
	}
}

// TestSoldOutFeedReadsClaimsOnce: in a sold-out room, a buyer who holds
// nothing cannot come to hold anything, so the feed reads their claims
// once, not on every tick.
func TestSoldOutFeedReadsClaimsOnce(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	api.places["bob"], api.soldOut = 2, true
	fd := openFeed(t, f, "q", "tok-bob")
	if st := fd.next(); st.State != stSoldOut || st.Headline != "Sold out." {
		t.Errorf("bob's standing %+v", st)
	}
	for range 3 {
		fd.keepAlive()
	}
	var standings, claims int
	for _, c := range api.called() {
		switch c {
		case "GET /api/v1/sales/q/queue/mine bob":
			standings++
		case "GET /api/v1/sales/q/reservations/mine bob":
			claims++
		}
	}
	if standings < 4 || claims != 1 {
		t.Errorf("%d standings read with %d reads of the claims; want 1 read", standings, claims)
	}
}

// TestFeedShowsTheLastUnitsClaim: a buyer who buys the last unit on their
// turn sees their claim when the room turns sold out, not "Sold out".
func TestFeedShowsTheLastUnitsClaim(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	api.places["ann"] = 1
	fd := openFeed(t, f, "q", "tok-ann")
	if st := fd.next(); st.State != stAdmitted || st.OrderStatus != "" {
		t.Errorf("before buying: %+v", st)
	}
	api.mu.Lock()
	api.claims["ann"], api.soldOut = "pending", true
	api.mu.Unlock()
	if st := fd.next(); st.State != stSoldOut || st.Headline != "Reserved — your order is being prepared. Check again in a moment." {
		t.Errorf("after buying the last unit: %+v", st)
	}
}

// TestStandingEndpoint: what the page polls when the feed fails is the
// signed-in buyer's standing, to them only.
func TestStandingEndpoint(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	api.places["bob"] = 2
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	a := bob.send("GET", "/sales/q/standing", nil)
	var st standing
	if err := json.Unmarshal(a.body, &st); err != nil || a.status != http.StatusOK {
		t.Fatalf("standing = %d %s", a.status, a.body)
	}
	if st.State != stWaiting || st.Position != 2 || st.Ahead != 1 || st.Ticket != "" || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("standing %+v, Cache-Control %q", st, a.header.Get("Cache-Control"))
	}
	nobody := &browser{t: t, f: f}
	if a := nobody.send("GET", "/sales/q/standing", nil); a.status != http.StatusUnauthorized {
		t.Errorf("standing without a session = %d", a.status)
	}
	forged := &browser{t: t, f: f, cookie: "forged"}
	if a := forged.send("GET", "/sales/q/standing", nil); a.status != http.StatusUnauthorized {
		t.Errorf("standing with a token that does not verify = %d", a.status)
	}
	if a := bob.send("GET", "/sales/tea/standing", nil); a.status != http.StatusConflict {
		t.Errorf("standing of a first come sale = %d, want 409", a.status)
	}
}

// TestQueueBuyWithoutScript: the buyer whose turn it is buys with a plain
// form; the page then shows the reservation and its time to pay. The
// ticket goes from the API's answer to the API's claim in-process: never
// into the page or a URL.
func TestQueueBuyWithoutScript(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	ann := &browser{t: t, f: f, cookie: "tok-ann"}
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	for _, b := range []*browser{ann, bob} {
		page := b.send("GET", "/sales/q", nil)
		b.send("POST", "/sales/q/join", url.Values{"form_token": {formTokenOf(t, page.body)}})
	}
	page := ann.send("GET", "/sales/q", nil)
	mustContain(t, page.body, "It's your turn.", `action="/sales/q/buy"`)
	_, rest, _ := strings.Cut(string(page.body), `name="key" value="`)
	key, _, _ := strings.Cut(rest, `"`)
	if !seckill.ValidIdempotencyKey(key) {
		t.Fatalf("the buy form's key %q", key)
	}

	// Bob's turn has not come: refused, with a message, and no claim made.
	bobPage := bob.send("GET", "/sales/q", nil)
	if strings.Contains(string(bobPage.body), `action="/sales/q/buy"`) {
		t.Error("bob's page offers to buy before his turn")
	}
	a := bob.send("POST", "/sales/q/buy", url.Values{"form_token": {formTokenOf(t, bobPage.body)}, "key": {"k-bob"}})
	if loc := a.header.Get("Location"); loc != "/sales/q?notice=not_your_turn" {
		t.Fatalf("bob's buy went back to %q", loc)
	}
	mustContain(t, bob.send("GET", "/sales/q?notice=not_your_turn", nil).body, "It is not your turn yet")

	a = ann.send("POST", "/sales/q/buy", url.Values{"form_token": {formTokenOf(t, page.body)}, "key": {key}, "qty": {"1"}})
	loc := a.header.Get("Location")
	if a.status != http.StatusSeeOther || loc != "/sales/q?notice=reserved&reservation=res-ann" {
		t.Fatalf("buy = %d %q", a.status, loc)
	}
	if len(api.keys) != 1 || api.keys[0] != key {
		t.Errorf("the claims' keys %q, want the form's %q", api.keys, key)
	}
	page = ann.send("GET", loc, nil)
	mustContain(t, page.body, "Reserved.", "Reserved — pay by 10:20 UTC.", `href="https://pay.example/ann"`, `href="/sales/q?reservation=res-ann">Check again`)
	if strings.Contains(string(page.body)+loc, "ticket-of-ann") {
		t.Error("the ticket reached the page or a URL")
	}
	// The claim is read as ann: the API shows a buyer only their own.
	if c := api.called(); c[len(c)-1] != "GET /api/v1/reservations/res-ann ann" {
		t.Errorf("the claim was read as %q", c[len(c)-1])
	}
}

// TestQueuePageRemembersTheClaim: a plain reload of the page after buying
// shows the buyer's claim, with its time to pay, and no second Buy form;
// the standing the script follows says the same. Another buyer whose turn
// it is sees their own state, and a claim that ended lets its buyer buy
// again.
func TestQueuePageRemembersTheClaim(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	ann := &browser{t: t, f: f, cookie: "tok-ann"}
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	api.places["ann"], api.places["bob"] = 1, 1 // both their turn
	page := ann.send("GET", "/sales/q", nil)
	_, rest, _ := strings.Cut(string(page.body), `name="key" value="`)
	key, _, _ := strings.Cut(rest, `"`)
	ann.send("POST", "/sales/q/buy", url.Values{"form_token": {formTokenOf(t, page.body)}, "key": {key}})

	reload := func(b *browser) string {
		t.Helper()
		return html.UnescapeString(string(b.send("GET", "/sales/q", nil).body))
	}
	noBuy := func(who, body string) {
		t.Helper()
		if strings.Contains(body, `action="/sales/q/buy"`) || strings.Contains(body, "It's your turn.") {
			t.Errorf("%s: the page offers to buy again", who)
		}
		if !strings.Contains(body, `id="buy-box" class="buy" aria-label="Buy" hidden`) {
			t.Errorf("%s: the script's buy box is not hidden", who)
		}
	}
	body := reload(ann)
	mustContain(t, []byte(body), `aria-live="polite" aria-atomic="true">Reserved — pay by 10:20 UTC.</p>`,
		`href="https://pay.example/ann"`, `href="/sales/q?reservation=res-ann">Check again`)
	noBuy("ordered", body)
	if c := api.called(); !slices.Contains(c, "GET /api/v1/sales/q/reservations/mine ann") {
		t.Errorf("ann's claims were not read as ann: %q", c)
	}

	// The script follows the standing: it says the same, with no ticket.
	a := ann.send("GET", "/sales/q/standing", nil)
	var st standing
	if err := json.Unmarshal(a.body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Headline != "Reserved — pay by 10:20 UTC." || st.ReservationID != "res-ann" || st.OrderStatus != "ordered" || st.Ticket != "" {
		t.Errorf("ann's standing %+v", st)
	}

	// Bob's turn: his own state, nothing of ann's.
	body = reload(bob)
	mustContain(t, []byte(body), "It's your turn.", `action="/sales/q/buy"`)
	if strings.Contains(body, "Reserved") || strings.Contains(body, "res-ann") || strings.Contains(body, "pay.example/ann") {
		t.Error("bob's page shows ann's claim")
	}

	for _, c := range []struct {
		status, headline, claim string
		buy                     bool
	}{
		{"pending", "Reserved — your order is being prepared.", "", false},
		{"paid", "Paid. Your order is confirmed.", "", false},
		{"cancelled", "It's your turn.", "This order was cancelled: it was not paid in time, or it was cancelled.", true},
		{"failed", "It's your turn.", "We could not finish this order automatically", true},
	} {
		api.mu.Lock()
		api.claims["ann"] = c.status
		api.mu.Unlock()
		body := reload(ann)
		_, headline, _ := strings.Cut(body, `id="adm-headline"`)
		if !strings.HasPrefix(headline[strings.Index(headline, ">")+1:], c.headline) {
			t.Errorf("%s: headline %.80q, want %q", c.status, headline, c.headline)
		}
		if strings.Contains(body, "pay.example/ann") {
			t.Errorf("%s: the page links to the payment", c.status)
		}
		if !c.buy {
			noBuy(c.status, body)
			continue
		}
		claimAt, buyAt := strings.Index(body, c.claim), strings.Index(body, `action="/sales/q/buy"`)
		if claimAt < 0 || buyAt < claimAt {
			t.Errorf("%s: the claim at %d, the Buy form at %d: want the claim, then the form", c.status, claimAt, buyAt)
		}
	}
}

// TestBuyFormRefusesForgeries: a buy posted from another site, without the
// session's form token, with another session's or another sale's, or on a
// sale that is not a queue, claims nothing.
func TestBuyFormRefusesForgeries(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	ann := &browser{t: t, f: f, cookie: "tok-ann"}
	bob := &browser{t: t, f: f, cookie: "tok-bob"}
	page := ann.send("GET", "/sales/q", nil)
	ann.send("POST", "/sales/q/join", url.Values{"form_token": {formTokenOf(t, page.body)}})
	anns := formTokenOf(t, ann.send("GET", "/sales/q", nil).body)
	annsLot := formTokenOf(t, ann.send("GET", "/sales/lot", nil).body)
	bobs := formTokenOf(t, bob.send("GET", "/sales/q", nil).body)

	if a := ann.send("POST", "/sales/q/buy", url.Values{"form_token": {anns}, "key": {"k1"}}, "Sec-Fetch-Site", "cross-site"); a.status != http.StatusUnauthorized {
		t.Errorf("cross-site buy = %d, want 401", a.status)
	}
	for _, tok := range []string{"", bobs, annsLot} {
		a := ann.send("POST", "/sales/q/buy", url.Values{"form_token": {tok}, "key": {"k1"}})
		if loc := a.header.Get("Location"); loc != "/sales/q?notice=form_expired" {
			t.Errorf("form token %q: went back to %q", tok, loc)
		}
	}
	if a := ann.send("POST", "/sales/q/buy", url.Values{"form_token": {anns}}); a.header.Get("Location") != "/sales/q?notice=invalid_request" {
		t.Errorf("a buy without a key went back to %q", a.header.Get("Location"))
	}
	if a := ann.send("POST", "/sales/lot/buy", url.Values{"form_token": {annsLot}, "key": {"k1"}}); a.header.Get("Location") != "/sales/lot?notice=admission_required" {
		t.Errorf("a buy on a lottery went back to %q", a.header.Get("Location"))
	}
	if a := (&browser{t: t, f: f}).send("POST", "/sales/q/buy", url.Values{"form_token": {anns}, "key": {"k1"}}); a.header.Get("Location") != "/sales/q?notice=unauthorized" {
		t.Errorf("a buy without a session went back to %q", a.header.Get("Location"))
	}
	for _, c := range api.called() {
		if strings.HasPrefix(c, "POST ") && strings.Contains(c, "/reservations") {
			t.Errorf("the API was asked %q", c)
		}
	}
}

// TestLotteryWinnerPaysWithoutScript: a winner's page shows the order and
// its time to pay; where the engine takes payments (the demo) a plain form
// pays it, otherwise a link goes to the shop's payment page.
func TestLotteryWinnerPaysWithoutScript(t *testing.T) {
	api := newFakeAPI()
	api.entered["ann"], api.won["ann"], api.drawn = 1, true, true
	f := newAdmissionFixture(t, api)
	ann := &browser{t: t, f: f, cookie: "tok-ann"}
	mustContain(t, ann.send("GET", "/sales/lot", nil).body, "You won, pay by 10:20 UTC.", "Reserved — pay by 10:20 UTC.", `href="https://pay.example/ann"`)

	f.h.buyerPay = true
	page := ann.send("GET", "/sales/lot", nil)
	mustContain(t, page.body, `action="/sales/lot/pay"`, `name="reservation" value="res-ann"`)
	a := ann.send("POST", "/sales/lot/pay", url.Values{"form_token": {formTokenOf(t, page.body)}, "reservation": {"res-ann"}})
	if loc := a.header.Get("Location"); loc != "/sales/lot?notice=paid&reservation=res-ann" {
		t.Fatalf("pay went back to %q", loc)
	}
	if c := api.called(); !slices.Contains(c, "POST /api/v1/reservations/res-ann/pay ann") {
		t.Errorf("the API was not asked to pay: %q", c)
	}
}

// TestHeldClaimFollowedByID: once the feed has found the claim a buyer
// holds, it follows that reservation by its id (one lookup) on every
// tick, not the list of the buyer's claims (a count and two range reads),
// and goes back to the list once the claim no longer holds.
func TestHeldClaimFollowedByID(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	api.places["ann"], api.claims["ann"] = 1, "ordered"
	fd := openFeed(t, f, "q", "tok-ann")
	if st := fd.next(); st.OrderStatus != "ordered" || st.ReservationID != "res-ann" || st.Ticket != "" {
		t.Fatalf("holding: %+v", st)
	}
	for range 3 {
		fd.keepAlive()
	}
	api.mu.Lock()
	api.claims["ann"] = "paid"
	api.mu.Unlock()
	if st := fd.next(); st.OrderStatus != "paid" || st.Headline != "Paid. Your order is confirmed." {
		t.Fatalf("paid: %+v", st)
	}
	count := func() (lists, lookups int) {
		for _, c := range api.called() {
			switch c {
			case "GET /api/v1/sales/q/reservations/mine ann":
				lists++
			case "GET /api/v1/reservations/res-ann ann":
				lookups++
			}
		}
		return lists, lookups
	}
	if lists, lookups := count(); lists != 1 || lookups < 4 {
		t.Fatalf("%d reads of the list and %d lookups of the claim while it held; want 1 and a lookup a tick", lists, lookups)
	}
	api.mu.Lock()
	api.claims["ann"] = "cancelled"
	api.mu.Unlock()
	if st := fd.next(); st.OrderStatus != "cancelled" || st.Ticket != "ticket-of-ann" {
		t.Fatalf("cancelled: %+v", st)
	}
	fd.keepAlive()
	if lists, _ := count(); lists < 2 {
		t.Fatalf("the list was not read again once the claim ended (%d reads)", lists)
	}
}
