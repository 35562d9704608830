package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

// A waiting room's places are kept in the database before each buyer is
// told their position (waitroom.Book): a stock store that loses them
// loses nobody's place. Each test has 20 buyers join a queue sale's room
// before the start (random places), makes the stock store lose the room,
// and checks that every buyer reads the position she had, joining again
// answers it, and a buyer arriving after the loss queues behind them all.
// Before the Book, the embedded default's restart emptied the room: every
// buyer read 404 and had to join again, and after the start the first to
// rejoin would have been admitted first.

const durableJoiners = 20

// TestQueuePlacesSurviveAnEmbeddedRestart: the embedded default restarts
// while its room is open.
func TestQueuePlacesSurviveAnEmbeddedRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	node := durable("", dir)
	e1 := startEngine(t, node)
	sale := e1.createQueue(5, 1, time.Now().Add(12*time.Minute)) // past the preheat lead, within the room's
	places := joinMany(t, e1, sale)
	e1.stop()
	e2 := startEngine(t, node)
	placesKept(t, e2, sale, places)
}

// TestQueuePlacesSurviveRedisRestartedEmpty: the node runs on; its Redis
// (a private redis-server, no persistence) restarts empty while the room
// is open.
func TestQueuePlacesSurviveRedisRestartedEmpty(t *testing.T) {
	srv := redistest.StartServer(t)
	e := startEngine(t, durable("redis://"+srv.Addr, ""))
	sale := e.createQueue(5, 1, time.Now().Add(12*time.Minute))
	places := joinMany(t, e, sale)
	srv.Kill()
	srv.Restart(t)
	placesKept(t, e, sale, places)
}

// TestJoinersAskAgainBeforeTheHeal: between a loss and its heal, a buyer
// whose place the database keeps is told to ask again (503 try_later,
// with Retry-After), not that she has no place; a buyer who never joined
// still reads 404. The heal is held off (its interval an hour). Before,
// every joiner read 404 "You have no place in this queue: join it" until
// the heal.
func TestJoinersAskAgainBeforeTheHeal(t *testing.T) {
	srv := redistest.StartServer(t)
	e := startEngine(t, durable("redis://"+srv.Addr, ""), func(m *Main) { m.Config.HealInterval = time.Hour })
	sale := e.createQueue(5, 1, time.Now().Add(12*time.Minute))
	places := joinMany(t, e, sale)
	srv.Kill()
	srv.Restart(t)
	mine := func(user string) reply {
		return e.do("GET", "/api/v1/sales/"+sale+"/queue/mine", e.token(user), nil)
	}
	for user := range places {
		if r := mine(user); r.status != http.StatusServiceUnavailable || r.code() != "try_later" || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s before the heal = %d %v (Retry-After %q); want 503 try_later with Retry-After", user, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if r := mine("never-joined"); r.status != http.StatusNotFound || r.code() != "not_found" {
		t.Fatalf("a buyer who never joined, before the heal = %d %v; want 404 not_found", r.status, r.body)
	}
}

// TestQueuePlacesSurviveAFleetRestartOnAnEmptyRedis: the node stops, its
// Redis restarts empty, a new node starts on the same database. The new
// node's preheat finds places kept in the database and loads the sale
// held (redis.Loader): the heal rebuilds the room before the next join.
func TestQueuePlacesSurviveAFleetRestartOnAnEmptyRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	dir := filepath.Join(t.TempDir(), "data")
	node := durable("redis://"+srv.Addr, dir)
	e1 := startEngine(t, node)
	sale := e1.createQueue(5, 1, time.Now().Add(12*time.Minute))
	places := joinMany(t, e1, sale)
	e1.stop()
	srv.Kill()
	srv.Restart(t)
	e2 := startEngine(t, node)
	placesKept(t, e2, sale, places)
}

// joinMany has durableJoiners buyers join the sale's room, and returns each
// one's position once all have joined.
func joinMany(t *testing.T, e *engine, sale string) map[string]any {
	t.Helper()
	for i := range durableJoiners {
		user := fmt.Sprint("joiner-", i)
		if r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token(user), nil); r.status != http.StatusOK {
			t.Fatalf("join of %s = %d %v", user, r.status, r.body)
		}
	}
	places := map[string]any{}
	for i := range durableJoiners {
		user := fmt.Sprint("joiner-", i)
		r := e.do("GET", "/api/v1/sales/"+sale+"/queue/mine", e.token(user), nil)
		if r.status != http.StatusOK || r.body["position"] == nil {
			t.Fatalf("%s's place = %d %v", user, r.status, r.body)
		}
		places[user] = r.body["position"]
	}
	return places
}

// placesKept checks, on e after the loss, that every buyer reads the
// position she had (once the sale is back), joining again answers it,
// and a newcomer queues last.
func placesKept(t *testing.T, e *engine, sale string, places map[string]any) {
	t.Helper()
	mine := func(user string) reply {
		return e.do("GET", "/api/v1/sales/"+sale+"/queue/mine", e.token(user), nil)
	}
	waitFor(t, 30*time.Second, "the room to be back", func() bool {
		return mine("joiner-0").status == http.StatusOK
	})
	for user, pos := range places {
		if r := mine(user); r.status != http.StatusOK || r.body["position"] != pos {
			t.Errorf("%s after the loss = %d %v; want position %v", user, r.status, r.body, pos)
		}
	}
	again := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token("joiner-3"), nil)
	if again.status != http.StatusOK || again.body["position"] != places["joiner-3"] {
		t.Errorf("joiner-3 joining again = %d %v; want her position %v", again.status, again.body, places["joiner-3"])
	}
	if r := e.do("POST", "/api/v1/sales/"+sale+"/queue", e.token("newcomer"), nil); r.status != http.StatusOK || r.body["position"] == nil {
		t.Errorf("a newcomer's join = %d %v", r.status, r.body)
	} else if n, err := e.m.stock.Queue().Length(context.Background(), sale); err != nil || n != durableJoiners+1 {
		t.Errorf("the room holds %d, %v; want %d", n, err, durableJoiners+1)
	}
}
