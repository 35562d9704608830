package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seckill-dev/seckill"
)

// The control room's live feed is a server-sent event stream per sale:
//
//	event: sale     the sale row, once
//	event: history  {"points":[…]}: the samples of the last HistoryWindow, once
//	event: sample   one new point, every EventInterval
//
// Samples are shared: however many operators watch a sale, its stock and
// Snapshot are read about once per EventInterval, and a newcomer's charts
// start with the history the others built.

// point is one sample of a sale, as the page receives it. Pointers are
// null on the wire: "n/a", not zero.
type point struct {
	Seq            uint64             `json:"seq"`
	T              int64              `json:"t"` // server time, Unix ms
	Preheated      bool               `json:"preheated"`
	Total          *int64             `json:"total"`
	Remaining      *int64             `json:"remaining"`
	Reserved       *int64             `json:"reserved"`
	Rates          map[string]float64 `json:"rates"` // answers per second since the previous sample, by outcome
	RatesNodeWide  bool               `json:"rates_node_wide"`
	Outbox         *int64             `json:"outbox"`
	BrokerBacklog  *int64             `json:"broker_backlog"`
	Orders         *int64             `json:"orders_persisted"`
	FailedOrders   *int64             `json:"failed_orders"`
	ParkedRestores *int64             `json:"parked_restores"`
	Reconciliation *reconView         `json:"reconciliation"`
	Admission      *admissionPoint    `json:"admission,omitempty"` // lottery and queue sales only
	Problems       []string           `json:"problems,omitempty"`  // what could not be read
}

// admissionPoint is a sample of a lottery's or a queue's admission.
type admissionPoint struct {
	Mode seckill.AdmissionMode `json:"mode"`
	// Lottery.
	EntriesCloseAt time.Time `json:"entries_close_at,omitzero"`
	Entrants       *int64    `json:"entrants,omitempty"`
	Commitment     string    `json:"commitment,omitempty"`
	Drawn          bool      `json:"drawn,omitempty"`
	Seed           string    `json:"seed,omitempty"`
	DrawnAt        time.Time `json:"drawn_at,omitzero"`
	Winners        *int64    `json:"winners,omitempty"`
	WinnerIDs      []string  `json:"winner_ids,omitempty"`
	Promoted       *int64    `json:"promoted,omitempty"`
	Waiting        *int64    `json:"waiting,omitempty"`
	NextWaiting    []string  `json:"next_waiting,omitempty"`
	// Queue.
	AdmitPerSecond  int64    `json:"admit_per_second,omitempty"` // the rate now
	Adaptive        bool     `json:"adaptive,omitempty"`
	QueueLength     *int64   `json:"queue_length,omitempty"`
	Admitted        *int64   `json:"admitted,omitempty"`
	TicketsIssued   *int64   `json:"tickets_issued,omitempty"`
	TicketRate      *float64 `json:"ticket_rate,omitempty"` // issued per second since the previous sample
	TicketsNodeWide bool     `json:"tickets_node_wide,omitempty"`
}

