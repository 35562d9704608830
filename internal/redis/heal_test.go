package redis

import (
	"context"
	"testing"

	"github.com/seckill-dev/seckill"
)

// testHealKeepsAdmission: a queue sale whose stock hashes vanished (a
// Redis that restarted without its data) is recreated by the heal as a
// queue sale: a claim its admission did not let in is still refused.
func testHealKeepsAdmission(t *testing.T, s *Store) {
	ctx := context.Background()
	sale := liveSale(10, 1)
	sale.Admission = seckill.Admission{Mode: seckill.AdmitQueue, AdmitPerSecond: 5}
	mustPreheat(t, s, sale)
	bs, err := s.buckets(ctx, sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(u string) seckill.Outcome {
		t.Helper()
		got, err := s.StockStore().Reserve(ctx, sale.ID, []seckill.ReserveRequest{request(sale.ID, u, 1, "")})
		if err != nil {
			t.Fatalf("reserve %s: %v", u, err)
		}
		return got[0].Outcome
	}
	if got := claim("before"); got != seckill.OutcomeAdmissionRequired {
		t.Fatalf("a claim not let in, before the loss: %v; want admission required", got)
	}
	for _, tag := range bs.tags {
		if err := s.client.Do(ctx, s.client.B().Del().Key(s.keys(tag)[keyStock]).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	const token = "1:admission"
	if recreated, err := s.Healer().BeginHeal(ctx, sale, token); err != nil || !recreated {
		t.Fatalf("BeginHeal = %v, %v; want the stock recreated", recreated, err)
	}
	if _, _, err := s.Healer().ApplyHeal(ctx, sale, token, nil, nil); err != nil {
		t.Fatalf("ApplyHeal: %v", err)
	}
	if got := claim("after"); got != seckill.OutcomeAdmissionRequired {
		t.Errorf("a claim not let in, after the heal recreated the sale: %v; want admission required", got)
	}
}
