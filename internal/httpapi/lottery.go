package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/seckill-dev/seckill"
)

// LotteryStore is the stock store's side of a lottery that the API reads
// (internal/redis.Lottery).
type LotteryStore interface {
	Entry(ctx context.Context, saleID, userID string) (e seckill.LotteryEntry, ok bool, err error)
	Won(ctx context.Context, saleID, userID string) (reservationID string, ok bool, err error)
	Entries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
}

// EntryCopy is the database's copy of a lottery's entries
// (internal/sqlstore.EntryStore), which has every entry before its answer:
// read when Redis has none of a buyer's and may have lost it, or has
// dropped the sale's keys once it was archived.
type EntryCopy interface {
	KeptEntry(ctx context.Context, saleID, userID string) (e seckill.LotteryEntry, reservationID string, ok bool, err error)
	KeptEntries(ctx context.Context, saleID string) ([]seckill.LotteryEntry, error)
}

// DrawReader reads a lottery's draw record (internal/sqlstore.DrawStore).
type DrawReader interface {
	EnsureDraw(ctx context.Context, saleID string) (seckill.DrawRecord, error)
}

// LotteryConfig serves the lottery routes; Enterer, Store and Draws are
// required.
type LotteryConfig struct {
	Enterer seckill.Enterer
	Store   LotteryStore
	Draws   DrawReader
	// Copy, if set, is the database's copy of the entries, which has
	// every entry before its answer (lottery.Book): it answers a buyer
	// Redis does not know of once the sale has ended (the archiver drops
	// the keys only after the copy), or while Redis does not hold the sale
	// whole (Ready), before the heal puts her entry back.
	Copy EntryCopy
	// Ready, if set, tells whether Redis holds a sale whole.
	Ready SaleReadiness
}

// drawCacheTTL is how long a draw record not yet drawn is kept: buyers
// polling for their result cost the database one read a sale a second. A
// finished draw never changes and is kept for good.
const drawCacheTTL = time.Second

type drawCache struct {
	mu      sync.Mutex
	entries map[string]drawCached
	reads   singleflight.Group // the requests that find a record stale share one read
}

type drawCached struct {
	rec seckill.DrawRecord
	at  time.Time
}

// fresh returns the kept record of saleID if it may still be answered at
// now: drawn, or read less than drawCacheTTL before.
func (c *drawCache) fresh(saleID string, now time.Time) (seckill.DrawRecord, bool) {
	c.mu.Lock()
	e, ok := c.entries[saleID]
	c.mu.Unlock()
	return e.rec, ok && (e.rec.Drawn() || now.Sub(e.at) < drawCacheTTL)
}

func (s *Server) drawRecord(ctx context.Context, saleID string) (seckill.DrawRecord, error) {
	c := &s.draws
	now := time.Now()
	if rec, ok := c.fresh(saleID, now); ok {
		return rec, nil
	}
	return sharedRead(ctx, &c.reads, saleID, saleLoadTimeout, func(rctx context.Context) (seckill.DrawRecord, error) {
		// A flight that ended just before this one began kept it.
		if rec, ok := c.fresh(saleID, time.Now()); ok {
			return rec, nil
		}
		rec, err := s.lottery.Draws.EnsureDraw(rctx, saleID)
		if err != nil {
			return rec, err
		}
		c.mu.Lock()
		if c.entries == nil {
			c.entries = map[string]drawCached{}
		}
		c.entries[saleID] = drawCached{rec: rec, at: now}
		c.mu.Unlock()
		return rec, nil
	})
}

type entryResponse struct {
	EntryID       string              `json:"entry_id"`
	Qty           int64               `json:"qty"`
	Status        seckill.EntryStatus `json:"status"`
	ReservationID string              `json:"reservation_id,omitempty"`
	ResultsAt     time.Time           `json:"results_at"`
}

// admissionSale is the sale of the path, from the cache, when its
// admission is mode (what names it in the refusal: "a lottery").
func (s *Server) admissionSale(w http.ResponseWriter, r *http.Request, mode seckill.AdmissionMode, what string) (*seckill.Sale, int) {
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		return nil, errSaleNotFound.write(w)
	}
	sale, err := s.cache.get(r.Context(), id)
	if errors.Is(err, seckill.ErrNotFound) {
		return nil, errSaleNotFound.write(w)
	} else if err != nil {
		return nil, s.writeError(w, r, err)
	}
	if sale.Admission.Of() != mode {
		return nil, s.writeError(w, r, seckill.Errorf(seckill.EADMISSION, "This sale is %s, not %s.", sale.Admission.Of(), what))
	}
	return sale, 0
}