type reconView struct {
	State     string    `json:"state"`
	Oversold  int64     `json:"oversold"`
	Undersold int64     `json:"undersold"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

func count(n int64) *int64 {
	if n < 0 {
		return nil
	}
	return &n
}

// maxSeries bounds the sales whose history is kept at once.
const maxSeries = 64

// seriesSet holds the recent samples of the sales being watched.
type seriesSet struct {
	window, interval time.Duration

	mu   sync.Mutex
	byID map[string]*series
}

// series is one sale's samples. Its mutex is held while sampling, so
// viewers of one sale wait for one read instead of each making their own.
type series struct {
	// row is the sale's latest database row (read each sample, kept when
	// a read fails): the stock shown is never above its unsold units.
	row *seckill.Sale

	mu          sync.Mutex
	points      []point // oldest first, within the window
	seq         uint64
	sampledAt   time.Time // monotonic
	prevCounts  map[string]int64
	prevAt      time.Time // monotonic
	lastProb    string    // the problems of the previous sample, to log changes only
	prevTickets int64     // tickets issued at the previous sample, -1 for none

	lastUsed time.Time // guarded by seriesSet.mu
}

func newSeriesSet(window, interval time.Duration) *seriesSet {
	return &seriesSet{window: window, interval: interval, byID: map[string]*series{}}
}

// get returns the series of a sale, creating it, and forgetting series
// nobody has watched for a window, or the least recently watched one when
// there are too many.
func (ss *seriesSet) get(sale *seckill.Sale, now time.Time) *series {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[sale.ID]
	if !ok {
		for id, o := range ss.byID {
			if now.Sub(o.lastUsed) > 2*ss.window {
				delete(ss.byID, id)
			}
		}
		if len(ss.byID) >= maxSeries {
			var oldest string
			for id, o := range ss.byID {
				if oldest == "" || o.lastUsed.Before(ss.byID[oldest].lastUsed) {
					oldest = id
				}
			}
			delete(ss.byID, oldest)
		}
		s = &series{row: sale, prevTickets: -1}
		ss.byID[sale.ID] = s
	}
	s.lastUsed = now
	return s
}

// sample returns the sale's latest point, reading a new one unless the
// latest is younger than half an interval. Ages and rates are measured on
// the monotonic clock; points are stamped with Config.Now, the clock the
// pages count by.
func (h *Handler) sample(ctx context.Context, s *series, saleID string) point {
	s.mu.Lock()
	defer s.mu.Unlock()
	mono := time.Now()
	if s.seq > 0 && mono.Sub(s.sampledAt) < h.interval/2 {
		return s.points[len(s.points)-1]
	}
	now := h.now()
	p := h.read(ctx, s, saleID, now, mono)
	s.seq++
	p.Seq = s.seq
	s.sampledAt = mono
	s.points = append(s.points, p)
	cut := now.Add(-h.series.window).UnixMilli()
	i := 0
	for i < len(s.points)-1 && s.points[i].T < cut {
		i++
	}
	s.points = s.points[i:]
	return p
}

// read takes one sample. A failing read is logged when what fails
// changes, not once a second.
func (h *Handler) read(ctx context.Context, s *series, saleID string, now, mono time.Time) point {
	// The sample is shared: the viewer whose tick took it leaving must not
	// spoil it for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultSnapshotTimeout)
	defer cancel()
	p := point{T: now.UnixMilli()}
	var (
		problems []string
		errs     []any // for the log: what failed and why
	)

	// A primary-key read per interval keeps the stock shown within the
	// database's unsold units (and sees added stock); while the database
	// is down the last row read stands in.
	if row, err := h.sales.Sale(ctx, saleID); err == nil {
		s.row = row
	}
	lvl, err := h.stock.Stock(ctx, saleID)
	switch {
	case err == nil:
		p.Preheated = true
		p.Total, p.Remaining, p.Reserved = count(lvl.Total), count(seckill.RemainingOf(s.row, lvl, true)), count(lvl.Reserved)
	case errors.Is(err, seckill.ErrNotFound):
		// Not preheated: nothing can have been sold.
		p.Total, p.Remaining, p.Reserved = count(s.row.Stock), count(seckill.RemainingOf(s.row, lvl, false)), count(0)
	default:
		problems = append(problems, "stock unavailable")
		errs = append(errs, "stock_err", err)
	}

	snap := EmptySnapshot()
	if h.snapshot != nil {
		if snap, err = h.snapshot(ctx, saleID); err != nil {
			snap = EmptySnapshot()
			problems = append(problems, "pipeline counts unavailable")
			errs = append(errs, "snapshot_err", err)
		}
	}
	p.Outbox, p.BrokerBacklog = count(snap.OutboxLen), count(snap.BrokerBacklog)
	p.Orders, p.FailedOrders, p.ParkedRestores = count(snap.OrdersPersisted), count(snap.FailedOrders), count(snap.ParkedRestores)
	if r := snap.Reconciliation; r.State != "" {
		p.Reconciliation = &reconView{State: r.State, Oversold: r.Oversold, Undersold: r.Undersold, CheckedAt: r.CheckedAt}
	}
	p.RatesNodeWide = snap.ReservationsNodeWide
	if snap.Reservations != nil {
		if s.prevCounts != nil {
			p.Rates = rates(s.prevCounts, snap.Reservations, mono.Sub(s.prevAt))
		}
		s.prevCounts, s.prevAt = snap.Reservations, mono
	}
	if h.admission != nil && s.row != nil && !s.row.Admission.FirstCome() {
		a, err := h.admission(ctx, s.row)
		if err != nil {
			a = AdmissionSnapshot{Entrants: NA, Winners: NA, Promoted: NA, Waiting: NA, QueueLength: NA, Admitted: NA, TicketsIssued: NA}
			problems = append(problems, "admission unavailable")
			errs = append(errs, "admission_err", err)
		}
		p.Admission = admissionPointOf(s.row, a)
		if a.TicketsIssued >= 0 && s.prevTickets >= 0 && s.seq > 0 && mono.Sub(s.sampledAt) > 0 {
			d := a.TicketsIssued - s.prevTickets
			if d < 0 {
				d = a.TicketsIssued // a restart
			}
			r := float64(d) / mono.Sub(s.sampledAt).Seconds()
			p.Admission.TicketRate = &r
		}
		s.prevTickets = a.TicketsIssued
	}
	p.Problems = problems
	if prob := strings.Join(problems, ", "); prob != s.lastProb {
		if prob == "" {
			h.logger.InfoContext(ctx, "control room: sale readable again", "sale", saleID)
		} else {
			h.logger.WarnContext(ctx, "control room: read failed", append([]any{"sale", saleID}, errs...)...)
		}
		s.lastProb = prob
	}
	return p
}

func admissionPointOf(sale *seckill.Sale, a AdmissionSnapshot) *admissionPoint {
	p := &admissionPoint{Mode: sale.Admission.Of()}
	switch p.Mode {
	case seckill.AdmitLottery:
		p.EntriesCloseAt = sale.Admission.EntriesCloseAt
		p.Entrants, p.Commitment = count(a.Entrants), a.Commitment
		if !a.DrawnAt.IsZero() {
			p.Drawn, p.Seed, p.DrawnAt = true, a.Seed, a.DrawnAt
			p.Winners, p.WinnerIDs, p.Promoted = count(a.Winners), a.WinnerIDs, count(a.Promoted)
			p.Waiting, p.NextWaiting = count(a.Waiting), a.NextWaiting
		}
	case seckill.AdmitQueue:
		p.AdmitPerSecond, p.Adaptive = cmp.Or(a.AdmitRate, sale.Admission.AdmitPerSecond), sale.Admission.Adaptive != nil
		p.QueueLength, p.Admitted = count(a.QueueLength), count(a.Admitted)
		p.TicketsIssued, p.TicketsNodeWide = count(a.TicketsIssued), a.TicketsNodeWide
	}
	return p
}

// rates turns two readings of cumulative counters into answers per
// second. A counter that went down was reset (a restart): its new value
// is what happened since.
func rates(prev, cur map[string]int64, dt time.Duration) map[string]float64 {
	if dt <= 0 {
		return nil
	}
	out := make(map[string]float64, len(cur))
	for k, v := range cur {
		d := v - prev[k]
		if d < 0 {
			d = v
		}
		out[k] = float64(d) / dt.Seconds()
	}
	return out
}

// history returns a copy of the points kept.
func (s *series) history() []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]point(nil), s.points...)
}

// handleEvents serves GET /admin/v1/sales/{id}/events?ticket=…
func (h *Handler) handleEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if h.tickets == nil || h.tickets.verify(r.URL.Query().Get("ticket"), id, h.now()) != nil {
		writeError(w, errTicket)
		return
	}
	// The stream itself runs until the operator leaves; opening it has
	// the budget of any request.
	sctx, cancel := context.WithTimeout(r.Context(), h.budget)
	sale, err := h.sales.Sale(sctx, id)
	cancel()
	if errors.Is(err, seckill.ErrNotFound) {
		writeError(w, seckill.Errorf(seckill.ESALENOTFOUND, "No such sale."))
		return
	} else if err != nil {
		h.logger.ErrorContext(r.Context(), "events: sale", "sale", id, "err", err)
		h.degraded(r.Pattern, "unavailable")
		writeError(w, seckill.Errorf(seckill.EUNAVAILABLE, "The sale cannot be read; retry shortly."))
		return
	}
	s := h.series.get(sale, h.now())

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // a buffering proxy would hold the stream back
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)

	st := &stream{w: w, rc: http.NewResponseController(w), interval: h.interval}
	// The server's read timeout is for reading requests; this one is read.
	if err := st.rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return
	}
	// A newcomer gets a fresh sample and, with it, the history the others
	// built.
	latest := h.sample(r.Context(), s, id)
	hist := s.history()
	if err := st.send("sale", sale, "retry: 2000\n"); err != nil {
		return
	}
	if err := st.send("history", struct {
		Points []point `json:"points"`
	}{hist}, ""); err != nil {
		return
	}
	sent := latest.Seq
	if n := len(hist); n > 0 {
		sent = max(sent, hist[n-1].Seq)
	}

	// Every viewer ticks on the same boundaries of the clock, so the first
	// to tick reads and the others reuse its sample: one read per interval
	// however many watch.
	tick := time.NewTimer(untilNextTick(time.Now(), h.interval))
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.closed:
			return
		case <-tick.C:
			tick.Reset(untilNextTick(time.Now(), h.interval))
		}
		// Looking it up again keeps it from being forgotten; if it was
		// (too many sales watched), carry on with the new one.
		if ns := h.series.get(sale, h.now()); ns != s {
			s, sent = ns, 0
		}
		p := h.sample(r.Context(), s, id)
		if p.Seq <= sent {
			// Another viewer's read is fresh enough; keep the line busy
			// so proxies and the browser see it is alive.
			if err := st.comment("keep-alive"); err != nil {
				return
			}
			continue
		}
		sent = p.Seq
		if err := st.send("sample", p, ""); err != nil {
			return
		}
	}
}

// untilNextTick is the time from now to the next multiple of interval.
func untilNextTick(now time.Time, interval time.Duration) time.Duration {
	return now.Truncate(interval).Add(interval).Sub(now)
}

var errTicket = seckill.Errorf(seckill.EUNAUTHORIZED, "A valid, unexpired ticket is required (POST /admin/v1/sse-ticket).")

// stream writes server-sent events. Each write gets its own deadline,
// so the server's WriteTimeout, meant for ordinary answers, does not cut
// a feed that lives for hours.
type stream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	interval time.Duration
}

func (st *stream) send(event string, v any, prefix string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// json.Marshal output holds no raw newline, so one data line suffices.
	return st.write(prefix + "event: " + event + "\ndata: " + string(b) + "\n\n")
}

func (st *stream) comment(text string) error { return st.write(": " + text + "\n\n") }

func (st *stream) write(s string) error {
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.interval + 10*time.Second)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := st.w.Write([]byte(s)); err != nil {
		return err
	}
	return st.rc.Flush()
}
