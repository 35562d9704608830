package main

// End-to-end tests of the pages in a real browser (headless Chromium, driven
// by chromedp) against the real engine in its embedded default. Screenshots
// of each state are kept in a temporary folder whose path the tests log.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/seckill-dev/seckill"
)

const chromiumPath = "/usr/bin/chromium"

// requireChromium skips the test when Chromium is not installed, unless
// SECKILL_TEST_REQUIRE_SERVICES=1 (CI), where a missing browser fails.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		msg := fmt.Sprintf("browser tests need Chromium at %s (run .ci/install-chromium, or apt-get install -y chromium): %v", chromiumPath, err)
		if os.Getenv("SECKILL_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// webEngine is an engine serving the pages (demo login on) and its URL.
type webEngine struct {
	*engine
	url string
}

func startWebEngine(t *testing.T, hooks ...func(*Main)) *webEngine {
	t.Helper()
	e := startEngine(t, func(c *Config) { c.DemoLogin, c.BuyerPay = "on", "on" }, hooks...)
	return &webEngine{engine: e, url: e.base}
}

// --- the browser ------------------------------------------------------------

// newBrowser starts headless Chromium with the flags this machine's closed
// network needs, and a fresh profile.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	requireChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// browserTab is one page in its own browser context: its own sessionStorage,
// as a different person's phone would have.
type browserTab struct {
	t    *testing.T
	ctx  context.Context
	name string

	mu     sync.Mutex
	errors []string // uncaught exceptions and console errors
}

func openTab(t *testing.T, browser context.Context, name string) *browserTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel() })
	tb := &browserTab{t: t, ctx: ctx, name: name}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab %s: %v", name, err)
	}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.errors = append(tb.errors, "exception: "+describeException(ev))
			tb.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				tb.mu.Lock()
				tb.errors = append(tb.errors, "console.error: "+strings.Join(parts, " "))
				tb.mu.Unlock()
			}
		}
	}()
	return tb
}

func describeException(ev runtime.EventExceptionThrown) string {
	d := ev.ExceptionDetails
	switch {
	case d == nil:
		return "(no details)"
	case d.Exception != nil:
		return d.Text + " " + d.Exception.Description
	}
	return d.Text
}

// noErrors fails the test for any script error the page had.
func (tb *browserTab) noErrors() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, e := range tb.errors {
		tb.t.Errorf("%s: script error: %s", tb.name, e)
	}
}

func (tb *browserTab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", tb.name, err)
	}
}

// js evaluates an expression and returns its value.
func evalJS[T any](tb *browserTab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("%s: evaluate %s: %v", tb.name, expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it holds; on a timeout it
// saves a screenshot and fails with what the page says. A navigation under
// way (a redirect through another site and back) leaves no page to poll
// in for a moment: the poll starts again on the next one.
func (tb *browserTab) waitFor(what, cond string, timeout time.Duration) {
	tb.t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		err = chromedp.Do(tb.ctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(100*time.Millisecond)))
		if err == nil || !strings.Contains(err.Error(), "Cannot find context") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		tb.shot("timeout-" + strings.ReplaceAll(what, " ", "-"))
		text, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		tb.t.Fatalf("%s: waiting for %s: %v\npage text:\n%s", tb.name, what, err, text)
	}
}

// pauseRequests holds each request of the tab whose URL matches pattern
// (a Fetch.RequestPattern: "*" any run, "?" one character, "\\" escapes)
// and sends it on paused, until stop; resume lets one go.
func (tb *browserTab) pauseRequests(pattern string) (paused <-chan fetch.EventRequestPaused, stop func()) {
	tb.t.Helper()
	return tb.pauseAt(pattern, fetch.RequestStageRequest)
}

// pauseResponses is pauseRequests for the answers: each request is sent
// (with the cookies of that moment) and its response held.
func (tb *browserTab) pauseResponses(pattern string) (paused <-chan fetch.EventRequestPaused, stop func()) {
	tb.t.Helper()
	return tb.pauseAt(pattern, fetch.RequestStageResponse)
}

