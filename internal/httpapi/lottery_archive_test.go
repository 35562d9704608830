package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
)

// archivedLottery is a drawn lottery whose Redis keys are gone: the stock
// store knows no entry (its HGETALL of no key is an empty list), and the
// database's copy holds copies, with won by buyer.
type archivedLottery struct {
	copies []seckill.LotteryEntry
	won    map[string]string
}

func (archivedLottery) Entry(context.Context, string, string) (seckill.LotteryEntry, bool, error) {
	return seckill.LotteryEntry{}, false, nil
}

func (archivedLottery) Won(context.Context, string, string) (string, bool, error) {
	return "", false, nil
}

func (archivedLottery) Entries(context.Context, string) ([]seckill.LotteryEntry, error) {
	return []seckill.LotteryEntry{}, nil
}

func (archivedLottery) EnsureDraw(_ context.Context, saleID string) (seckill.DrawRecord, error) {
	return seckill.DrawRecord{SaleID: saleID, DrawnAt: testSale().StartAt.Add(time.Minute)}, nil
}

func (a archivedLottery) KeptEntry(_ context.Context, _, userID string) (seckill.LotteryEntry, string, bool, error) {
	for _, e := range a.copies {
		if e.UserID == userID {
			return e, a.won[userID], true, nil
		}
	}
	return seckill.LotteryEntry{}, "", false, nil
}

// KeptEntries answers as sqlstore.EntryStore does: nil for none.
func (a archivedLottery) KeptEntries(context.Context, string) ([]seckill.LotteryEntry, error) {
	return slices.Clone(a.copies), nil
}

// TestArchivedDrawEntriesAreAList: once a drawn lottery is archived, GET
// /draw/entries publishes the database's copy as it published Redis's:
// a list (empty, not null, for a lottery nobody entered), by entry id,
// with ids and qty and never the buyers; entries/mine answers each buyer
// their own entry and win.
func TestArchivedDrawEntriesAreAList(t *testing.T) {
	for _, c := range []struct {
		name   string
		copies []seckill.LotteryEntry
		want   []string // entry ids, in order
	}{
		{"nobody entered", nil, []string{}},
		{"entered", []seckill.LotteryEntry{{ID: "e2", UserID: "ann", Qty: 1}, {ID: "e1", UserID: "bob", Qty: 2}}, []string{"e1", "e2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := archivedLottery{copies: c.copies, won: map[string]string{"ann": "r-ann"}}
			e, _, _ := admissionEnv(t, func(cfg *Config) {
				cfg.Lottery.Store, cfg.Lottery.Draws, cfg.Lottery.Copy = a, a, a
			})
			e.clock.Set(testSale().EndAt.Add(time.Hour))
			w := e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/draw/entries"})
			var body struct {
				Entries *[]map[string]any `json:"entries"`
			}
			if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &body) != nil || body.Entries == nil {
				t.Fatalf("GET draw/entries = %d %s; want 200 and a list of entries", w.Code, w.Body)
			}
			got := []string{}
			for _, m := range *body.Entries {
				got = append(got, m["entry_id"].(string))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("entries %v; want %v", got, c.want)
			}
			for _, user := range []string{"ann", "bob"} {
				if strings.Contains(w.Body.String(), user) {
					t.Errorf("the public entry list names buyer %s: %s", user, w.Body)
				}
			}
			for _, entry := range c.copies {
				w := e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/entries/mine", auth: "Bearer " + buyerToken(t, entry.UserID)})
				var mine entryResponse
				if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &mine) != nil ||
					mine.EntryID != entry.ID || mine.ReservationID != a.won[entry.UserID] {
					t.Errorf("%s's entries/mine = %d %s; want entry %s, reservation %q", entry.UserID, w.Code, w.Body, entry.ID, a.won[entry.UserID])
				}
			}
			if w := e.do(req{method: "GET", path: "/api/v1/sales/" + testLotteryID + "/entries/mine", auth: "Bearer " + buyerToken(t, "cy")}); w.Code != http.StatusNotFound {
				t.Errorf("entries/mine of a buyer who never entered = %d %s; want 404", w.Code, w.Body)
			}
		})
	}
}
