package redis

import (
	"slices"
	"testing"

	"github.com/redis/rueidis"

	"github.com/seckill-dev/seckill/internal/redis/redistest"
)

// TestStoreCommandsAreNotRecycled: rueidis recycles a command once it is
// answered, clearing its arguments, even when it was answered on a second
// connection after the first broke while its writer was still reading the
// command (a data race in a fault test that restarts Redis). The store's
// client pins what it sends: a command is intact after Do and DoMulti
// return. Without the pin, Do leaves it empty.
func TestStoreCommandsAreNotRecycled(t *testing.T) {
	s := connect(t, redistest.StartServer(t).URL())
	ctx := t.Context()
	c := s.client
	one := c.B().Smembers().Key(s.outboxRegistryKey()).Build()
	if err := c.Do(ctx, one).Error(); err != nil {
		t.Fatal(err)
	}
	if got := one.Commands(); !slices.Equal(got, []string{"SMEMBERS", s.outboxRegistryKey()}) {
		t.Errorf("after Do the command reads %q: recycled", got)
	}
	two := []rueidis.Completed{c.B().Get().Key(s.outboxRegistryKey() + ":a").Build(), c.B().Get().Key(s.outboxRegistryKey() + ":b").Build()}
	for _, r := range c.DoMulti(ctx, two...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
	}
	for i, cmd := range two {
		if got := cmd.Commands(); len(got) != 2 || got[0] != "GET" {
			t.Errorf("after DoMulti command %d reads %q: recycled", i, got)
		}
	}
}