func (tb *browserTab) pauseAt(pattern string, stage fetch.RequestStage) (paused <-chan fetch.EventRequestPaused, stop func()) {
	tb.t.Helper()
	ctx, cancel := context.WithCancel(tb.ctx)
	events := chromedp.Events(ctx, fetch.RequestPaused)
	ch := make(chan fetch.EventRequestPaused, 64)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			ch <- ev
		}
	}()
	if _, err := chromedp.Call(tb.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern, RequestStage: stage}}}); err != nil {
		tb.t.Fatalf("%s: hold requests: %v", tb.name, err)
	}
	return ch, func() {
		tb.t.Helper()
		// Disabling the domain lets go what it still holds.
		if _, err := chromedp.Call(tb.ctx, fetch.Disable, cdp.Empty{}); err != nil {
			tb.t.Errorf("%s: stop holding requests: %v", tb.name, err)
		}
		cancel()
	}
}

// nextPaused waits for the next request pauseRequests holds.
func (tb *browserTab) nextPaused(paused <-chan fetch.EventRequestPaused, what string) fetch.EventRequestPaused {
	tb.t.Helper()
	select {
	case ev := <-paused:
		return ev
	case <-time.After(30 * time.Second):
		tb.t.Fatalf("%s: gave up after 30s waiting for %s", tb.name, what)
	}
	panic("unreachable")
}

// resume lets a request held by pauseRequests go.
func (tb *browserTab) resume(ev fetch.EventRequestPaused) {
	tb.t.Helper()
	if _, err := chromedp.Call(tb.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID}); err != nil {
		tb.t.Fatalf("%s: let %s go: %v", tb.name, ev.Request.URL, err)
	}
}

func (tb *browserTab) text(id string) string {
	tb.t.Helper()
	return evalJS[string](tb, `document.getElementById(`+strconv.Quote(id)+`).textContent.trim()`)
}

var (
	shotsOnce sync.Once
	shotsDir  string
)

// shot saves a full-page screenshot and logs its path.
func (tb *browserTab) shot(name string) {
	tb.t.Helper()
	shotsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-screenshots-")
		if err != nil {
			tb.t.Fatal(err)
		}
		shotsDir = dir
	})
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Errorf("%s: screenshot %s: %v", tb.name, name, err)
		return
	}
	path := filepath.Join(shotsDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s: %s", name, path)
}

func phoneSized() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile)
}

func desktopSized() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(1280, 900)
}

// signIn uses the demo sign-in of the buyer page.
func (tb *browserTab) signIn(name string) {
	tb.t.Helper()
	tb.waitFor("the demo sign-in", `!document.getElementById("signin").hidden`, 30*time.Second)
	tb.do(chromedp.SendKeys(chromedp.ID("demo-name"), name), chromedp.Click(chromedp.ID("demo-submit")))
	tb.waitFor("signed in", `!document.getElementById("account").hidden && document.getElementById("who").textContent === `+strconv.Quote(name), 30*time.Second)
}

// --- the tests ------------------------------------------------------------------

