package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/fakestore"
)

const saleBody = `{"id":"tea-2030","name":"Tea gift set","price_cents":9900,"stock":200,"per_user_limit":1,` +
	`"start_at":"2030-01-01T12:00:00Z","end_at":"2030-01-01T13:00:00Z"}`

func TestCreateSale(t *testing.T) {
	e := newEnv(t)
	w := e.do(req{method: "POST", path: "/admin/v1/sales", body: saleBody, auth: admin()})
	var got seckill.Sale
	decode(t, w, http.StatusCreated, &got)
	want := *testSale()
	want.CreatedAt = t0
	if got != want {
		t.Fatalf("answer = %+v, want %+v", got, want)
	}
	if loc := w.Header().Get("Location"); loc != "/admin/v1/sales/"+testSaleID {
		t.Fatalf("Location = %q", loc)
	}
	if len(e.sales.Created) != 1 || *e.sales.Created[0] != want {
		t.Fatalf("stored %+v, want %+v", e.sales.Created, want)
	}
	if len(e.created) != 1 || *e.created[0] != want {
		t.Fatalf("OnSaleCreated saw %+v, want one call with %+v", e.created, want)
	}

	// Same id again: 409 conflict, and no second hook call.
	w = e.do(req{method: "POST", path: "/admin/v1/sales", body: saleBody, auth: admin()})
	wantError(t, w, http.StatusConflict, seckill.ECONFLICT)
	if len(e.created) != 1 {
		t.Fatalf("OnSaleCreated called for a rejected sale")
	}
}

func TestCreateSaleGeneratesID(t *testing.T) {
	e := newEnv(t)
	body := strings.Replace(saleBody, `"id":"tea-2030",`, "", 1)
	var a, b seckill.Sale
	decode(t, e.do(req{method: "POST", path: "/admin/v1/sales", body: body, auth: admin()}), http.StatusCreated, &a)
	decode(t, e.do(req{method: "POST", path: "/admin/v1/sales", body: body, auth: admin()}), http.StatusCreated, &b)
	if !seckill.ValidSaleID(a.ID) || !seckill.ValidSaleID(b.ID) || a.ID == b.ID {
		t.Fatalf("generated ids %q, %q: want two distinct valid sale ids", a.ID, b.ID)
	}
	// Room for the reservation id suffix is the domain's concern, but a
	// generated id should be a usable one.
	if _, ok := seckill.SaleIDOfReservation(seckill.NewReservationID(a.ID, t0)); !ok {
		t.Fatalf("generated id %q does not make valid reservation ids", a.ID)
	}
}

func TestCreateSaleNormalisesTimes(t *testing.T) {
	e := newEnv(t)
	body := strings.NewReplacer(
		`"2030-01-01T12:00:00Z"`, `"2030-01-01T14:00:00.1234567+02:00"`,
		`"2030-01-01T13:00:00Z"`, `"2030-01-01T15:00:00+02:00"`,
	).Replace(saleBody)
	var got seckill.Sale
	decode(t, e.do(req{method: "POST", path: "/admin/v1/sales", body: body, auth: admin()}), http.StatusCreated, &got)
	wantStart := time.Date(2030, 1, 1, 12, 0, 0, 123456000, time.UTC)
	if !got.StartAt.Equal(wantStart) || got.StartAt.Location() != time.UTC {
		t.Fatalf("start_at = %v, want %v in UTC at µs precision", got.StartAt, wantStart)
	}
}

