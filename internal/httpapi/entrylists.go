package httpapi

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/seckill-dev/seckill"
)

// entryLists keeps the answers of GET /api/v1/sales/{id}/draw/entries.
// The route is public, and a lottery's entry list is its biggest read: one
// HGETALL of the whole entries hash (tens of milliseconds of Redis, which
// answers no other command meanwhile, for 100,000 entrants), a sort and
// some megabytes of JSON. Anyone could ask for it in a loop while the
// sale's waiting list still claims through the same Redis. Once drawn the
// list never changes (entries closed before the draw read them; archiving
// moves it to the database as it is), so each node reads it once, under
// one flight for the requests that come together, and answers from memory
// after that, up to entryListsMaxBytes of lists (the oldest go first; a
// larger list alone is read for each request, still one at a time).
type entryLists struct {
	mu     sync.Mutex
	bodies map[string][]byte
	order  []string // sale ids, oldest first
	bytes  int
	reads  singleflight.Group
}

const entryListsMaxBytes = 64 << 20

// entryListTimeout bounds the read of one list: the requests waiting on
// it share it, so it outlives the one that started it.
const entryListTimeout = 30 * time.Second

// body returns the published list of sale saleID, drawn: read builds it.
func (c *entryLists) body(saleID string, read func() ([]byte, error)) ([]byte, error) {
	if b, ok := c.kept(saleID); ok {
		return b, nil
	}
	v, err, _ := c.reads.Do(saleID, func() (any, error) {
		// A flight that ended just before this one began kept it.
		if b, ok := c.kept(saleID); ok {
			return b, nil
		}
		b, err := read()
		if err == nil {
			c.keep(saleID, b)
		}
		return b, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

func (c *entryLists) kept(saleID string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bodies[saleID]
	return b, ok
}

func (c *entryLists) keep(saleID string, b []byte) {
	if len(b) > entryListsMaxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bodies[saleID]; ok {
		return
	}
	for c.bytes+len(b) > entryListsMaxBytes && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.bytes -= len(c.bodies[old])
		delete(c.bodies, old)
	}
	if c.bodies == nil {
		c.bodies = map[string][]byte{}
	}
	c.bodies[saleID] = b
	c.order = append(c.order, saleID)
	c.bytes += len(b)
}

// drawEntriesBody reads a drawn lottery's entries, from Redis or, once
// archived, the database's copy, and marshals them by entry id: ids and
// qty, never the buyers.
func (s *Server) drawEntriesBody(ctx context.Context, sale *seckill.Sale) ([]byte, error) {
	entries, err := s.lottery.Store.Entries(ctx, sale.ID)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 && s.lotteryArchived(sale) {
		if entries, err = s.lottery.Archive.ArchivedEntries(ctx, sale.ID); err != nil {
			return nil, err
		}
	}
	if entries == nil {
		entries = []seckill.LotteryEntry{} // a list, as Redis's is: never null
	}
	slices.SortFunc(entries, func(a, b seckill.LotteryEntry) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(drawEntriesResponse{Entries: entries})
	return append(b, '\n'), err
}