// handleEnter serves POST /api/v1/sales/{id}/entries: one entry per
// buyer; a second answers the first (200), a new one is 201.
func (s *Server) handleEnter(w http.ResponseWriter, r *http.Request) int {
	userID, err := s.buyer(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	sale, status := s.admissionSale(w, r, seckill.AdmitLottery, "a lottery")
	if sale == nil {
		return status
	}
	now := s.now()
	if err := seckill.EntryWindow(sale, now); err != nil {
		return s.writeError(w, r, err)
	}
	if err := checkContentType(r); err != nil {
		return s.writeError(w, r, err)
	}
	qty, err := decodeReservationRequest(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return s.writeError(w, r, err)
	}
	if qty > sale.PurchaseLimit {
		return s.writeError(w, r, seckill.Errorf(seckill.EPURCHASELIMIT, "qty is over this sale's limit of %d a buyer.", sale.PurchaseLimit))
	}
	// A repeat this node knows is answered before the rate limits, as a
	// sold-out claim is: it costs no backend call and changes nothing.
	// A blocked address or buyer is refused first all the same.
	if known, ok := s.knownEntry(sale.ID, userID, now); ok {
		if retry, blocked := s.guard.blockedNow(r, userID, now); blocked {
			return writeRateLimited(w, retry)
		}
		return s.writeEntered(w, r, http.StatusOK, known, sale.Admission.EntriesCloseAt)
	}
	checks, status, ok := s.limitAdmission(w, r, userID)
	if !ok {
		return status
	}
	res, err := s.lottery.Enterer.Enter(r.Context(), sale, seckill.EntryRequest{EntryID: seckill.NewEntryID(), UserID: userID, Qty: qty, RateChecks: checks})
	if err != nil {
		return s.writeError(w, r, err)
	}
	if res.Refused == seckill.ERATELIMITED {
		return s.admissionRateLimited(w, checks, res.RateLimitedBy, res.RetryAfter, now)
	}
	switch res.Refused {
	case "":
	case seckill.ETRYLATER:
		return s.writeError(w, r, errEntriesLoading)
	default:
		return s.writeError(w, r, seckill.Errorf(res.Refused, "Entries are not open."))
	}
	code := http.StatusOK
	if res.New {
		code = http.StatusCreated
		s.lotteryMetrics.entrants.Inc()
	}
	return s.writeEntered(w, r, code, res.Entry, sale.Admission.EntriesCloseAt)
}

// knownEntries is an Enterer that remembers entries (internal/repeats).
type knownEntries interface {
	KnownEntry(saleID, userID string, now time.Time) (seckill.LotteryEntry, bool)
}

func (s *Server) knownEntry(saleID, userID string, now time.Time) (seckill.LotteryEntry, bool) {
	if k, ok := s.lottery.Enterer.(knownEntries); ok {
		return k.KnownEntry(saleID, userID, now)
	}
	return seckill.LotteryEntry{}, false
}

// writeEntered writes the answer to an entry: entryResponse's JSON. Ids
// this system makes need no escaping, so the body is built by appending,
// as writeAccepted's is (encoding/json was a third of the route's CPU);
// anything else goes through encoding/json.
func (s *Server) writeEntered(w http.ResponseWriter, r *http.Request, code int, e seckill.LotteryEntry, resultsAt time.Time) int {
	if !plainID(e.ID) || resultsAt.Year() < 1 || resultsAt.Year() > 9999 {
		return s.writeJSON(w, r, code, entryResponse{EntryID: e.ID, Qty: e.Qty, Status: seckill.EntryEntered, ResultsAt: resultsAt})
	}
	body := make([]byte, 0, 2*len(e.ID)+96)
	body = append(body, `{"entry_id":"`...)
	body = append(body, e.ID...)
	body = append(body, `","qty":`...)
	body = strconv.AppendInt(body, e.Qty, 10)
	body = append(body, `,"status":"`+string(seckill.EntryEntered)+`","results_at":"`...)
	body = resultsAt.AppendFormat(body, time.RFC3339Nano)
	body = append(body, "\"}\n"...)
	writeBody(w, code, body)
	return code
}

// handleMyEntry serves GET /api/v1/sales/{id}/entries/mine.
func (s *Server) handleMyEntry(w http.ResponseWriter, r *http.Request) int {
	userID, err := s.recordsBuyer(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	sale, status := s.admissionSale(w, r, seckill.AdmitLottery, "a lottery")
	if sale == nil {
		return status
	}
	e, ok, err := s.lottery.Store.Entry(r.Context(), sale.ID, userID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	// A buyer Redis does not know of is read from the database's copy once
	// the sale has ended, or while Redis lost the sale or heals it.
	fromCopy, wonID := false, ""
	if !ok && s.lottery.Copy != nil {
		ended, ready := !s.now().Before(sale.EndAt), true
		if !ended {
			if ready, err = saleReady(r.Context(), s.lottery.Ready, sale.ID); err != nil {
				return s.writeError(w, r, err)
			}
		}
		if seckill.EntryFromCopy(ended, ready) {
			if e, wonID, ok, err = s.lottery.Copy.KeptEntry(r.Context(), sale.ID, userID); err != nil {
				return s.writeError(w, r, err)
			}
			fromCopy = ok
		}
	}
	if !ok {
		return s.writeError(w, r, seckill.Errorf(seckill.ENOTFOUND, "You have not entered this draw."))
	}
	rec, err := s.drawRecord(r.Context(), sale.ID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	resp := entryResponse{EntryID: e.ID, Qty: e.Qty, ResultsAt: sale.Admission.EntriesCloseAt}
	won := false
	switch {
	case fromCopy:
		// The draw writes its winners there before Redis records them.
		resp.ReservationID, won = wonID, wonID != ""
	case rec.Drawn():
		if resp.ReservationID, won, err = s.lottery.Store.Won(r.Context(), sale.ID, userID); err != nil {
			return s.writeError(w, r, err)
		}
	}
	resp.Status = seckill.EntryStatusOf(rec.Drawn(), won)
	return s.writeJSON(w, r, http.StatusOK, resp)
}

// handleDraw serves GET /api/v1/sales/{id}/draw: the commitment from the
// start, the seed, entrants and winners once drawn.
func (s *Server) handleDraw(w http.ResponseWriter, r *http.Request) int {
	sale, status := s.admissionSale(w, r, seckill.AdmitLottery, "a lottery")
	if sale == nil {
		return status
	}
	rec, err := s.drawRecord(r.Context(), sale.ID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	return s.writeJSON(w, r, http.StatusOK, rec.Published())
}

type drawEntriesResponse struct {
	Entries []seckill.LotteryEntry `json:"entries"`
}

// handleDrawEntries serves GET /api/v1/sales/{id}/draw/entries: every
// entry (id and qty, never the buyer), once drawn, so that anyone can
// recompute the winners (seckill draw verify).
func (s *Server) handleDrawEntries(w http.ResponseWriter, r *http.Request) int {
	sale, status := s.admissionSale(w, r, seckill.AdmitLottery, "a lottery")
	if sale == nil {
		return status
	}
	rec, err := s.drawRecord(r.Context(), sale.ID)
	if err != nil {
		return s.writeError(w, r, err)
	}
	if !rec.Drawn() {
		return s.writeError(w, r, seckill.Errorf(seckill.ESTATECONFLICT, "The entry list is published with the draw, at %s.",
			sale.Admission.EntriesCloseAt.Format(time.RFC3339)))
	}
	body, err := s.entryLists.body(sale.ID, s.now(), func() ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), entryListTimeout)
		defer cancel()
		return s.drawEntriesBody(ctx, sale)
	})
	if err != nil {
		return s.writeError(w, r, err)
	}
	// Final since the draw: a proxy in front may keep it too.
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeBody(w, http.StatusOK, body)
	return http.StatusOK
}

// lotteryArchived reports whether sale's entries may be in the database's
// copy rather than in Redis: it has ended (the archiver copies none
// before) and a copy is configured.
func (s *Server) lotteryArchived(sale *seckill.Sale) bool {
	return s.lottery.Copy != nil && !s.now().Before(sale.EndAt)
}

type lotteryMetrics struct {
	entrants prometheus.Counter
}

func newLotteryMetrics(reg prometheus.Registerer) (*lotteryMetrics, error) {
	m := &lotteryMetrics{entrants: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_lottery_entrants_total",
		Help: "Lottery entries made on this node (a buyer's repeated entry is not counted).",
	})}
	if err := reg.Register(m.entrants); err != nil {
		return nil, err
	}
	return m, nil
}
