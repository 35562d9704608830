package sqlstore

import (
	"hash/maphash"
	"sync"

	"github.com/seckill-dev/seckill"
)

// maxHeldEntries bounds the buyers the holdings of all sales keep in
// memory (about 24 bytes each, TestHoldingsMemory: some 70 MB, what a
// million ids kept as strings took): a sale that would pass it is
// dropped, and its batches read what their buyers hold again, which
// costs 1.1-1.3x the CPU an order (BenchmarkWriterGrowth just past the
// old bound of a million).
const maxHeldEntries = 3_000_000

// holdings remembers, for each sale this store has persisted since the
// sale's first order, the units of every buyer's orders, so that a batch
// need not read them: on MariaDB that read was a quarter of the
// database's CPU per order (an index seek per buyer, with a buyer per
// order in a rush).
//
// A sale's holdings are exact at one version of the sale's row: they
// start empty at version 1 (a sale no writer has touched has no order)
// and each of this store's commits moves them to the version it left the
// row at, with the batch's new orders added. Every write that adds an
// order to a sale moves its version (a writer in another process, a
// re-drive), so a batch that reads another version than the holdings'
// drops them and reads from the database, as it does for a sale seen
// first after its first order. Writes that take units back without moving
// the version (a cancelled order) only make the holdings count too much:
// an order refused for the limit on their word is tried again reading the
// database (PersistReservations' recheck), which drops them too. Orders
// created cancelled count as well, so that the holdings never count less
// than the database, whatever status an order moves to later.
//
// A buyer is kept by a 64-bit hash of their id under a seed of this
// process (a few bytes a buyer instead of a copy of the id). Two buyers
// of one hash share a count, which can only make it count too much: the
// recheck above, not a wrong order.
type holdings struct {
	mu      sync.Mutex
	sales   map[string]*saleHoldings
	entries int // buyers over all sales
	max     int // bound on entries; 0: maxHeldEntries
	seed    maphash.Seed
	hash    func(userID string) uint64 // nil: maphash under seed; tests collide buyers with it
}

type saleHoldings struct {
	version int64            // the sale's version they are exact at
	held    map[uint64]int64 // hash of a buyer (holdings.buyer) → units; absent: none
}

// buyer is userID's key in a sale's holdings. Called with h.mu held.
func (h *holdings) buyer(userID string) uint64 {
	if h.hash != nil {
		return h.hash(userID)
	}
	if h.seed == (maphash.Seed{}) {
		h.seed = maphash.MakeSeed()
	}
	return maphash.String(h.seed, userID)
}

// at returns what buyers hold in saleID at version, and false when the
// holdings are not known at that version (then they are dropped).
func (h *holdings) at(saleID string, version int64, buyers []string) (map[string]int64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sales[saleID]
	if s == nil {
		return nil, false
	}
	if s.version != version {
		h.dropLocked(saleID)
		return nil, false
	}
	held := make(map[string]int64, len(buyers))
	for _, b := range buyers {
		if n := s.held[h.buyer(b)]; n > 0 {
			held[b] = n
		}
	}
	return held, true
}

// known reports whether saleID's holdings are kept.
func (h *holdings) known(saleID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sales[saleID] != nil
}

// drop forgets saleID's holdings.
func (h *holdings) drop(saleID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(saleID)
}

func (h *holdings) dropLocked(saleID string) {
	if s := h.sales[saleID]; s != nil {
		h.entries -= len(s.held)
		delete(h.sales, saleID)
	}
}

// committed records a commit of this store that moved saleID from
// version to version+1, creating orders: holdings kept at version, or a
// sale's first orders (version 1), move to version+1.
func (h *holdings) committed(saleID string, version int64, orders []*seckill.Order) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sales[saleID]
	switch {
	case s == nil && version == 1:
		if h.sales == nil {
			h.sales = map[string]*saleHoldings{}
		}
		s = &saleHoldings{held: map[uint64]int64{}}
		h.sales[saleID] = s
	case s == nil:
		return
	case s.version != version:
		h.dropLocked(saleID)
		return
	}
	s.version = version + 1
	for _, o := range orders {
		b := h.buyer(o.UserID)
		if n, ok := s.held[b]; ok {
			s.held[b] = n + o.Qty
			continue
		}
		h.entries++
		s.held[b] = o.Qty
	}
	limit := h.max
	if limit == 0 {
		limit = maxHeldEntries
	}
	if h.entries > limit {
		h.dropLocked(saleID)
	}
}
