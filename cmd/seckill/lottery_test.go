package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// createLottery creates a lottery sale through the admin API: it started
// a second ago and takes entries for entriesFor.
func (e *engine) createLottery(stock, limit int64, entriesFor time.Duration) (id string, closeAt time.Time) {
	e.t.Helper()
	now := time.Now()
	id, closeAt = servicetest.UniqueName("lot"), now.Add(entriesFor)
	r := e.admin("POST", "/admin/v1/sales", map[string]any{
		"id": id, "name": "Limited tea", "price_cents": 9900, "stock": stock, "per_user_limit": limit,
		"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
		"admission": map[string]any{"mode": "lottery", "entries_close_at": closeAt.Format(time.RFC3339Nano)},
	})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create lottery: %d %v", r.status, r.body)
	}
	return id, closeAt
}

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	waitEvery(t, within, 20*time.Millisecond, what, cond)
}

// waitEvery is waitFor asking cond every so often: for a condition read
// through a buyer's own routes, whose reads are budgeted (as a page's
// polling is).
func waitEvery(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(every)
	}
}

// TestLotteryEndToEnd: on the embedded engine, buyers enter a lottery
// (once each: a second entry answers the first), nobody can claim first
// come, the commitment is public from the start; at close the draw gives
// the stock to as many entrants as it covers, each with an order exactly
// as a claim gets one, everyone else lost; the revealed seed verifies
// (seckill draw verify); a winner who cancels gives the unit to the first
// entrant of the waiting list, in draw order.
func TestLotteryEndToEnd(t *testing.T) {
	const entrants, stock = 30, 5
	e := startEngine(t, func(c *Config) { c.DrawInterval = 50 * time.Millisecond })
	sale, closeAt := e.createLottery(stock, 1, 3*time.Second)

	d := e.do("GET", "/api/v1/sales/"+sale+"/draw", "", nil)
	commitment, _ := d.body["commitment"].(string)
	if d.status != http.StatusOK || len(commitment) != 64 || d.body["seed"] != nil {
		t.Fatalf("draw before entries = %d %v; want a commitment and no seed", d.status, d.body)
	}
	if r := e.do("GET", "/api/v1/sales/"+sale+"/draw/entries", "", nil); r.status != http.StatusConflict {
		t.Fatalf("entry list before the draw = %d %v; want 409", r.status, r.body)
	}
	if r := e.reserve(sale, e.token("eager"), 1, ""); r.status != http.StatusConflict || r.code() != seckill.EADMISSION {
		t.Fatalf("first come claim on a lottery = %d %v; want 409 admission_required", r.status, r.body)
	}

	entryOf := map[string]string{} // buyer -> entry id
	var mu sync.Mutex
	fanOut(8, slices.Values(seq(entrants)), func(i int) {
		user := fmt.Sprintf("buyer-%d", i)
		r := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token(user), map[string]any{"qty": 1})
		if r.status != http.StatusCreated || r.body["status"] != "entered" {
			t.Errorf("entry of %s = %d %v", user, r.status, r.body)
			return
		}
		mu.Lock()
		entryOf[user], _ = r.body["entry_id"].(string)
		mu.Unlock()
	})
	again := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token("buyer-0"), map[string]any{"qty": 1})
	if again.status != http.StatusOK || again.body["entry_id"] != entryOf["buyer-0"] {
		t.Fatalf("second entry = %d %v; want 200 and the first entry %s", again.status, again.body, entryOf["buyer-0"])
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token("greedy"), map[string]any{"qty": 2}); r.code() != seckill.EPURCHASELIMIT {
		t.Fatalf("entry over the limit = %d %v", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token("buyer-1"), nil); r.body["status"] != "entered" {
		t.Fatalf("result before the draw = %v", r.body)
	}

	waitFor(t, time.Until(closeAt)+20*time.Second, "the draw", func() bool {
		return e.do("GET", "/api/v1/sales/"+sale+"/draw", "", nil).body["drawn"] == true
	})
	if r := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token("late"), map[string]any{"qty": 1}); r.code() != seckill.EENDED {
		t.Fatalf("entry after close = %d %v; want ended", r.status, r.body)
	}
	results := func() (won map[string]string, lost []string) {
		won = map[string]string{}
		for user := range entryOf {
			r := e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token(user), nil)
			switch r.body["status"] {
			case "won":
				won[user], _ = r.body["reservation_id"].(string)
			case "lost":
				lost = append(lost, user)
			default:
				t.Fatalf("%s: result %d %v", user, r.status, r.body)
			}
		}
		return won, lost
	}
	won, lost := results()
	if len(won) != stock || len(lost) != entrants-stock {
		t.Fatalf("%d won, %d lost; want %d and %d", len(won), len(lost), stock, entrants-stock)
	}
	for user, id := range won {
		waitFor(t, 20*time.Second, user+"'s order", func() bool {
			r := e.do("GET", "/api/v1/reservations/"+id, e.token(user), nil)
			return r.body["status"] == "ordered" && r.body["pay_by"] != nil
		})
	}

	var out bytes.Buffer
	if err := runDraw(context.Background(), []string{"verify", "--url", e.base, "--sale", sale}, &out, &out); err != nil {
		t.Fatalf("draw verify: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("verified: %d winners", stock)) {
		t.Fatalf("draw verify said:\n%s", out.String())
	}
	// A doctored entry list does not verify.
	dir := t.TempDir()
	pub := e.do("GET", "/api/v1/sales/"+sale+"/draw", "", nil)
	writeJSON(t, filepath.Join(dir, "draw.json"), pub.body)
	list := e.do("GET", "/api/v1/sales/"+sale+"/draw/entries", "", nil).body
	entries := list["entries"].([]any)
	writeJSON(t, filepath.Join(dir, "entries.json"), map[string]any{"entries": entries[1:]})
	out.Reset()
	err := runDraw(context.Background(), []string{"verify", "--draw", filepath.Join(dir, "draw.json"), "--entries", filepath.Join(dir, "entries.json")}, &out, &out)
	if err == nil || !strings.Contains(out.String(), "NOT VERIFIED") {
		t.Fatalf("a doctored entry list verified: %v\n%s", err, out.String())
	}

	// The waiting list: a winner cancels; the unit goes to the first
	// entrant in draw order who has not won.
	seed, _ := pub.body["seed"].(string)
	var all []seckill.LotteryEntry
	for user, id := range entryOf {
		all = append(all, seckill.LotteryEntry{ID: id, UserID: user, Qty: 1})
	}
	var next string
	for _, en := range seckill.DrawOrder(seed, all) {
		if _, ok := won[en.UserID]; !ok {
			next = en.UserID
			break
		}
	}
	var quitter string
	for user := range won {
		quitter = user
		break
	}
	if r := e.do("POST", "/api/v1/reservations/"+won[quitter]+"/cancel", e.token(quitter), nil); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %v", r.status, r.body)
	}
	waitFor(t, 20*time.Second, next+" wins the returned unit", func() bool {
		r := e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token(next), nil)
		return r.body["status"] == "won"
	})
	won2, _ := results()
	if len(won2) != stock+1 { // the quitter keeps "won" with a cancelled reservation
		t.Fatalf("after the give-back %d won; want %d", len(won2), stock+1)
	}
	if lvl := e.stock(sale); lvl.Remaining() != 0 {
		t.Fatalf("stock after the give-back = %+v; want none left", lvl)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