func TestCreateSaleRejects(t *testing.T) {
	set := func(field, value string) string {
		// Replace one field's value in saleBody.
		i := strings.Index(saleBody, `"`+field+`":`)
		if i < 0 {
			panic(field)
		}
		j := i + len(field) + 3
		k := strings.IndexAny(saleBody[j:], ",}")
		if saleBody[j] == '"' {
			k = strings.Index(saleBody[j+1:], `"`) + 2
		}
		return saleBody[:j] + value + saleBody[j+k:]
	}
	drop := func(field string) string {
		s := set(field, `0`)
		return strings.Replace(s, `"`+field+`":0,`, "", 1)
	}
	cases := []struct {
		name, body  string
		contentType string
		status      int
		code        string
	}{
		{name: "no body", body: "", status: 400, code: seckill.EINVALID},
		{name: "malformed", body: saleBody[:40], status: 400, code: seckill.EINVALID},
		{name: "unknown field", body: strings.Replace(saleBody, `{`, `{"version":7,`, 1), status: 400, code: seckill.EINVALID},
		{name: "trailing data", body: saleBody + `{}`, status: 400, code: seckill.EINVALID},
		{name: "stock as string", body: set("stock", `"200"`), status: 400, code: seckill.EINVALID},
		{name: "stock 0", body: set("stock", `0`), status: 400, code: seckill.EINVALID},
		{name: "stock huge", body: set("stock", `1000000000000`), status: 400, code: seckill.EINVALID},
		{name: "limit 0", body: set("per_user_limit", `0`), status: 400, code: seckill.EINVALID},
		{name: "price missing", body: drop("price_cents"), status: 400, code: seckill.EINVALID},
		{name: "price negative", body: set("price_cents", `-1`), status: 400, code: seckill.EINVALID},
		{name: "bad id", body: set("id", `"a.b"`), status: 400, code: seckill.EINVALID},
		{name: "empty name", body: set("name", `""`), status: 400, code: seckill.EINVALID},
		{name: "control in name", body: set("name", `"tea\u0007"`), status: 400, code: seckill.EINVALID},
		{name: "start missing", body: set("start_at", `""`), status: 400, code: seckill.EINVALID},
		{name: "start not RFC 3339", body: set("start_at", `"2030-01-01 12:00:00"`), status: 400, code: seckill.EINVALID},
		{name: "start as number", body: set("start_at", `1893499200`), status: 400, code: seckill.EINVALID},
		{name: "end before start", body: set("end_at", `"2030-01-01T11:00:00Z"`), status: 400, code: seckill.EINVALID},
		{name: "too long", body: set("end_at", `"2032-01-01T13:00:00Z"`), status: 400, code: seckill.EINVALID},
		{name: "over 8 KiB", body: set("name", `"`+strings.Repeat("n", MaxBodyBytes)+`"`), status: 413, code: seckill.ETOOLARGE},
		{name: "xml", body: saleBody, contentType: "application/xml", status: 400, code: seckill.EINVALID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			r := req{method: "POST", path: "/admin/v1/sales", body: c.body, auth: admin()}
			if c.contentType != "" {
				r.headers = map[string][]string{"Content-Type": {c.contentType}}
			}
			wantError(t, e.do(r), c.status, c.code)
			if len(e.sales.Created) != 0 {
				t.Fatalf("stored a rejected sale: %+v", e.sales.Created[0])
			}
		})
	}
	// The helpers above build valid variations, so the rejections are for
	// the reason named.
	e := newEnv(t)
	if w := e.do(req{method: "POST", path: "/admin/v1/sales", body: set("stock", `5`), auth: admin()}); w.Code != http.StatusCreated {
		t.Fatalf("control: %d %s", w.Code, w.Body)
	}
}

func TestCreateSaleStoreFailure(t *testing.T) {
	e := newEnv(t)
	e.sales.Err = errors.New("database is locked")
	w := e.do(req{method: "POST", path: "/admin/v1/sales", body: saleBody, auth: admin()})
	wantError(t, w, http.StatusInternalServerError, seckill.EINTERNAL)
	if !strings.Contains(e.logs.String(), "database is locked") {
		t.Fatalf("internal error not logged: %q", e.logs)
	}
}

func TestAdminAuth(t *testing.T) {
	routes := []struct{ method, path, body string }{
		{"POST", "/admin/v1/sales", saleBody},
		{"GET", "/admin/v1/sales/" + testSaleID, ""},
		{"POST", "/admin/v1/sales/" + testSaleID + "/preheat", ""},
	}
	auths := map[string]string{
		"missing":       "",
		"buyer JWT":     "Bearer " + buyerToken(t, "bob"),
		"wrong token":   "Bearer " + testAdminToken + "x",
		"token prefix":  "Bearer " + testAdminToken[:10],
		"basic scheme":  "Basic " + testAdminToken,
		"no scheme":     testAdminToken,
		"bearer only":   "Bearer",
		"bearer blanks": "Bearer    ",
	}
	for _, rt := range routes {
		for name, auth := range auths {
			t.Run(rt.method+" "+rt.path+"/"+name, func(t *testing.T) {
				e := newEnv(t)
				e.sales.Put(testSale())
				wantError(t, e.do(req{method: rt.method, path: rt.path, body: rt.body, auth: auth}), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
				if len(e.sales.Created) != 0 || len(e.stock.Preheats) != 0 || e.sales.SaleCalls.Load() != 0 {
					t.Fatal("an unauthorised admin call touched a store")
				}
			})
		}
	}
	t.Run("admin disabled", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.AdminToken = "" })
		for _, auth := range []string{"", "Bearer ", "Bearer x"} {
			wantError(t, e.do(req{method: "POST", path: "/admin/v1/sales", body: saleBody, auth: auth}), http.StatusUnauthorized, seckill.EUNAUTHORIZED)
		}
	})
}

