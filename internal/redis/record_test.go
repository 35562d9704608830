package redis

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestRecordBytes measures, on a real Redis, what one reservation's
// record costs in the res hash in the compact form and in the form before
// it (the same records rewritten), and what the idempotency hash costs.
// The compact form must save at least 32 bytes a record.
func TestRecordBytes(t *testing.T) {
	s := connect(t, servicetest.Redis.URL(t))
	ctx := context.Background()
	const n = 5000
	sale := liveSale(n, 1)
	sale.ID = servicetest.UniqueName("sale_") // as long as the soak's
	mustPreheat(t, s, sale)
	var reqs []seckill.ReserveRequest
	for i := range n {
		reqs = append(reqs, request(sale.ID, fmt.Sprintf("user-%05d", i), 1, fmt.Sprintf("key-%08d", i)))
	}
	for i := 0; i < n; i += 500 {
		if _, err := s.StockStore().Reserve(ctx, sale.ID, reqs[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	compact, err := s.Archive().Footprint(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	key := s.keys(sale.ID)[keyRes]
	at := time.Now().UnixMilli()
	for _, r := range reqs {
		plantRecord(t, s, key, r.ReservationID, fmt.Sprintf("active:1:%d:%s", at, r.UserID))
	}
	old, err := s.Archive().Footprint(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	perRes := func(f Footprint, k string) float64 { return float64(f.Keys[k]) / n }
	t.Logf("res bytes per reservation: %.0f before, %.0f compact (sale id %d bytes, user id 10); idem %.0f, buyers %.0f; all keys %.0f before, %.0f compact",
		perRes(old, "res"), perRes(compact, "res"), len(sale.ID), perRes(compact, "idem"), perRes(compact, "buyers"), old.BytesPerReservation(), compact.BytesPerReservation())
	if saved := perRes(old, "res") - perRes(compact, "res"); saved < 32 {
		t.Errorf("the compact record saves %.0f bytes; want at least 32", saved)
	}
}

// TestScriptOutcomesMatchTheLuaHeader: every code outcomes.lua names is
// in scriptOutcomes under the same name and number, and no other.
func TestScriptOutcomesMatchTheLuaHeader(t *testing.T) {
	src, err := luaFiles.ReadFile("outcomes.lua")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^local ([A-Z_]+) = (\d+)`)
	found := re.FindAllStringSubmatch(string(src), -1)
	if len(found) != len(scriptOutcomes) {
		t.Errorf("outcomes.lua names %d codes, scriptOutcomes %d", len(found), len(scriptOutcomes))
	}
	for _, m := range found {
		code, _ := strconv.ParseInt(m[2], 10, 64)
		if so, ok := scriptOutcomes[code]; !ok || so.name != m[1] {
			t.Errorf("outcomes.lua: %s = %d; scriptOutcomes[%d] = %+v", m[1], code, code, so)
		}
	}
	if !strings.HasPrefix(reserveLua, string(src)) {
		t.Error("reserve.lua runs without outcomes.lua in front of it")
	}
}