// TestBrowserBuyer: a buyer on a phone waits for the countdown, buys, waits
// through a slow order pipeline, sees the order and pays; a second buyer
// sees the sale sold out; a double click buys once.
func TestBrowserBuyer(t *testing.T) {
	// The writer is held, not the relay: the embedded store answers a
	// claim only once the relay has stored it in the broker.
	writer := &heldWriter{open: make(chan struct{})}
	e := startWebEngine(t, wrapRole("writer", func(b seckill.Broker) seckill.Broker { writer.Broker = b; return writer }))
	t.Cleanup(writer.release)
	// The buyers sign in and watch the countdown on a sale an hour away,
	// so that a browser slowed by a loaded machine cannot miss it; then
	// they go, signed in, to the sale they buy in, which starts moments
	// after they are ready.
	later := e.createSale(1, 1, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	browser := startChromium(t)

	alice := openTab(t, browser, "alice")
	alice.do(phoneSized(), chromedp.Navigate(e.url+"/sales/"+later))
	alice.waitFor("the demo sign-in", `!document.getElementById("signin").hidden`, 30*time.Second)
	alice.shot("00-buyer-sign-in-phone")
	alice.signIn("alice")
	alice.waitFor("the countdown", `/\d\d:\d\d/.test(document.getElementById("countdown").textContent)`, 30*time.Second)
	if got := alice.text("phase"); got != "Starts in" {
		t.Errorf("phase before the start %q, want %q", got, "Starts in")
	}
	if evalJS[bool](alice, `document.getElementById("buy").disabled`) == false {
		t.Error("the buy button is enabled before the start")
	}
	alice.shot("01-buyer-countdown-phone")

	bob := openTab(t, browser, "bob")
	bob.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+later))
	bob.signIn("bob")

	start := time.Now().Add(3 * time.Second)
	sale := e.createSale(1, 1, start, start.Add(time.Hour))
	alice.do(chromedp.Navigate(e.url + "/sales/" + sale))
	bob.do(chromedp.Navigate(e.url + "/sales/" + sale))
	alice.waitFor("the buy button to turn on", `!document.getElementById("buy").disabled`, 30*time.Second)
	if early := time.Until(start); early > 500*time.Millisecond {
		t.Errorf("the buy button turned on %v before the start", early)
	}
	bob.waitFor("bob's buy button to turn on", `!document.getElementById("buy").disabled`, 30*time.Second)

	alice.do(chromedp.Click(chromedp.ID("buy")))
	alice.waitFor("the claim", `document.getElementById("status").textContent.includes("Claimed! Generating your order")`, 30*time.Second)
	// Bob presses Buy right after: he gets "sold out", from the API's 409
	// or, if his page polled the stock first, from the stock itself.
	_ = evalJS[bool](bob, `(function(){ const b = document.getElementById("buy"); if (!b.disabled) b.click(); return true })()`)
	bob.waitFor("sold out", `document.getElementById("phase").textContent === "Sold out" && document.getElementById("buy").disabled`, 30*time.Second)
	if msg := bob.text("problem") + " " + bob.text("when-note"); !strings.Contains(msg, "claimed") {
		t.Errorf("bob's page does not explain the sell-out: %q", msg)
	}
	alice.shot("02-buyer-claimed-phone")
	bob.shot("03-second-buyer-sold-out")

	// The order pipeline is held: after 30 s of polling the page says to
	// check back later, never a failure.
	alice.waitFor("check back later", `document.getElementById("status").textContent.includes("check back later") && !document.getElementById("recheck").hidden`, 45*time.Second)
	if !evalJS[bool](alice, `document.getElementById("problem").hidden`) {
		t.Errorf("a slow order shows a problem: %q", alice.text("problem"))
	}
	alice.shot("04-buyer-check-back-later-phone")

	writer.release()
	alice.do(chromedp.Click(chromedp.ID("recheck")))
	alice.waitFor("the order", `!document.getElementById("order").hidden && !document.getElementById("pay").hidden`, 30*time.Second)
	if got := alice.text("order-status"); got != "Waiting for payment" {
		t.Errorf("order status %q", got)
	}
	if alice.text("order-payby") == "" {
		t.Error("the order shows no pay-by time")
	}
	alice.shot("05-buyer-order-phone")

	alice.do(chromedp.Click(chromedp.ID("pay")))
	alice.waitFor("paid", `document.getElementById("order-status").textContent === "Paid"`, 30*time.Second)
	alice.shot("06-buyer-paid-phone")

	// The engine agrees.
	resID := evalJS[string](alice, `sessionStorage.getItem("seckill.claim.`+sale+`")`)
	tok := evalJS[string](alice, `sessionStorage.getItem("seckill.buyerToken")`)
	if r := e.do("GET", "/api/v1/reservations/"+resID, tok, nil); r.body["status"] != "paid" {
		t.Errorf("the engine has reservation %s as %d %v, want paid", resID, r.status, r.body)
	}
	if lvl := e.stock(sale); lvl.Reserved != 1 {
		t.Errorf("reserved %d units of 1", lvl.Reserved)
	}

	t.Run("double click buys once", func(t *testing.T) {
		sale := e.liveSale(5, 5)
		carol := openTab(t, browser, "carol")
		carol.do(phoneSized(), chromedp.Navigate(e.url+"/sales/"+sale))
		carol.signIn("carol")
		carol.waitFor("the buy button", `!document.getElementById("buy").disabled`, 30*time.Second)
		carol.do(chromedp.DoubleClick(chromedp.ID("buy")))
		carol.waitFor("the order", `!document.getElementById("pay").hidden`, 30*time.Second)
		if lvl := e.stock(sale); lvl.Reserved != 1 {
			t.Errorf("a double click reserved %d units", lvl.Reserved)
		}
		// In another tab, which has no memory of it, her page finds the
		// claim and offers no second purchase.
		again := openTab(t, browser, "carol-again")
		again.do(desktopSized(), chromedp.Navigate(e.url+"/sales/"+sale))
		again.signIn("carol")
		again.waitFor("carol's claim in another tab", `!document.getElementById("order").hidden && document.getElementById("buy-box").hidden`, 30*time.Second)
		carol.noErrors()
		again.noErrors()
	})

	alice.noErrors()
	bob.noErrors()
}