func TestAdminGetSale(t *testing.T) {
	e := newEnv(t)
	e.sales.Put(testSale())
	var got seckill.Sale
	decode(t, e.do(req{method: "GET", path: "/admin/v1/sales/" + testSaleID, auth: admin()}), http.StatusOK, &got)
	if got != *testSale() {
		t.Fatalf("got %+v, want %+v", got, *testSale())
	}
	wantError(t, e.do(req{method: "GET", path: "/admin/v1/sales/nope", auth: admin()}), http.StatusNotFound, seckill.ESALENOTFOUND)
	wantError(t, e.do(req{method: "GET", path: "/admin/v1/sales/a.b", auth: admin()}), http.StatusNotFound, seckill.ESALENOTFOUND)
}

func TestPreheat(t *testing.T) {
	e := newEnv(t)
	e.sales.Put(testSale())
	path := "/admin/v1/sales/" + testSaleID + "/preheat"
	for i, wantCreated := range []bool{true, false} {
		var got preheatResponse
		decode(t, e.do(req{method: "POST", path: path, auth: admin()}), http.StatusOK, &got)
		want := preheatResponse{SaleID: testSaleID, Preheated: true, Created: wantCreated}
		if got != want {
			t.Fatalf("call %d: %+v, want %+v", i+1, got, want)
		}
	}
	wantError(t, e.do(req{method: "POST", path: "/admin/v1/sales/nope/preheat", auth: admin()}), http.StatusNotFound, seckill.ESALENOTFOUND)

	e.stock.Err = seckill.Errorf(seckill.EUNAVAILABLE, "Stock store unreachable.")
	wantError(t, e.do(req{method: "POST", path: path, auth: admin()}), http.StatusServiceUnavailable, seckill.EUNAVAILABLE)
}

type recordingPreheater struct{ ids []string }

func (p *recordingPreheater) Preheat(_ context.Context, s *seckill.Sale) (bool, error) {
	p.ids = append(p.ids, s.ID)
	return true, nil
}

func TestPreheatUsesPreheater(t *testing.T) {
	p := &recordingPreheater{}
	e := newEnv(t, func(c *Config) { c.Preheater = p })
	e.sales.Put(testSale())
	if w := e.do(req{method: "POST", path: "/admin/v1/sales/" + testSaleID + "/preheat", auth: admin()}); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if len(p.ids) != 1 || p.ids[0] != testSaleID || len(e.stock.Preheats) != 0 {
		t.Fatalf("preheater saw %v, stock store saw %v; want the preheater only", p.ids, e.stock.Preheats)
	}
}

