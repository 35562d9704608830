package main

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// pageClient is a browser without a script: a cookie jar, forms posted
// as forms, redirects followed.
type pageClient struct {
	t    *testing.T
	e    *webEngine
	http *http.Client
}

func newPageClient(t *testing.T, e *webEngine) *pageClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &pageClient{t: t, e: e, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// get returns the page's text, entities decoded.
func (c *pageClient) get(path string) string {
	c.t.Helper()
	resp, err := c.http.Get(c.e.url + path)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.read(resp)
}

// post posts a form and returns the page it leads to, and where that is.
func (c *pageClient) post(path string, form url.Values) (page, at string) {
	c.t.Helper()
	resp, err := c.http.PostForm(c.e.url+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.read(resp), resp.Request.URL.RequestURI()
}

func (c *pageClient) read(resp *http.Response) string {
	c.t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: %d\n%s", resp.Request.URL, resp.StatusCode, b)
	}
	return html.UnescapeString(string(b))
}

// formToken is the form token of a rendered page.
func formToken(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `name="form_token" value="`)
	tok, _, _ := strings.Cut(rest, `"`)
	if !ok || tok == "" {
		t.Fatalf("no form token in the page:\n%s", page)
	}
	return tok
}

// headline is what the page's live region says.
func headline(page string) string {
	_, rest, _ := strings.Cut(page, `id="adm-headline"`)
	_, rest, _ = strings.Cut(rest, ">")
	h, _, _ := strings.Cut(rest, "<")
	return h
}

// TestBuyerPagesWithoutScript: on the real engine, buyers with no script
// sign in, enter a lottery and join a queue with plain forms, and read
// their standing from the page the server renders: in the draw, then won
// or lost; their place, then their turn, then buy with a form and see the
// reservation with its time to pay.
func TestBuyerPagesWithoutScript(t *testing.T) {
	e := &webEngine{engine: startEngine(t, func(c *Config) { c.DemoLogin, c.DrawInterval = "on", 50*time.Millisecond })}
	e.url = e.base
	sale, closeAt := e.createLottery(1, 1, 10*time.Second)

	ann, bob := newPageClient(t, e), newPageClient(t, e)
	for _, b := range []struct {
		c    *pageClient
		name string
	}{{ann, "ann"}, {bob, "bob"}} {
		if h := headline(b.c.get("/sales/" + sale)); h != "Sign in to enter the draw." {
			t.Fatalf("signed out: headline %q", h)
		}
		page, at := b.c.post("/sales/"+sale+"/session", url.Values{"name": {b.name}})
		if at != "/sales/"+sale+"?notice=signed_in" || headline(page) != "Enter the draw." {
			t.Fatalf("%s signed in: at %s, headline %q", b.name, at, headline(page))
		}
		page, _ = b.c.post("/sales/"+sale+"/enter", url.Values{"form_token": {formToken(t, page)}, "qty": {"1"}})
		if want := "You're in the draw, results at " + closeAt.UTC().Format("15:04") + " UTC."; headline(page) != want {
			t.Fatalf("%s entered: headline %q, want %q", b.name, headline(page), want)
		}
	}
	if time.Now().After(closeAt) {
		t.Fatal("the entries closed before both buyers entered: the machine is too slow for this test's window")
	}
	var results, pages []string
	// Every 250 ms, as a page polls: the draw comes two entry budgets
	// after the close, and faster reads would spend the buyers' read
	// budgets, which the queue below needs.
	waitEvery(t, time.Until(closeAt)+30*time.Second, 250*time.Millisecond, "both results", func() bool {
		pages = []string{ann.get("/sales/" + sale), bob.get("/sales/" + sale)}
		results = []string{headline(pages[0]), headline(pages[1])}
		return !strings.HasPrefix(results[0], "You're in the draw") && !strings.HasPrefix(results[1], "You're in the draw") &&
			!strings.Contains(results[0]+results[1], "being prepared")
	})
	won, lost := 0, 0
	for i, h := range results {
		switch {
		case strings.HasPrefix(h, "You won, pay by "):
			won++
			// The winner's page shows the order without a script too.
			if !strings.Contains(pages[i], `id="claim" class="headline">Reserved — pay by `) {
				t.Errorf("the winner's page does not show the order:\n%s", pages[i])
			}
		case h == "Not drawn this time.":
			lost++
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("results %q: want one winner with a time to pay by, one not drawn", results)
	}

	// The queue: a place before the start, the turn after it.
	now := time.Now()
	start := now.Add(5 * time.Second)
	q := servicetest.UniqueName("q")
	if r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": q, "name": "Console", "price_cents": 49900, "stock": 5, "per_user_limit": 1,
		"start_at": start.Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "queue", "admit_per_second": 1},
	}); r.status != http.StatusCreated {
		t.Fatalf("create queue sale: %d %v", r.status, r.body)
	}
	page := ann.get("/sales/" + q)
	if headline(page) != "Join the queue." {
		t.Fatalf("queue page: headline %q", headline(page))
	}
	page, at := ann.post("/sales/"+q+"/join", url.Values{"form_token": {formToken(t, page)}})
	if at != "/sales/"+q+"?notice=joined" || !strings.HasPrefix(headline(page), "Position 1 — ") {
		t.Fatalf("joined: at %s, headline %q", at, headline(page))
	}
	waitFor(t, 30*time.Second, "ann's turn", func() bool { page = ann.get("/sales/" + q); return headline(page) == "It's your turn." })
	// Ann buys with the page's form: the engine takes her ticket from her
	// place, and the page shows the claim, then its time to pay.
	_, rest, _ := strings.Cut(page, `name="key" value="`)
	key, _, _ := strings.Cut(rest, `"`)
	page, at = ann.post("/sales/"+q+"/buy", url.Values{"form_token": {formToken(t, page)}, "key": {key}, "qty": {"1"}})
	claim, ok := strings.CutPrefix(at, "/sales/"+q+"?notice=reserved&reservation=")
	if !ok || !strings.Contains(page, "Reserved.") {
		t.Fatalf("bought: at %s\n%s", at, page)
	}
	if strings.Contains(page, "Admission-Ticket") {
		t.Error("the page names the ticket")
	}
	waitFor(t, 30*time.Second, "ann's order", func() bool {
		return strings.Contains(ann.get("/sales/"+q+"?reservation="+claim), "Reserved — pay by ")
	})
	// Resending the form is the same claim, not a second one.
	if _, again := ann.post("/sales/"+q+"/buy", url.Values{"form_token": {formToken(t, page)}, "key": {key}, "qty": {"1"}}); again != at {
		t.Errorf("the resent form went to %s, want %s", again, at)
	}
	// Bob's session is his own: he has no place.
	if h := headline(bob.get("/sales/" + q)); h != "Join the queue." {
		t.Errorf("bob's queue page: headline %q, want to join", h)
	}
}

