package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

// The entries of a lottery are kept in the database before each entrant
// is told "entered" (lottery.Book): a stock store that loses them, before
// the draw, loses nothing anyone was told. Each test enters 20 buyers,
// makes the stock store lose everything, and checks that every entrant
// still reads her entry, entering again answers it (200, the same id),
// and the draw counts all 20. Before the Book, the embedded default's
// restart answered every entrant 404 "You have not entered this draw.",
// and the draw had no entrants.

const durableEntrants, durableStock = 20, 5

// durableWindow is how long a test lottery takes entries: long enough for
// a loss and its heal on a loaded machine. The tests do not wait it out:
// once their checks are done, closeEntries moves the nodes' clock past it
// and the draw runs at once.
const durableWindow = time.Minute

// closeEntries moves the nodes' clock (clk) past closeAt: the draw is
// due, and its first step closes the entries in the stock store.
func closeEntries(clk *testClock, closeAt time.Time) {
	clk.advance(closeAt.Sub(clk.now()) + time.Second)
}

// durable configures the nodes of the tests of kept entries and places:
// on redisURL ("" the embedded store) and, if set, dataDir; quick heals
// and draws; no reconciliation passes; and no per-buyer read limit, since
// the tests poll a buyer's standing until the sale is back, which on a
// loaded machine takes a while.
func durable(redisURL, dataDir string) func(*Config) {
	return func(c *Config) {
		c.RedisURL = redisURL
		if dataDir != "" {
			c.DataDir = dataDir
		}
		c.DrawInterval = 50 * time.Millisecond
		c.HealInterval = 200 * time.Millisecond
		c.ReconcileInterval = time.Hour
		c.QueuePerIP = durableJoiners + 1
		c.BuyerReadLimit = "off"
	}
}

// TestLotteryEntriesSurviveAnEmbeddedRestart: the embedded default (its
// stock store in memory) restarts during the entry window, on its data
// dir.
func TestLotteryEntriesSurviveAnEmbeddedRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	node, clk := durable("", dir), &testClock{}
	e1 := startEngine(t, node, clk.hook())
	sale, closeAt := e1.createLottery(durableStock, 1, durableWindow)
	entries := enterMany(t, e1, sale)
	e1.stop()
	e2 := startEngine(t, node, clk.hook())
	entriesKept(t, e2, sale, closeAt, entries, clk)
}

// TestLotteryEntriesSurviveRedisRestartedEmpty: the node runs on; its
// Redis (a private redis-server, no persistence) restarts empty during the
// entry window. The heal watcher sees the sale vanish and puts the entries
// back from the database before it lets entries in again.
func TestLotteryEntriesSurviveRedisRestartedEmpty(t *testing.T) {
	srv, clk := redistest.StartServer(t), &testClock{}
	e := startEngine(t, durable("redis://"+srv.Addr, ""), clk.hook())
	sale, closeAt := e.createLottery(durableStock, 1, durableWindow)
	entries := enterMany(t, e, sale)
	srv.Kill()
	srv.Restart(t)
	entriesKept(t, e, sale, closeAt, entries, clk)
}

// TestEntrantsReadTheirEntriesBeforeTheHeal: between a loss and its heal,
// an entrant reads her entry from the database's copy, not 404 "You have
// not entered this draw."; a buyer who never entered still reads 404, and
// a new entry waits for the heal (try later). The heal is held off (its
// interval an hour), so the window stays open for the whole test. Before
// the copy was read there, every entrant read 404 until the heal.
func TestEntrantsReadTheirEntriesBeforeTheHeal(t *testing.T) {
	srv, clk := redistest.StartServer(t), &testClock{}
	e := startEngine(t, durable("redis://"+srv.Addr, ""), clk.hook(), func(m *Main) { m.Config.HealInterval = time.Hour })
	sale, _ := e.createLottery(durableStock, 1, durableWindow)
	entries := enterMany(t, e, sale)
	srv.Kill()
	srv.Restart(t)
	mine := func(user string) reply {
		return e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token(user), nil)
	}
	for user, id := range entries {
		if r := mine(user); r.status != http.StatusOK || r.body["status"] != "entered" || r.body["entry_id"] != id {
			t.Fatalf("%s before the heal = %d %v; want entered with %s", user, r.status, r.body, id)
		}
	}
	if r := mine("never-entered"); r.status != http.StatusNotFound || r.code() != "not_found" {
		t.Fatalf("a buyer who never entered, before the heal = %d %v; want 404 not_found", r.status, r.body)
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token("newcomer"), map[string]any{"qty": 1}); r.status != http.StatusServiceUnavailable || r.code() != "try_later" {
		t.Fatalf("a new entry before the heal = %d %v; want 503 try_later", r.status, r.body)
	}
}

