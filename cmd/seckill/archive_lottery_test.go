package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/archive"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

// TestArchivedLotteryStillAnswers: a drawn lottery, once ended and
// settled, is archived: its entries and who won go to the database, then
// its Redis keys go, and every buyer's result, the published entry list
// and seckill draw verify answer as before, from the database. Archiving
// again changes nothing. A lottery whose draw has not finished keeps its
// keys, entries and all.
func TestArchivedLotteryStillAnswers(t *testing.T) {
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) { testArchivedLottery(t, st) })
	}
}

func testArchivedLottery(t *testing.T, st stack) {
	const entrants, stock = 12, 3
	clk := &testClock{}
	fast := fastRestores(st.config(t))
	e := startEngine(t, func(c *Config) {
		fast(c)
		c.DrawInterval = 50 * time.Millisecond
		c.ArchiveAfter, c.ArchiveInterval = time.Minute, 50*time.Millisecond
	}, clk.hook())
	ctx := context.Background()
	now := time.Now()
	closeAt, endAt := now.Add(2*time.Second), now.Add(4*time.Second)
	lottery := func(id string) {
		r := e.admin("POST", "/admin/v1/sales", map[string]any{
			"id": id, "name": "Limited tea", "price_cents": 9900, "stock": stock, "per_user_limit": 1,
			"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": endAt.Format(time.RFC3339Nano),
			"admission": map[string]any{"mode": "lottery", "entries_close_at": closeAt.Format(time.RFC3339Nano)},
		})
		if r.status != http.StatusCreated {
			t.Fatalf("create lottery: %d %v", r.status, r.body)
		}
	}
	drawn, held := servicetest.UniqueName("lot"), servicetest.UniqueName("held")
	lottery(drawn)
	lottery(held)
	// Another node holds the held lottery's draw for good: it is never drawn.
	draws := sqlstore.NewDrawStore(e.m.db)
	if ok, err := draws.LeaseDraw(ctx, held, "another-node", clk.now(), clk.now().Add(1000*time.Hour)); err != nil || !ok {
		t.Fatalf("LeaseDraw = %v, %v", ok, err)
	}
	for i := range entrants {
		for _, sale := range []string{drawn, held} {
			if r := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token(fmt.Sprint("buyer-", i)), map[string]any{"qty": 1}); r.status != http.StatusCreated {
				t.Fatalf("entry: %d %v", r.status, r.body)
			}
		}
	}
	waitFor(t, time.Until(closeAt)+20*time.Second, "the draw", func() bool {
		return e.do("GET", "/api/v1/sales/"+drawn+"/draw", "", nil).body["drawn"] == true
	})
	// What everyone is told before archiving is what they are told after.
	results := func() map[string]string {
		out := map[string]string{}
		for i := range entrants + 1 { // buyer-12 never entered
			user := fmt.Sprint("buyer-", i)
			r := e.do("GET", "/api/v1/sales/"+drawn+"/entries/mine", e.token(user), nil)
			out[user] = fmt.Sprint(r.status, " ", r.body["status"], " ", r.body["entry_id"], " ", r.body["reservation_id"])
		}
		return out
	}
	entryList := func() string {
		r := e.do("GET", "/api/v1/sales/"+drawn+"/draw/entries", "", nil)
		return fmt.Sprint(r.status, " ", r.body)
	}
	before, listBefore, roomBefore := results(), entryList(), roomAdmission(t, e, drawn)
	if roomBefore["entrants"] != float64(entrants) {
		t.Fatalf("control room before archiving: %v; want %d entrants", roomBefore, entrants)
	}
	winners := 0
	for _, v := range before {
		if strings.Contains(v, " won ") {
			winners++
		}
	}
	if winners != stock {
		t.Fatalf("%d winners before archiving; want %d: %v", winners, stock, before)
	}

	// Past the end (Redis's clock too: the idempotency keys go), then past
	// the winners' payment deadline and ArchiveAfter.
	servicetest.WaitFor(t, 30*time.Second, "the end of both sales", func() bool {
		f, err := e.m.stock.Archive().Footprint(ctx, drawn)
		g, err2 := e.m.stock.Archive().Footprint(ctx, held)
		return err == nil && err2 == nil && f.Keys["idem"] == 0 && g.Keys["idem"] == 0 && time.Now().After(endAt)
	})
	clk.advance(e.m.Config.PayTimeout + time.Minute)
	servicetest.WaitFor(t, 3*time.Minute, "the drawn lottery to be archived", func() bool {
		_, ok, err := e.m.stock.Archive().ArchivedSummary(ctx, drawn)
		return err == nil && ok
	})
	if f, err := e.m.stock.Archive().Footprint(ctx, drawn); err != nil || len(f.Keys) != 1 || f.Keys["archived"] == 0 {
		t.Fatalf("archived lottery's keys in Redis = %v, %v; want only the summary", f.Keys, err)
	}
	entries := sqlstore.NewEntryStore(e.m.db)
	n, w, err := entries.EntryCounts(ctx, drawn)
	if err != nil || n != entrants || w != stock {
		t.Fatalf("entries in the database = %d (%d won), %v; want %d (%d won)", n, w, err, entrants, stock)
	}

	if after := results(); !maps.Equal(after, before) {
		t.Errorf("results after archiving:\n%v\nbefore:\n%v", after, before)
	}
	if listAfter := entryList(); listAfter != listBefore {
		t.Errorf("entry list after archiving:\n%s\nbefore:\n%s", listAfter, listBefore)
	}
	if roomAfter := roomAdmission(t, e, drawn); fmt.Sprint(roomAfter) != fmt.Sprint(roomBefore) {
		t.Errorf("control room after archiving:\n%v\nbefore:\n%v", roomAfter, roomBefore)
	}
	var out bytes.Buffer
	if err := runDraw(ctx, []string{"verify", "--url", e.base, "--sale", drawn}, &out, &out); err != nil ||
		!strings.Contains(out.String(), fmt.Sprintf("verified: %d winners", stock)) {
		t.Fatalf("draw verify of the archived lottery: %v\n%s", err, out.String())
	}

	// A pass of its own, after the engine's: the archived lottery is not
	// visited again, the held one keeps its keys.
	a := archive.New(dbStores{sqlstore.NewSaleStore(e.m.db), e.m.orders.Ledger}, e.m.stock.Archive(), archive.Config{
		After: time.Minute, Now: clk.now,
		Lottery: &archive.Lottery{Draws: draws, Entries: e.m.stock.Lottery(), Copies: entries},
	})
	summary, _, _ := e.m.stock.Archive().ArchivedSummary(ctx, drawn)
	for range 2 {
		if got, err := a.Pass(ctx); err != nil || got != 0 {
			t.Fatalf("another archive pass = %d, %v; want nothing archived", got, err)
		}
	}
	if again, _, _ := e.m.stock.Archive().ArchivedSummary(ctx, drawn); again != summary {
		t.Errorf("summary after archiving again = %q; want %q", again, summary)
	}
	if n2, w2, err := entries.EntryCounts(ctx, drawn); err != nil || n2 != n || w2 != w {
		t.Errorf("entries in the database after archiving again = %d (%d won), %v; want %d (%d)", n2, w2, err, n, w)
	}
	if _, ok, _ := e.m.stock.Archive().ArchivedSummary(ctx, held); ok {
		t.Fatal("the lottery whose draw did not finish is archived")
	}
	if f, err := e.m.stock.Archive().Footprint(ctx, held); err != nil || f.Keys["entries"] == 0 || f.Keys["stock"] == 0 {
		t.Errorf("undrawn lottery's keys = %v, %v; want its entries and stock kept", f.Keys, err)
	}
	if kept, _ := e.m.stock.Archive().KeptSales(ctx); !slices.Contains(kept, held) || slices.Contains(kept, drawn) {
		t.Errorf("kept sales %v; want %s and not %s", kept, held, drawn)
	}
	// Its entries are in the database as they were made, none won.
	if n, w, err := entries.EntryCounts(ctx, held); err != nil || n != entrants || w != 0 {
		t.Errorf("undrawn lottery's entries in the database: %d (%d won), %v; want %d kept as made, none won", n, w, err, entrants)
	}
	if r := e.do("GET", "/api/v1/sales/"+held+"/entries/mine", e.token("buyer-0"), nil); r.body["status"] != string(seckill.EntryEntered) {
		t.Errorf("undrawn lottery's result = %d %v; want entered", r.status, r.body)
	}
}

// roomAdmission is the lottery or queue figures of the next sample the
// control room's live feed sends of sale.
func roomAdmission(t *testing.T, e *engine, sale string) map[string]any {
	t.Helper()
	ticket, _ := e.admin("POST", "/admin/v1/sse-ticket", map[string]any{"sale_id": sale}).body["ticket"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+"/admin/v1/sales/"+sale+"/events?ticket="+url.QueryEscape(ticket), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok && event == "sample" {
			var p struct{ Admission map[string]any }
			if err := json.Unmarshal([]byte(v), &p); err != nil {
				t.Fatalf("control room sample %q: %v", v, err)
			}
			return p.Admission
		}
	}
	t.Fatalf("control room feed of %s (%d) ended without a sample: %v", sale, resp.StatusCode, sc.Err())
	return nil
}
