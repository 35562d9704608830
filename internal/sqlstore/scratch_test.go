package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

func TestScratchExpired(t *testing.T) {
	cutoff := time.Unix(1_000_000, 0)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"skbench_999999_ab12", true},
		{"skbench_1000000_ab12", false}, // made at the cutoff: maybe still running
		{"skbench_1000001_ab12", false},
		{"skbench_x99_ab12", false},     // not a stamp
		{"skbench_999999", false},       // no suffix
		{"skbenchx_999999_ab12", false}, // another prefix
		{"other_999999_ab12", false},
		{"skbench_999999_AB", false}, // not a scratch name
	} {
		if got := sqlstore.ScratchExpired(tc.name, "skbench", cutoff); got != tc.want {
			t.Errorf("ScratchExpired(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestScratch makes a scratch database on each server, migrates it, drops
// an old one by DropScratches and its own by the func Scratch returned.
func TestScratch(t *testing.T) {
	for _, svc := range []servicetest.Service{servicetest.MySQL, servicetest.Postgres} {
		t.Run(svc.Name, func(t *testing.T) {
			base := svc.URL(t)
			ctx := t.Context()
			prefix := servicetest.UniqueName("sk_test_scr")
			old, dropOld, err := sqlstore.Scratch(ctx, base, prefix, "a", time.Now().Add(-2*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			mine, dropMine, err := sqlstore.Scratch(ctx, base, prefix, "b", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = dropOld(ctx)
				_ = dropMine(ctx)
			})
			for _, u := range []string{old, mine} {
				db, err := sqlstore.Open(ctx, u)
				if err != nil {
					t.Fatal(err)
				}
				err = db.Migrate(ctx)
				db.Close()
				if err != nil {
					t.Fatalf("migrate %s: %v", u, err)
				}
			}
			n, err := sqlstore.DropScratches(ctx, base, prefix, time.Now().Add(-time.Hour))
			if err != nil || n != 1 {
				t.Fatalf("DropScratches = %d, %v; want the one made 2 h ago", n, err)
			}
			if err := dropMine(ctx); err != nil {
				t.Fatal(err)
			}
			if n, err := sqlstore.DropScratches(ctx, base, prefix, time.Now().Add(time.Hour)); err != nil || n != 0 {
				t.Fatalf("after both drops, DropScratches = %d, %v; want nothing left", n, err)
			}
		})
	}
}