// TestLotteryEntriesSurviveAFleetRestartOnAnEmptyRedis: the node stops,
// its Redis restarts empty, a new node starts on the same database: no
// node saw the entries go, and nothing was sold yet. The new node's
// preheat finds entries kept in the database and loads the sale held
// (redis.Loader), so the heal puts them back before it takes an entry.
func TestLotteryEntriesSurviveAFleetRestartOnAnEmptyRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	dir := filepath.Join(t.TempDir(), "data")
	node, clk := durable("redis://"+srv.Addr, dir), &testClock{}
	e1 := startEngine(t, node, clk.hook())
	sale, closeAt := e1.createLottery(durableStock, 1, durableWindow)
	entries := enterMany(t, e1, sale)
	e1.stop()
	srv.Kill()
	srv.Restart(t)
	e2 := startEngine(t, node, clk.hook())
	entriesKept(t, e2, sale, closeAt, entries, clk)
}

// TestLotteryDrawCountsEntriesRedisLostUnseen: Redis loses some entries
// but not the sale (a failover to a replica that missed the last writes),
// so no heal runs; the draw levels the entries with the database's once
// they are closed, and counts every entrant.
func TestLotteryDrawCountsEntriesRedisLostUnseen(t *testing.T) {
	srv, clk := redistest.StartServer(t), &testClock{}
	e := startEngine(t, durable("redis://"+srv.Addr, ""), clk.hook(), func(m *Main) { m.Config.RedisKeyPrefix = "unseen" })
	sale, closeAt := e.createLottery(durableStock, 1, durableWindow)
	entries := enterMany(t, e, sale)
	raw, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	lost := []string{"entrant-0", "entrant-7", "entrant-13"}
	n, err := raw.Do(t.Context(), raw.B().Hdel().Key("unseen:{"+sale+"}:entries").Field(lost...).Build()).AsInt64()
	if err != nil || n != int64(len(lost)) {
		t.Fatalf("losing %d entries = %d, %v", len(lost), n, err)
	}
	drawCountsAll(t, e, sale, closeAt, entries, clk)
}

// TestLotteryResultsSurviveRedisRestartedEmpty: a drawn lottery's Redis
// restarts empty. The heal brings back the winners' reservations from
// their orders, and the draw's results from the database: each winner
// still reads "won" with her reservation, everyone else "lost", and the
// archive's copy would say the same.
func TestLotteryResultsSurviveRedisRestartedEmpty(t *testing.T) {
	srv, clk := redistest.StartServer(t), &testClock{}
	e := startEngine(t, durable("redis://"+srv.Addr, ""), clk.hook())
	sale, closeAt := e.createLottery(durableStock, 1, durableWindow)
	entries := enterMany(t, e, sale)
	closeEntries(clk, closeAt)
	waitFor(t, 30*time.Second, "the draw", func() bool {
		return e.do("GET", "/api/v1/sales/"+sale+"/draw", "", nil).body["drawn"] == true
	})
	results := func() map[string]string {
		out := map[string]string{}
		for user := range entries {
			r := e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token(user), nil)
			out[user] = fmt.Sprint(r.status, " ", r.body["status"], " ", r.body["entry_id"], " ", r.body["reservation_id"])
		}
		return out
	}
	before := results()
	for user, res := range before {
		if strings.Contains(res, " won ") {
			id := strings.Fields(res)[3]
			waitFor(t, 20*time.Second, user+"'s order", func() bool {
				return e.do("GET", "/api/v1/reservations/"+id, e.token(user), nil).body["status"] == "ordered"
			})
		}
	}
	srv.Kill()
	srv.Restart(t)
	waitFor(t, 30*time.Second, "the sale to be healed", func() bool {
		return e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token("entrant-0"), nil).status == http.StatusOK
	})
	after := results()
	for user, was := range before {
		if after[user] != was {
			t.Errorf("%s after Redis restarted empty: %s; before: %s", user, after[user], was)
		}
	}
}