func TestPublicSale(t *testing.T) {
	s := testSale()
	cases := []struct {
		name      string
		now       time.Time
		level     *seckill.StockLevel // nil: not preheated
		remaining int64
		state     seckill.SaleState
	}{
		{"scheduled, not preheated", t0, nil, 200, seckill.SaleScheduled},
		{"scheduled, preheated", t0, &seckill.StockLevel{Total: 200}, 200, seckill.SaleScheduled},
		{"live", s.StartAt, &seckill.StockLevel{Total: 200, Reserved: 150}, 50, seckill.SaleLive},
		{"sold out", s.StartAt.Add(time.Minute), &seckill.StockLevel{Total: 200, Reserved: 200}, 0, seckill.SaleSoldOut},
		{"ended", s.EndAt, &seckill.StockLevel{Total: 200, Reserved: 10}, 190, seckill.SaleEnded},
		// Redis says more than the database has unsold (they disagree
		// after lost writes): the database's figure is shown.
		{"redis above the database", s.StartAt, &seckill.StockLevel{Total: 203, Reserved: 0}, 200, seckill.SaleLive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.sales.Put(s)
			e.clock.Set(c.now)
			if c.level != nil {
				e.stock.Levels[s.ID] = *c.level
			}
			var got saleView
			decode(t, e.do(req{method: "GET", path: "/api/v1/sales/" + s.ID}), http.StatusOK, &got)
			want := saleView{ID: s.ID, Name: s.Name, PriceCents: s.PriceCents, Stock: s.Stock, Remaining: c.remaining,
				PurchaseLimit: s.PurchaseLimit, StartAt: s.StartAt, EndAt: s.EndAt, State: c.state}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestPublicSaleErrors(t *testing.T) {
	e := newEnv(t)
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/nope"}), http.StatusNotFound, seckill.ESALENOTFOUND)
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/%7Bx%7D"}), http.StatusNotFound, seckill.ESALENOTFOUND)
	e.sales.Put(testSale())
	e.stock.Err = errors.New("redis down")
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusInternalServerError, seckill.EINTERNAL)
}

func TestPublicSaleCache(t *testing.T) {
	e := newEnv(t)
	e.sales.Put(testSale())
	get := func(id string) int { return e.do(req{method: "GET", path: "/api/v1/sales/" + id}).Code }
	for range 20 {
		if get(testSaleID) != 200 || get("ghost") != 404 {
			t.Fatal("unexpected status")
		}
	}
	if n := e.sales.SaleCalls.Load(); n != 2 {
		t.Fatalf("sale store reads = %d, want 2 (the sale and the not-found, once each)", n)
	}
	// Within the TTL a change in the database is not seen; after it, it is.
	changed := testSale()
	changed.Name = "Renamed"
	e.sales.Put(changed)
	e.clock.Advance(DefaultSaleCacheTTL - time.Millisecond)
	var v saleView
	decode(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusOK, &v)
	if v.Name != "Tea gift set" {
		t.Fatalf("name = %q before the TTL, want the cached one", v.Name)
	}
	e.clock.Advance(time.Millisecond)
	decode(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusOK, &v)
	if v.Name != "Renamed" {
		t.Fatalf("name = %q after the TTL, want the new one", v.Name)
	}
}

// TestCachedSalesShareTheAPICache: the pages read sales through the API's
// cache (CachedSales), so a refresh storm on a sale's page or a flood of
// made-up ids costs the database one read an id a TTL, as the API does.
// Before, every page load was a database read.
func TestCachedSalesShareTheAPICache(t *testing.T) {
	e := newEnv(t)
	e.sales.Put(testSale())
	pages := e.srv.CachedSales()
	for range 20 {
		if s, err := pages.Sale(t.Context(), testSaleID); err != nil || s.ID != testSaleID {
			t.Fatalf("Sale = %v, %v", s, err)
		}
		if _, err := pages.Sale(t.Context(), "ghost"); !errors.Is(err, seckill.ErrNotFound) {
			t.Fatalf("Sale of a made-up id = %v; want not found", err)
		}
	}
	if e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}).Code != 200 {
		t.Fatal("the API's read of the sale failed")
	}
	if n := e.sales.SaleCalls.Load(); n != 2 {
		t.Fatalf("sale store reads = %d, want 2 (the sale and the not-found, once each)", n)
	}
}