// TestBrowserControlRoom: an operator signs in, creates and preheats a sale,
// and watches the stock fall live while a crowd buys.
// datetimeLocal is t in local time as an <input type="datetime-local">
// holds it. The browser normalises the value, leaving the seconds out when
// they are 0, and SetValue reads back what it set: written with ":00", one
// start instant in sixty failed it ("could not set value on node").
func datetimeLocal(t time.Time) string {
	if t.Local().Second() == 0 {
		return t.Local().Format("2006-01-02T15:04")
	}
	return t.Local().Format("2006-01-02T15:04:05")
}

func TestBrowserControlRoom(t *testing.T) {
	e := startWebEngine(t)
	browser := startChromium(t)
	op := openTab(t, browser, "operator")
	op.do(desktopSized(), chromedp.Navigate(e.url+"/admin"))
	op.waitFor("the sign-in", `!document.getElementById("admin-signin").hidden`, 30*time.Second)
	op.do(chromedp.SendKeys(chromedp.ID("admin-token"), "not-the-token"), chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)))
	op.waitFor("the refusal", `!document.getElementById("signin-error").hidden`, 30*time.Second)
	op.shot("06b-control-room-sign-in-refused")
	op.do(chromedp.SetValue(chromedp.ID("admin-token"), e.m.Config.AdminToken), chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)))
	op.waitFor("the console", `!document.getElementById("console").hidden`, 30*time.Second)
	if strings.Contains(evalJS[string](op, `location.href`), e.m.Config.AdminToken) {
		t.Error("the admin token is in the URL")
	}

	const stock = 300
	id := fmt.Sprintf("rush-%d", time.Now().UnixNano())
	start := time.Now().Add(4 * time.Second)
	op.do(
		chromedp.SetValue(chromedp.ID("c-name"), "Tea gift set (rush)"),
		chromedp.SetValue(chromedp.ID("c-stock"), strconv.Itoa(stock)),
		chromedp.SetValue(chromedp.ID("c-limit"), "1"),
		chromedp.SetValue(chromedp.ID("c-price"), "99.00"),
		chromedp.SetValue(chromedp.ID("c-start"), datetimeLocal(start)),
		chromedp.SetValue(chromedp.ID("c-id"), id),
		chromedp.Click(chromedp.CSS(`#create-form button[type=submit]`)),
	)
	op.waitFor("the new sale", `!document.getElementById("sale-view").hidden && document.getElementById("sale-title").textContent === "Tea gift set (rush)"`, 30*time.Second)
	op.do(chromedp.Click(chromedp.ID("preheat")))
	op.waitFor("the preheat", `/reheated/.test(document.getElementById("action-msg").textContent)`, 30*time.Second)
	op.waitFor("the live feed", `document.getElementById("t-remaining").textContent === "`+strconv.Itoa(stock)+`"`, 30*time.Second)
	op.shot("07-control-room-before-rush")

	// The crowd: waves of buyers for about four seconds, more than the stock.
	time.Sleep(time.Until(start) + 200*time.Millisecond)
	const waves, perWave = 10, 40
	tokens := make([]string, waves*perWave)
	for i := range tokens {
		tokens[i] = e.token(fmt.Sprintf("crowd-%d", i))
	}
	var (
		wg   sync.WaitGroup
		seen []int
	)
	readRemaining := func() {
		v, err := strconv.Atoi(strings.ReplaceAll(op.text("t-remaining"), ",", ""))
		if err == nil && (len(seen) == 0 || seen[len(seen)-1] != v) {
			seen = append(seen, v)
		}
	}
	readRemaining()
	for w := range waves {
		for i := range perWave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.reserve(id, tokens[w*perWave+i], 1, "")
			}()
		}
		for range 4 {
			time.Sleep(100 * time.Millisecond)
			readRemaining()
		}
		if w == waves/2 {
			op.shot("08-control-room-during-rush")
		}
	}
	wg.Wait()
	op.waitFor("sold out on the dashboard", `document.getElementById("t-remaining").textContent === "0"`, 60*time.Second)
	readRemaining()
	op.waitFor("every order persisted", `document.getElementById("t-orders").textContent === "`+strconv.Itoa(stock)+`"`, 90*time.Second)
	op.waitFor("reservation rates", `document.getElementById("legend-rates").textContent.includes("sold out")`, 30*time.Second)
	op.shot("09-control-room-after-rush")

	t.Logf("remaining stock as the control room showed it: %v", seen)
	if len(seen) < 3 || seen[0] != stock || seen[len(seen)-1] != 0 {
		t.Errorf("the control room showed %v: want %d, values in between, then 0", seen, stock)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] > seen[i-1] {
			t.Errorf("the stock rose from %d to %d during a rush with no restore", seen[i-1], seen[i])
		}
	}
	if got := op.text("t-failed"); got != "0" {
		t.Errorf("failed orders %q, want 0", got)
	}
	op.waitFor("a balanced reconciliation", `document.getElementById("t-recon").textContent === "balanced"`, 30*time.Second)
	if got := e.stock(id); got.Reserved != stock {
		t.Errorf("reserved %d, want %d", got.Reserved, stock)
	}

	// A failed order appears in the list with its restore action.
	failedID := seckill.NewReservationID(id, time.Now())
	if err := e.m.orders.RecordFailedOrder(context.Background(), &seckill.FailedOrder{
		ReservationID: failedID, SaleID: id, UserID: "unlucky", Qty: 1,
		Reason: "database rejected the order (test)", Attempts: 5, CreatedAt: time.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	op.waitFor("the failed order", `document.getElementById("t-failed").textContent === "1" && document.getElementById("failed-body").textContent.includes("`+failedID+`")`, 30*time.Second)
	op.do(
		chromedp.SendKeys(chromedp.CSS(`#failed-body input`), "refund requested"),
		chromedp.Click(chromedp.CSS(`#failed-body button[data-action=restore]`)),
	)
	op.waitFor("the restore's answer", `(function(){ const m = document.getElementById("failed-msg").textContent; return m !== "" && !m.startsWith("Restoring") })()`, 30*time.Second)
	t.Logf("restore answered: %s", op.text("failed-msg"))
	op.shot("10-control-room-failed-order")
	op.noErrors()
}