// TestFailedClaimShownAfterReload: a queue buyer whose reservation the
// database refused (over the limit: an order Redis never heard of) finds
// it on a later plain reload of the page, and in GET …/reservations/mine,
// as failed and not as units still on their way. The heal watcher is kept
// away, since it would give Redis that order and refuse the claim there.
func TestFailedClaimShownAfterReload(t *testing.T) {
	e := &webEngine{engine: startEngine(t, func(c *Config) { c.DemoLogin, c.HealInterval = "on", time.Hour })}
	e.url = e.base
	ctx := t.Context()
	q := e.createQueue(5, 10, time.Now().Add(2*time.Second))
	tok := e.token("ann")

	// Ann's order put in the database behind Redis's back: the database
	// counts her at the limit, Redis does not.
	first := seckill.ReservationEvent{ReservationID: seckill.NewReservationID(q, time.Now()), SaleID: q, UserID: "ann", Qty: 1, ReservedAt: time.Now()}
	if out, err := e.m.orders.PersistReservations(ctx, q, []seckill.ReservationEvent{first}, time.Now(), time.Hour); err != nil || out[0] != seckill.PersistCreated {
		t.Fatalf("ann's first order: %v %v", out, err)
	}
	if r := e.do("POST", "/api/v1/sales/"+q+"/queue", tok, nil); r.status != http.StatusOK {
		t.Fatalf("join: %d %v", r.status, r.body)
	}
	var ticket string
	waitFor(t, 30*time.Second, "ann's turn", func() bool {
		r := e.do("GET", "/api/v1/sales/"+q+"/queue/mine", tok, nil)
		ticket, _ = r.body["ticket"].(string)
		return r.body["admitted"] == true && ticket != ""
	})
	r := e.do("POST", "/api/v1/sales/"+q+"/reservations", tok, map[string]any{"qty": 1}, "Admission-Ticket", ticket)
	claim, _ := r.body["reservation_id"].(string)
	if r.status != http.StatusAccepted || claim == "" {
		t.Fatalf("ann's claim: %d %v", r.status, r.body)
	}
	waitFor(t, 30*time.Second, "the database's refusal", func() bool {
		return e.do("GET", "/api/v1/reservations/"+claim, tok, nil).body["status"] == "failed"
	})
	// Her first order ends, so the failed claim is the latest one.
	if _, _, err := e.m.orders.CancelOrder(ctx, first.ReservationID, "test", time.Now()); err != nil {
		t.Fatal(err)
	}

	mine := e.do("GET", "/api/v1/sales/"+q+"/reservations/mine", tok, nil)
	found := false
	for _, v := range mine.body["reservations"].([]any) {
		if m := v.(map[string]any); m["reservation_id"] == claim {
			found = m["status"] == "failed" && m["reason"] == seckill.EPURCHASELIMIT
		}
	}
	if mine.status != http.StatusOK || !found || mine.body["pending_units"] != float64(0) {
		t.Errorf("reservations/mine: %d %v; want %s failed (limit_exceeded) and no units pending", mine.status, mine.body, claim)
	}

	ann := newPageClient(t, e)
	ann.post("/sales/"+q+"/session", url.Values{"name": {"ann"}})
	if page := ann.get("/sales/" + q); !strings.Contains(page, `id="claim" class="headline">We could not finish this order automatically`) {
		t.Errorf("the reloaded page does not show the failed claim (headline %q):\n%s", headline(page), page)
	}
}
