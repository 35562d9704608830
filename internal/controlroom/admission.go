package controlroom

import (
	"context"
	"sync"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/web"
)

// LotteryReader reads a lottery's entries and winners
// (internal/redis.Lottery).
type LotteryReader interface {
	EntrantCount(ctx context.Context, saleID string) (int64, error)
	Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	AllWon(ctx context.Context, saleID string) (map[string]string, error)
}

// LotteryArchive is the database's copy of an archived lottery's entries
// (internal/sqlstore.EntryStore): read once Redis has none.
type LotteryArchive interface {
	EntryCounts(ctx context.Context, saleID string) (entries, winners int64, err error)
	KeptEntries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
	KeptWon(ctx context.Context, saleID string) (map[string]string, error)
}

// archivedLottery reads a lottery from the database's copy as
// LotteryReader reads it from Redis.
type archivedLottery struct{ a LotteryArchive }

func (l archivedLottery) EntrantCount(ctx context.Context, saleID string) (int64, error) {
	n, _, err := l.a.EntryCounts(ctx, saleID)
	return n, err
}

func (l archivedLottery) Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error) {
	return l.a.KeptEntries(ctx, saleID)
}

func (l archivedLottery) AllWon(ctx context.Context, saleID string) (map[string]string, error) {
	return l.a.KeptWon(ctx, saleID)
}

// DrawReader reads a lottery's draw record (internal/sqlstore.DrawStore).
type DrawReader interface {
	EnsureDraw(ctx context.Context, saleID string) (seckill.DrawRecord, error)
}

// QueueReader reads a waiting room's length (internal/redis.Queue).
type QueueReader interface {
	Length(ctx context.Context, saleID string) (int64, error)
}

// maxListed is how many entry ids the control room lists of the winners
// and of the waiting list.
const maxListed = 10

// maxOrders bounds the draw orders kept.
const maxOrders = 16

// drawOrders keeps the draw order of drawn lotteries: it never changes
// once drawn (the entries are closed), and computing it costs an HMAC per
// entry.
type drawOrders struct {
	mu     sync.Mutex
	bySale map[string][]seckill.LotteryEntry
}

func (d *drawOrders) get(ctx context.Context, l LotteryReader, rec seckill.DrawRecord) ([]seckill.LotteryEntry, error) {
	d.mu.Lock()
	order, ok := d.bySale[rec.SaleID]
	d.mu.Unlock()
	if ok {
		return order, nil
	}
	entries, err := l.Entries(ctx, rec.SaleID)
	if err != nil {
		return nil, err
	}
	order = seckill.DrawOrder(rec.Seed, entries)
	if len(order) == 0 {
		// Not kept: the keys of an archived lottery may have gone since
		// its entrants were counted, and no entries cost nothing to read.
		return order, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bySale == nil || len(d.bySale) >= maxOrders {
		d.bySale = map[string][]seckill.LotteryEntry{}
	}
	d.bySale[rec.SaleID] = order
	return order, nil
}

// Admission is a lottery's or a queue's admission now
// (web.Config.Admission), read at most once per snapshotTTL: the draw
// record is a database read. Counts it has no reader for are NA.
func (r *Room) Admission(ctx context.Context, sale *seckill.Sale) (web.AdmissionSnapshot, error) {
	now := r.cfg.Now()
	if a, _, ok := r.recentAdmission.Get(sale.ID, now); ok {
		return a, nil
	}
	a, err := r.admission(ctx, sale)
	if err != nil {
		return a, err
	}
	r.recentAdmission.Put(sale.ID, a, now.Add(snapshotTTL), now)
	return a, nil
}

func (r *Room) admission(ctx context.Context, sale *seckill.Sale) (web.AdmissionSnapshot, error) {
	a := web.AdmissionSnapshot{Entrants: web.NA, Winners: web.NA, Promoted: web.NA, Waiting: web.NA,
		QueueLength: web.NA, Admitted: web.NA, TicketsIssued: web.NA}
	switch sale.Admission.Of() {
	case seckill.AdmitLottery:
		return a, r.lottery(ctx, sale, &a)
	case seckill.AdmitQueue:
		pace := seckill.FixedQueuePace(sale)
		if r.cfg.Pace != nil {
			var err error
			if pace, err = r.cfg.Pace(ctx, sale); err != nil {
				return a, err
			}
		}
		a.AdmitRate = pace.Rate
		if r.cfg.Queue != nil {
			n, err := r.cfg.Queue.Length(ctx, sale.ID)
			if err != nil {
				return a, err
			}
			a.QueueLength = n
			a.Admitted = min(n, pace.AdmittedAt(r.cfg.Now()))
		}
		if n, ok := r.counter("seckill_queue_tickets_issued_total"); ok {
			a.TicketsIssued, a.TicketsNodeWide = n, true
		}
	}
	return a, nil
}

func (r *Room) lottery(ctx context.Context, sale *seckill.Sale, a *web.AdmissionSnapshot) error {
	l, draws := r.cfg.Lottery, r.cfg.Draws
	if l == nil || draws == nil {
		return nil
	}
	n, err := l.EntrantCount(ctx, sale.ID)
	if err != nil {
		return err
	}
	// The archiver drops the keys of an ended lottery only after copying
	// its entries, so an ended one Redis has no entrants of is read from
	// the copy, as GET /draw/entries does.
	if n == 0 && r.cfg.Archive != nil && !r.cfg.Now().Before(sale.EndAt) {
		l = archivedLottery{r.cfg.Archive}
		if n, err = l.EntrantCount(ctx, sale.ID); err != nil {
			return err
		}
	}
	a.Entrants = n
	rec, err := draws.EnsureDraw(ctx, sale.ID)
	if err != nil {
		return err
	}
	a.Commitment = seckill.DrawCommitment(rec.Seed)
	if !rec.Drawn() {
		return nil
	}
	a.Seed, a.DrawnAt = rec.Seed, rec.DrawnAt
	a.Winners, a.WinnerIDs = int64(len(rec.Winners)), rec.Winners[:min(len(rec.Winners), maxListed)]
	order, err := r.orders.get(ctx, l, rec)
	if err != nil {
		return err
	}
	won, err := l.AllWon(ctx, sale.ID)
	if err != nil {
		return err
	}
	waiting, promoted := waitingList(order, rec.Winners, won)
	a.Promoted, a.Waiting = promoted, int64(len(waiting))
	for _, e := range waiting[:min(len(waiting), maxListed)] {
		a.NextWaiting = append(a.NextWaiting, e.ID)
	}
	return nil
}

// waitingList splits a drawn lottery's entrants who did not win at the
// draw: those given a unit since (promoted), and the rest, in draw order,
// who are next when a unit comes back.
func waitingList(order []seckill.LotteryEntry, drawWinners []string, won map[string]string) (waiting []seckill.LotteryEntry, promoted int64) {
	atDraw := make(map[string]bool, len(drawWinners))
	for _, id := range drawWinners {
		atDraw[id] = true
	}
	for _, e := range order {
		switch _, hasUnit := won[e.UserID]; {
		case atDraw[e.ID]:
		case hasUnit:
			promoted++
		default:
			waiting = append(waiting, e)
		}
	}
	return waiting, promoted
}

// counter reads the sum of a counter of this node's registry.
func (r *Room) counter(name string) (int64, bool) {
	families, err := r.cfg.Gatherer.Gather()
	if err != nil {
		return 0, false
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		var n float64
		for _, m := range f.GetMetric() {
			n += m.GetCounter().GetValue()
		}
		return int64(n), true
	}
	return 0, false
}
