package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/ticket"
)

// QueuePositions reads places in waiting rooms (internal/redis.Queue).
type QueuePositions interface {
	Position(ctx context.Context, saleID, userID string) (pos int64, ok bool, err error)
}

// QueueConfig serves the waiting-room routes of queue sales and lets
// ticket holders claim. Queuer, Positions, Tickets and Admitted are
// required.
type QueueConfig struct {
	Queuer    seckill.Queuer
	Positions QueuePositions
	Tickets   *ticket.Signer
	// Admitted decides the claims of ticket holders: a combiner over the
	// stock store's ReserveAdmitted.
	Admitted seckill.Reserver
	// OpensBefore is how long before the start the room opens. Default
	// seckill.DefaultQueueOpensBefore.
	OpensBefore time.Duration
	// PerIP caps the places one address may hold (0: none).
	PerIP int64
	// TicketTTL is how long a ticket is valid. Default
	// ticket.DefaultTTL.
	TicketTTL time.Duration
	// Pace, if set, is how far a queue sale's admission has got
	// (internal/admitpace); default its fixed admit_per_second from the
	// start.
	Pace func(ctx context.Context, s *seckill.Sale) (seckill.QueuePace, error)
	// SoldOut, if set, is Admitted's own sold-out flag: ticket holders'
	// claims do not pass the Reserver's.
	SoldOut func(saleID string, now time.Time) bool
	// Kept, if set, is the database's copy of the places, and Ready tells
	// whether Redis holds a sale whole: a buyer whose place Redis lost is
	// told to ask again while the heal puts the room back, not that she
	// has none.
	Kept  PlaceCopy
	Ready SaleReadiness
}

// ticketHeader carries an admission ticket on a reservation request.
const ticketHeader = "Admission-Ticket"

var errTicket = newStaticError(seckill.EADMISSION, "The admission ticket is not valid for this buyer and sale, or has expired: join the queue (POST /api/v1/sales/{id}/queue).")

type queueResponse struct {
	Position   int64  `json:"position"`
	Ahead      int64  `json:"ahead"`
	ETASeconds int64  `json:"eta_seconds"`
	Admitted   bool   `json:"admitted"`
	SoldOut    bool   `json:"sold_out"`
	Ticket     string `json:"ticket,omitempty"`
	// TicketHeader names the header a reservation carries the ticket in.
	TicketHeader string `json:"ticket_header,omitempty"`
}

type queueMetrics struct {
	joined, refused, ticketsIssued prometheus.Counter
	ticketsRefused                 map[ticket.Problem]prometheus.Counter
}