// TestSaleCacheBoundsLoadsOfUnknownIds: a flood of made-up ids reads the
// database at most saleLoadBurst times at once and saleLoadRate a second;
// beyond that an unknown id is 503 with Retry-After (it may exist, so not
// 404), while a sale read before is still answered, from its last row.
// Before, every made-up id was a database read.
func TestSaleCacheBoundsLoadsOfUnknownIds(t *testing.T) {
	e := newEnv(t)
	e.sales.Put(testSale())
	get := func(id string) *httptest.ResponseRecorder {
		return e.do(req{method: "GET", path: "/api/v1/sales/" + id})
	}
	if r := get(testSaleID); r.Code != http.StatusOK {
		t.Fatalf("the sale = %d", r.Code)
	}
	e.clock.Advance(DefaultSaleCacheTTL) // its entry expires: the next read is a miss too
	busy := 0
	for i := range 3 * saleLoadBurst {
		r := get("ghost" + strconv.Itoa(i))
		switch {
		case r.Code == http.StatusNotFound:
		case r.Code == http.StatusServiceUnavailable && r.Header().Get("Retry-After") != "":
			busy++
		default:
			t.Fatalf("made-up id %d = %d %s; want 404, or 503 with Retry-After", i, r.Code, r.Body)
		}
	}
	if n := e.sales.SaleCalls.Load(); n > 1+saleLoadBurst {
		t.Fatalf("sale store reads = %d for %d made-up ids; want at most %d", n, 3*saleLoadBurst, 1+saleLoadBurst)
	}
	if busy < 2*saleLoadBurst-1 {
		t.Fatalf("%d made-up ids answered 503; want the %d past the budget", busy, 2*saleLoadBurst)
	}
	if r := get(testSaleID); r.Code != http.StatusOK {
		t.Fatalf("the sale during the flood = %d %s; want 200 from its last row", r.Code, r.Body)
	}
	e.clock.Advance(time.Second) // the budget refills
	if r := get("ghost-later"); r.Code != http.StatusNotFound {
		t.Fatalf("a made-up id a second later = %d; want 404", r.Code)
	}
}

func TestCreateSaleClearsCachedNotFound(t *testing.T) {
	e := newEnv(t)
	wantError(t, e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}), http.StatusNotFound, seckill.ESALENOTFOUND)
	if w := e.do(req{method: "POST", path: "/admin/v1/sales", body: saleBody, auth: admin()}); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	if w := e.do(req{method: "GET", path: "/api/v1/sales/" + testSaleID}); w.Code != http.StatusOK {
		t.Fatalf("the sale just created is hidden by a cached not-found: %d %s", w.Code, w.Body)
	}
}

// blockingSales holds every read until released, counting them.
type blockingSales struct {
	fakestore.Sales
	release chan struct{}
}

func (b *blockingSales) Sale(ctx context.Context, id string) (*seckill.Sale, error) {
	<-b.release
	return b.Sales.Sale(ctx, id)
}

func TestSaleCacheSharesConcurrentLoads(t *testing.T) {
	bs := &blockingSales{Sales: *fakestore.NewSales(), release: make(chan struct{})}
	bs.Put(testSale())
	var c clock
	c.Set(t0)
	cache := newSaleCache(bs.Sale, time.Second, c.Now)

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cache.get(context.Background(), testSaleID)
			if err != nil || s == nil || s.ID != testSaleID {
				errs <- errors.New("bad answer")
			}
		}()
	}
	time.Sleep(20 * time.Millisecond) // let them pile up on the one load
	close(bs.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := bs.SaleCalls.Load(); n != 1 {
		t.Fatalf("sale store reads = %d for 16 concurrent gets, want 1", n)
	}
}

func TestSaleCacheDoesNotKeepFailures(t *testing.T) {
	f := fakestore.NewSales()
	f.Put(testSale())
	f.Err = errors.New("timeout")
	var c clock
	c.Set(t0)
	cache := newSaleCache(f.Sale, time.Second, c.Now)
	if _, err := cache.get(context.Background(), testSaleID); err == nil {
		t.Fatal("want the load error")
	}
	f.Mu.Lock()
	f.Err = nil
	f.Mu.Unlock()
	if s, err := cache.get(context.Background(), testSaleID); err != nil || s.ID != testSaleID {
		t.Fatalf("after recovery: %v, %v; want the sale", s, err)
	}
}

func TestSaleCacheBounded(t *testing.T) {
	f := fakestore.NewSales()
	var c clock
	c.Set(t0)
	cache := newSaleCache(f.Sale, time.Second, c.Now)
	cache.budget = rate.NewLimiter(rate.Inf, 0) // every miss loads: the bound under test is the entries'
	for i := range saleCacheMax * 3 {
		_, _ = cache.get(context.Background(), "ghost-"+strconv.Itoa(i))
	}
	if n := cache.entries.Len(); n > saleCacheMax {
		t.Fatalf("cache holds %d entries, want at most %d", n, saleCacheMax)
	}
}
