package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/jwt"
	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

// killHookEnv is internal/httpapi.KillHookEnv, which only a
// seckill_killhook build compiles.
const killHookEnv = "SECKILL_KILL_AFTER_ACCEPTED"

// TestEmbeddedKilledRightAfterA202 is issue 36 item 3: the embedded store
// (in-process miniredis and JetStream) is SIGKILLed by the process itself
// right after it wrote a 202 and before anything else (the kill hook of a
// seckill_killhook build, armed for a random answer of each life), again
// and again on the same data dir and database, with buyers rushing in
// every life. Every claim any life answered 202, the one answered at the
// instant of the kill included, ends ordered: none lost, none failed.
// Over SQLite in the data dir, MariaDB and PostgreSQL.
// SECKILL_TEST_KILLS sets the kills per database (default 10 on SQLite,
// 4 on the others).
func TestEmbeddedKilledRightAfterA202(t *testing.T) {
	kills := func(def int) int {
		if n, err := strconv.Atoi(os.Getenv("SECKILL_TEST_KILLS")); err == nil && n > 0 {
			return n
		}
		return def
	}
	for _, tc := range []struct {
		name  string
		url   func(testing.TB) string
		kills int
	}{
		{"SQLite", nil, kills(10)},
		{"MariaDB", sqltest.MySQL, kills(4)},
		{"PostgreSQL", sqltest.Postgres, kills(4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dbURL string
			if tc.url != nil {
				dbURL = tc.url(t)
			}
			killRightAfter202(t, dbURL, tc.kills)
		})
	}
}

// hookClaim is a claim answered 202, and the life that answered it.
type hookClaim struct {
	id, token string
	life      int
}

// finalStatuses polls each claim's reservation as its buyer until it is
// ordered or failed, or ctx ends, 8 at a time: claim id -> "ordered",
// "failed", or the last answer read.
func finalStatuses(ctx context.Context, client *http.Client, base string, claims []hookClaim) map[string]string {
	var mu sync.Mutex
	final := map[string]string{}
	fanOut(8, slices.Values(claims), func(c hookClaim) {
		last := ""
		for ctx.Err() == nil {
			st, body := hookDo(ctx, client, "GET", base+"/api/v1/reservations/"+c.id, c.token, "", nil)
			s, _ := body["status"].(string)
			last = fmt.Sprintf("%d %v", st, body)
			if s == "ordered" || s == "failed" {
				last = s
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		mu.Lock()
		final[c.id] = last
		mu.Unlock()
	})
	return final
}

func killRightAfter202(t *testing.T, dbURL string, kills int) {
	bin, err := buildKillHook()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--http-addr", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--jwt-secret", mnSecret, "--admin-token", mnAdmin,
		"--rate-limit-ip", "off", "--rate-limit-user", "off", "--max-inflight", "-1",
		"--log-level", "warn",
	}
	if dbURL != "" {
		args = append(args, "--database-url", dbURL)
	}
	n := newNode(t, bin, "embedded-killhook", args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(30*(kills+2))*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	sale := servicetest.UniqueName("hook")
	var (
		mu     sync.Mutex
		claims []hookClaim
		buyer  atomic.Int64
	)
	for life := range kills {
		after := 1 + rand.IntN(40)
		n.env = []string{fmt.Sprintf("%s=%d", killHookEnv, after)}
		if err := n.start(); err != nil {
			t.Fatal(err)
		}
		base := n.url()
		if life == 0 {
			now := time.Now()
			if st, body := hookDo(ctx, client, "POST", base+"/admin/v1/sales", mnAdmin, "", map[string]any{
				"id": sale, "name": "Tea gift set", "price_cents": 9900, "stock": 1_000_000, "per_user_limit": 1,
				"start_at": now.Add(-time.Second).Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).Format(time.RFC3339Nano),
			}); st != http.StatusCreated {
				t.Fatalf("create sale: %d %v", st, body)
			}
		}
		// Buyers rush until the process is gone. Each has a key of its
		// own: one answered try_later (a batch not stored in time) tries
		// again with it.
		var workers sync.WaitGroup
		for range 16 {
			workers.Go(func() {
				for ctx.Err() == nil {
					user := fmt.Sprintf("%s-buyer-%d", sale, buyer.Add(1))
					tok, err := jwt.Sign([]byte(mnSecret), user, time.Hour, time.Now())
					if err != nil {
						t.Error(err)
						return
					}
					for ctx.Err() == nil {
						st, body := hookDo(ctx, client, "POST", base+"/api/v1/sales/"+sale+"/reservations", tok, user, map[string]any{"qty": 1})
						if st == 0 {
							return // the process died under the request
						}
						if st == http.StatusAccepted {
							id, _ := body["reservation_id"].(string)
							mu.Lock()
							claims = append(claims, hookClaim{id, tok, life})
							mu.Unlock()
							break
						}
						if st != http.StatusServiceUnavailable {
							t.Errorf("life %d: buyer %s answered %d %v", life, user, st, body)
							return
						}
						time.Sleep(10 * time.Millisecond) // held until healed, or try_later
					}
				}
			})
		}
		workers.Wait()
		cmd, exited := n.end()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("life %d: the kill hook (after %d answers) never fired:\n%s", life, after, n.logTail())
		}
		mu.Lock()
		inLife := 0
		for _, c := range claims {
			if c.life == life {
				inLife++
			}
		}
		mu.Unlock()
		t.Logf("life %d: killed after answer %d; %d claims received", life, after, inLife)
		if inLife == 0 {
			t.Errorf("life %d: no 202 reached its buyer, not even the one answered at the kill", life)
		}
	}
	// A last life without the hook: every claim answered is polled.
	n.env = nil
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	final := finalStatuses(ctx, client, n.url(), claims)
	statuses := map[string]int{}
	for _, c := range claims {
		statuses[final[c.id]]++
		if final[c.id] != "ordered" {
			t.Errorf("claim %s (life %d) ended %q; want ordered", c.id, c.life, final[c.id])
		}
	}
	t.Logf("%d kills, %d claims answered: %v", kills, len(claims), statuses)
}

// hookDo sends one request; a status of 0 is a transport error. An
// idempotency key, if given, goes with it.
func hookDo(ctx context.Context, client *http.Client, method, url, token, key string, body any) (int, map[string]any) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, map[string]any{"err": err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}