func newQueueMetrics(reg prometheus.Registerer) (*queueMetrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &queueMetrics{
		joined:         c("seckill_queue_joins_total", "Waiting-room joins answered with a place on this node (a repeated join included)."),
		refused:        c("seckill_queue_joins_refused_total", "Waiting-room joins refused: the address holds --queue-per-ip places."),
		ticketsIssued:  c("seckill_queue_tickets_issued_total", "Admission tickets issued on this node."),
		ticketsRefused: map[ticket.Problem]prometheus.Counter{},
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_queue_tickets_refused_total",
		Help: "Reservations on queue sales refused for their admission ticket, by reason: missing, expired, wrong_buyer, wrong_sale, bad_signature.",
	}, []string{"reason"})
	for _, p := range ticket.Problems {
		m.ticketsRefused[p] = refused.WithLabelValues(string(p)) // each reason shows from the start, at 0
	}
	for _, x := range []prometheus.Collector{m.joined, m.refused, m.ticketsIssued, refused} {
		if err := reg.Register(x); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// handleJoinQueue serves POST /api/v1/sales/{id}/queue: a place in the
// waiting room, the same one on every call.
func (s *Server) handleJoinQueue(w http.ResponseWriter, r *http.Request) int {
	userID, err := s.buyer(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	sale, status := s.admissionSale(w, r, seckill.AdmitQueue, "a queue")
	if sale == nil {
		return status
	}
	now := s.now()
	if err := seckill.QueueWindow(sale, now, s.queue.OpensBefore); err != nil {
		return s.writeError(w, r, err)
	}
	// A final place this node knows is answered before the rate limits,
	// as a sold-out claim is: it costs no backend call and changes nothing.
	// A blocked address or buyer is refused first all the same.
	if pos, ok := s.knownPlace(sale.ID, userID, now); ok {
		if retry, blocked := s.guard.blockedNow(r, userID, now); blocked {
			return writeRateLimited(w, retry)
		}
		s.queueMetrics.joined.Inc()
		resp, err := s.standing(r.Context(), sale, userID, pos, now)
		if err != nil {
			return s.writeError(w, r, err)
		}
		return s.writeStanding(w, r, resp)
	}
	checks, status, ok := s.limitAdmission(w, r, userID)
	if !ok {
		return status
	}
	join := seckill.QueueJoin{UserID: userID, RateChecks: checks}
	if addr, ok := clientAddr(r.RemoteAddr, r.Header["X-Forwarded-For"], s.guard.trusted); ok {
		join.IP = ipRateKey(addr) // an IPv6 client holds a /64: its cap is per /64, as its rate limit
	}
	res, err := s.queue.Queuer.Join(r.Context(), sale, s.queue.PerIP, join)
	if err != nil {
		return s.writeError(w, r, err)
	}
	if res.RateLimited {
		return s.admissionRateLimited(w, checks, res.RateLimitedBy, res.RetryAfter, now)
	}
	switch res.Refused {
	case "":
	case seckill.ETRYLATER:
		return s.writeError(w, r, errRoomLoading)
	default:
		s.queueMetrics.refused.Inc()
		return s.writeError(w, r, seckill.Errorf(seckill.ERATELIMITED, "Your address holds %d places in this queue already.", s.queue.PerIP))
	}
	s.queueMetrics.joined.Inc()
	resp, err := s.standing(r.Context(), sale, userID, res.Position, now)
	if err != nil {
		return s.writeError(w, r, err)
	}
	return s.writeStanding(w, r, resp)
}

// knownPlaces is a Queuer that remembers final places (internal/repeats).
type knownPlaces interface {
	KnownPlace(saleID, userID string, now time.Time) (int64, bool)
}

// placeRememberer keeps a place a poll read, once final (internal/repeats).
type placeRememberer interface {
	RememberPlace(s *seckill.Sale, userID string, pos int64, now time.Time)
}

func (s *Server) knownPlace(saleID, userID string, now time.Time) (int64, bool) {
	if k, ok := s.queue.Queuer.(knownPlaces); ok {
		return k.KnownPlace(saleID, userID, now)
	}
	return 0, false
}

// handleMyQueue serves GET /api/v1/sales/{id}/queue/mine.
func (s *Server) handleMyQueue(w http.ResponseWriter, r *http.Request) int {
	userID, err := s.recordsBuyer(r)
	if err != nil {
		return s.writeError(w, r, err)
	}
	sale, status := s.admissionSale(w, r, seckill.AdmitQueue, "a queue")
	if sale == nil {
		return status
	}
	now := s.now()
	pos, ok := s.knownPlace(sale.ID, userID, now)
	if !ok {
		if pos, ok, err = s.queue.Positions.Position(r.Context(), sale.ID, userID); err != nil {
			return s.writeError(w, r, err)
		} else if !ok {
			return s.writeError(w, r, s.placeMissed(r.Context(), sale.ID, userID))
		}
		if k, ok := s.queue.Queuer.(placeRememberer); ok {
			k.RememberPlace(sale, userID, pos, now)
		}
	}
	resp, err := s.standing(r.Context(), sale, userID, pos, now)
	if err != nil {
		return s.writeError(w, r, err)
	}
	return s.writeStanding(w, r, resp)
}

// placeMissed answers a buyer whose place Redis does not hold: she has
// none, unless Redis lost the room or heals it and the database keeps her
// place (seckill.PlaceMissed): the heal puts it back, so she asks again.
func (s *Server) placeMissed(ctx context.Context, saleID, userID string) error {
	ready, kept := true, false
	if s.queue.Kept != nil {
		var err error
		if ready, err = saleReady(ctx, s.queue.Ready, saleID); err != nil {
			return err
		}
		if !ready {
			if kept, err = s.queue.Kept.HasPlace(ctx, saleID, userID); err != nil {
				return err
			}
		}
	}
	if seckill.PlaceMissed(ready, kept) == seckill.ETRYLATER {
		return errPlaceRestoring
	}
	return seckill.Errorf(seckill.ENOTFOUND, "You have no place in this queue: join it (POST /api/v1/sales/%s/queue).", saleID)
}

// standing is what a buyer at pos is told at now. Once the stock is gone
// everyone still waiting is told sold_out on their next poll: from the
// node's sold-out flag, or the live stock once the sale started.
func (s *Server) standing(ctx context.Context, sale *seckill.Sale, userID string, pos int64, now time.Time) (queueResponse, error) {
	pace := seckill.FixedQueuePace(sale)
	if s.queue.Pace != nil {
		var err error
		if pace, err = s.queue.Pace(ctx, sale); err != nil {
			return queueResponse{}, err
		}
	}
	st := pace.StandingAt(pos, now)
	resp := queueResponse{Position: st.Position, Ahead: st.Ahead, ETASeconds: st.ETASeconds, Admitted: st.Admitted}
	soldOut := s.soldOut != nil && s.soldOut(sale.ID, now) ||
		s.queue.SoldOut != nil && s.queue.SoldOut(sale.ID, now)
	if !soldOut && !now.Before(sale.StartAt) {
		soldOut = s.liveSoldOut(ctx, sale.ID)
	}
	if soldOut {
		resp.SoldOut, resp.Admitted, resp.Ahead, resp.ETASeconds = true, false, 0, 0
		return resp, nil
	}
	if st.Admitted {
		resp.Ticket, resp.TicketHeader = s.queue.Tickets.Issue(sale.ID, userID, now.Add(s.queue.TicketTTL)), ticketHeader
		s.queueMetrics.ticketsIssued.Inc()
	}
	return resp, nil
}

// writeStanding writes resp with 200: queueResponse's JSON, appended as
// the entry's answer is (writeEntered); a ticket that is not plain goes
// through encoding/json.
func (s *Server) writeStanding(w http.ResponseWriter, r *http.Request, resp queueResponse) int {
	if resp.Ticket != "" && !plainID(resp.Ticket) || resp.TicketHeader != "" && !plainID(resp.TicketHeader) {
		return s.writeJSON(w, r, http.StatusOK, resp)
	}
	body := make([]byte, 0, 160+len(resp.Ticket))
	body = append(body, `{"position":`...)
	body = strconv.AppendInt(body, resp.Position, 10)
	body = append(body, `,"ahead":`...)
	body = strconv.AppendInt(body, resp.Ahead, 10)
	body = append(body, `,"eta_seconds":`...)
	body = strconv.AppendInt(body, resp.ETASeconds, 10)
	body = append(body, `,"admitted":`...)
	body = strconv.AppendBool(body, resp.Admitted)
	body = append(body, `,"sold_out":`...)
	body = strconv.AppendBool(body, resp.SoldOut)
	if resp.Ticket != "" {
		body = append(body, `,"ticket":"`...)
		body = append(body, resp.Ticket...)
		body = append(body, '"')
	}
	if resp.TicketHeader != "" {
		body = append(body, `,"ticket_header":"`...)
		body = append(body, resp.TicketHeader...)
		body = append(body, '"')
	}
	body = append(body, "}\n"...)
	writeBody(w, http.StatusOK, body)
	return http.StatusOK
}

// liveStockTTL is how long the live stock's "sold out or not" of a queue
// sale is reused: a crowd polling its place costs the stock store a read a
// sale so often, not a read a poll (it was the join's one backend call).
const liveStockTTL = 100 * time.Millisecond

// liveSoldOut reports whether the stock store says the sale has no unit
// left, as read in the last liveStockTTL (on the wall clock: it bounds
// the load, whatever clock decides the sale) and since this node's last
// admitted claim. A failed read is "not".
func (s *Server) liveSoldOut(ctx context.Context, saleID string) bool {
	now := time.Now()
	if out, _, ok := s.liveStock.Get(saleID, now); ok {
		return out
	}
	lvl, err := s.stock.Stock(ctx, saleID)
	if err != nil {
		return false
	}
	out := lvl.Total > 0 && lvl.Remaining() == 0
	s.liveStock.Put(saleID, out, now.Add(liveStockTTL), now)
	return out
}

// admittedReserver returns the Reserver of a reservation request: the
// admitted one when it carries a valid ticket, checked with no backend
// call; nil (after answering) when it carries one that is not valid.
func (s *Server) admittedReserver(w http.ResponseWriter, r *http.Request, saleID, userID string, now time.Time) (seckill.Reserver, int) {
	vals := r.Header[ticketHeader]
	if len(vals) == 0 || s.queue.Tickets == nil {
		return s.reserver, 0
	}
	problem := ticket.BadSignature // two tickets: neither is taken
	if len(vals) == 1 {
		problem = s.queue.Tickets.Check(vals[0], saleID, userID, now)
	}
	if problem != "" {
		s.queueMetrics.ticketsRefused[problem].Inc()
		return nil, errTicket.write(w)
	}
	return s.queue.Admitted, 0
}

// admissionRefused counts a claim refused admission_required that carried
// no ticket, when its sale is a queue sale (a lottery's claims are refused
// too, but no ticket would have let them in).
func (s *Server) admissionRefused(ctx context.Context, r *http.Request, saleID string) {
	if s.queueMetrics == nil || len(r.Header[ticketHeader]) != 0 {
		return
	}
	if sale, err := s.cache.get(ctx, saleID); err == nil && sale.Admission.Of() == seckill.AdmitQueue {
		s.queueMetrics.ticketsRefused[ticket.Missing].Inc()
	}
}