// enterMany enters durableEntrants buyers, and returns their entry ids.
func enterMany(t *testing.T, e *engine, sale string) map[string]string {
	t.Helper()
	entries := map[string]string{}
	for i := range durableEntrants {
		user := fmt.Sprint("entrant-", i)
		r := e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token(user), map[string]any{"qty": 1})
		if r.status != http.StatusCreated {
			t.Fatalf("entry of %s = %d %v", user, r.status, r.body)
		}
		entries[user], _ = r.body["entry_id"].(string)
	}
	return entries
}

// entriesKept checks, on e after the loss, that every entrant reads her
// entry (from the database's copy until the heal puts it back), that one
// entering again is answered her entry, and then drawCountsAll.
func entriesKept(t *testing.T, e *engine, sale string, closeAt time.Time, entries map[string]string, clk *testClock) {
	t.Helper()
	users := slices.Sorted(func(yield func(string) bool) {
		for u := range entries {
			if !yield(u) {
				return
			}
		}
	})
	mine := func(user string) reply {
		return e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token(user), nil)
	}
	waitFor(t, 30*time.Second, "the first entrant's entry to read back", func() bool {
		return mine(users[0]).status == http.StatusOK
	})
	for _, user := range users {
		if r := mine(user); r.status != http.StatusOK || r.body["status"] != "entered" || r.body["entry_id"] != entries[user] {
			t.Fatalf("%s after the loss = %d %v; want entered with %s", user, r.status, r.body, entries[user])
		}
	}
	if time.Until(closeAt) < time.Second {
		t.Fatalf("the loss took the whole entry window (closes at %s): no time left to enter again", closeAt)
	}
	var again reply
	waitFor(t, time.Until(closeAt), "an entrant entering again to be answered", func() bool {
		again = e.do("POST", "/api/v1/sales/"+sale+"/entries", e.token(users[1]), map[string]any{"qty": 1})
		return again.status != http.StatusServiceUnavailable
	})
	if again.status != http.StatusOK || again.body["entry_id"] != entries[users[1]] {
		t.Fatalf("%s entering again = %d %v; want 200 and her entry %s", users[1], again.status, again.body, entries[users[1]])
	}
	drawCountsAll(t, e, sale, closeAt, entries, clk)
}

// drawCountsAll checks that the draw at closeAt counts every entrant and
// gives out the stock, and that each entrant reads her entry's result.
func drawCountsAll(t *testing.T, e *engine, sale string, closeAt time.Time, entries map[string]string, clk *testClock) {
	t.Helper()
	closeEntries(clk, closeAt)
	var draw reply
	waitFor(t, 30*time.Second, "the draw", func() bool {
		draw = e.do("GET", "/api/v1/sales/"+sale+"/draw", "", nil)
		return draw.body["drawn"] == true
	})
	winners, _ := draw.body["winners"].([]any)
	if draw.body["entrants"] != float64(durableEntrants) || len(winners) != durableStock {
		t.Fatalf("the draw = %v; want %d entrants, %d winners", draw.body, durableEntrants, durableStock)
	}
	won := 0
	for user, id := range entries {
		r := e.do("GET", "/api/v1/sales/"+sale+"/entries/mine", e.token(user), nil)
		if r.body["entry_id"] != id {
			t.Fatalf("%s after the draw = %d %v; want her entry %s", user, r.status, r.body, id)
		}
		switch r.body["status"] {
		case "won":
			won++
		case "lost":
		default:
			t.Fatalf("%s after the draw = %d %v; want won or lost", user, r.status, r.body)
		}
	}
	if won != durableStock {
		t.Fatalf("%d entrants read won; want %d", won, durableStock)
	}
}
