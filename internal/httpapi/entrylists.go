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
// after that, up to entryListsMaxBytes of lists (the oldest go first). A
// larger list (over a million entrants) is not kept: it is read again at
// most once every entryListRereadAfter, and asked for in between it is
// answered 503 with Retry-After, so a client in a loop cannot keep Redis
// busy reading it.
type entryLists struct {
	mu       sync.Mutex
	bodies   map[string][]byte
	order    []string // sale ids, oldest first
	bytes    int
	reads    singleflight.Group
	maxBytes int                  // of lists kept; 0: entryListsMaxBytes
	bigRead  map[string]time.Time // when a list too big to keep was last read
}

const entryListsMaxBytes = 64 << 20

// entryListRereadAfter is how long after reading a list too big to keep a
// node reads it again.
const entryListRereadAfter = 10 * time.Second

var errEntryListBusy = &retryError{err: seckill.Errorf(seckill.EOVERLOADED,
	"This entry list is too big to keep and was read a moment ago; retry shortly."), after: entryListRereadAfter}

// entryListTimeout bounds the read of one list: the requests waiting on
// it share it, so it outlives the one that started it.
const entryListTimeout = 30 * time.Second

// body returns the published list of sale saleID, drawn, at now: read
// builds it.
func (c *entryLists) body(saleID string, now time.Time, read func() ([]byte, error)) ([]byte, error) {
	if b, ok := c.kept(saleID); ok {
		return b, nil
	}
	if c.readLately(saleID, now) {
		return nil, errEntryListBusy
	}
	v, err, _ := c.reads.Do(saleID, func() (any, error) {
		// A flight that ended just before this one began kept it.
		if b, ok := c.kept(saleID); ok {
			return b, nil
		}
		b, err := read()
		if err == nil && !c.keep(saleID, b) {
			c.mu.Lock()
			if c.bigRead == nil {
				c.bigRead = map[string]time.Time{}
			}
			c.bigRead[saleID] = now
			c.mu.Unlock()
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

// readLately reports whether saleID's list, too big to keep, was read
// less than entryListRereadAfter before now.
func (c *entryLists) readLately(saleID string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.bigRead[saleID]
	return ok && now.Before(at.Add(entryListRereadAfter)) && !now.Before(at)
}

// keep keeps b as saleID's list unless it is too big to keep (false).
func (c *entryLists) keep(saleID string, b []byte) bool {
	limit := c.maxBytes
	if limit <= 0 {
		limit = entryListsMaxBytes
	}
	if len(b) > limit {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.bodies[saleID]; ok {
		return true
	}
	for c.bytes+len(b) > limit && len(c.order) > 0 {
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
	return true
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
		if entries, err = s.lottery.Copy.KeptEntries(ctx, sale.ID); err != nil {
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
