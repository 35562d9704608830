package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/seckill-dev/seckill"
)

// The page of a lottery or a queue sale shows the signed-in buyer their
// own standing: in the draw or not, won or lost; their place in the
// waiting room, or their turn. The server renders it (no script needed)
// and the buyer feed (GET /sales/{id}/events) keeps it live; the page
// polls the API when the feed fails.
//
// Every read and every action goes through the JSON API in-process
// (Config.API) with the buyer's own token: the page answers by exactly the
// API's rules (windows, limits, rate limits, metrics), and can show only
// what the API shows that token.

// standing is one buyer's standing in a lottery or queue sale, as the page
// and the buyer feed show it.
type standing struct {
	Mode  seckill.AdmissionMode `json:"mode"`
	State string                `json:"state"`
	// Headline is what the live region announces; Detail is the line
	// under it, which changes too often to announce.
	Headline string `json:"headline"`
	Detail   string `json:"detail"`

	// Lottery.
	ResultsAt     time.Time `json:"results_at,omitzero"`
	EntryQty      int64     `json:"entry_qty,omitempty"`
	ReservationID string    `json:"reservation_id,omitempty"`
	PayBy         time.Time `json:"pay_by,omitzero"`
	OrderStatus   string    `json:"order_status,omitempty"`

	// Queue.
	Position   int64 `json:"position,omitempty"`
	Ahead      int64 `json:"ahead,omitempty"`
	ETASeconds int64 `json:"eta_seconds,omitempty"`
	// Ticket is the admission ticket of a buyer whose turn it is: sent in
	// the buyer feed's body only, never in a URL or the rendered page.
	Ticket       string `json:"ticket,omitempty"`
	TicketHeader string `json:"ticket_header,omitempty"`

	// OpensAt is when entries or the waiting room open (state not_open).
	OpensAt time.Time `json:"opens_at,omitzero"`

	// claimRead: a queue buyer's claims were read for this standing.
	claimRead bool
}

// The states of a standing.
const (
	stSignIn      = "sign_in"     // no session: sign in first
	stNotOpen     = "not_open"    // entries or the room not open yet
	stEnter       = "enter"       // lottery: entries open, not entered
	stEntered     = "entered"     // lottery: in the draw
	stWon         = "won"         // lottery: drawn, with a reservation
	stLost        = "lost"        // lottery: not drawn (yet: the waiting list)
	stClosed      = "closed"      // lottery: entries closed without an entry
	stJoin        = "join"        // queue: room open, no place
	stWaiting     = "waiting"     // queue: a place, not admitted
	stAdmitted    = "admitted"    // queue: their turn; Ticket set
	stSoldOut     = "sold_out"    // queue: the stock is gone
	stEnded       = "ended"       // the sale ended
	stUnavailable = "unavailable" // the standing could not be read now
)

// standingOf reads the buyer's standing in sale through the API. last is
// the standing a feed read before, nil for none.
func (h *Handler) standingOf(ctx context.Context, r *http.Request, sale *seckill.Sale, sess buyerSession, signedIn bool, last *standing) standing {
	st := standing{Mode: sale.Admission.Of()}
	now := h.now()
	switch {
	case !signedIn:
		st.State = stSignIn
	case st.Mode == seckill.AdmitLottery:
		h.lotteryStanding(ctx, r, sale, sess, now, &st)
	case st.Mode == seckill.AdmitQueue:
		h.queueStanding(ctx, r, sale, sess, now, last, &st)
	}
	if st.Mode == seckill.AdmitLottery {
		st.ResultsAt = sale.Admission.EntriesCloseAt
	}
	st.Headline, st.Detail = standingText(st, now)
	return st
}

// ownRecord reads the buyer's own record of an admission sale (path: the
// API's …/entries/mine or …/queue/mine) into v. When it returns false it
// has decided st: signed out, no record yet (none), or unavailable.
func (h *Handler) ownRecord(ctx context.Context, r *http.Request, path string, sess buyerSession, v any, none noRecord, st *standing) bool {
	a := h.callAPI(ctx, r, "GET", path, sess.token, nil)
	switch {
	case a.status == http.StatusUnauthorized:
		st.State = stSignIn
	case a.status == http.StatusNotFound && a.code() == seckill.ENOTFOUND:
		st.State, st.OpensAt = none.standing()
	case a.status != http.StatusOK || json.Unmarshal(a.body, v) != nil:
		st.State = stUnavailable
	default:
		return true
	}
	return false
}

// noRecord is what a buyer with no entry or place yet may do, from the
// sale's window: window is seckill.EntryWindow's or QueueWindow's answer.
type noRecord struct {
	window     error
	open, over string    // the states while the window is open, and after it
	opensAt    time.Time // when it opens, shown before that
}

// standing is the state and, before the window, when it opens.
func (n noRecord) standing() (string, time.Time) {
	switch seckill.ErrorCode(n.window) {
	case "":
		return n.open, time.Time{}
	case seckill.ENOTSTARTED:
		return stNotOpen, n.opensAt
	}
	return n.over, time.Time{}
}

func (h *Handler) lotteryStanding(ctx context.Context, r *http.Request, sale *seckill.Sale, sess buyerSession, now time.Time, st *standing) {
	var e struct {
		Status        seckill.EntryStatus `json:"status"`
		Qty           int64               `json:"qty"`
		ReservationID string              `json:"reservation_id"`
	}
	none := noRecord{window: seckill.EntryWindow(sale, now), open: stEnter, over: stClosed, opensAt: sale.StartAt}
	if !h.ownRecord(ctx, r, "/api/v1/sales/"+sale.ID+"/entries/mine", sess, &e, none, st) {
		return
	}
	st.EntryQty = e.Qty
	switch e.Status {
	case seckill.EntryEntered:
		st.State = stEntered
	case seckill.EntryLost:
		st.State = stLost
	case seckill.EntryWon:
		st.State, st.ReservationID = stWon, e.ReservationID
		// The order's deadline: what the winner must act on.
		if e.ReservationID != "" {
			if v, ok := h.reservation(ctx, r, sess, e.ReservationID); ok {
				st.OrderStatus, st.PayBy = v.Status, v.PayBy
			}
		}
	default:
		st.State = stUnavailable
	}
}

func (h *Handler) queueStanding(ctx context.Context, r *http.Request, sale *seckill.Sale, sess buyerSession, now time.Time, last *standing, st *standing) {
	var q struct {
		Position     int64  `json:"position"`
		Ahead        int64  `json:"ahead"`
		ETASeconds   int64  `json:"eta_seconds"`
		Admitted     bool   `json:"admitted"`
		SoldOut      bool   `json:"sold_out"`
		Ticket       string `json:"ticket"`
		TicketHeader string `json:"ticket_header"`
	}
	none := noRecord{window: seckill.QueueWindow(sale, now, h.queueOpensBefore), open: stJoin, over: stEnded, opensAt: sale.StartAt.Add(-h.queueOpensBefore)}
	if !h.ownRecord(ctx, r, "/api/v1/sales/"+sale.ID+"/queue/mine", sess, &q, none, st) {
		return
	}
	st.Position = q.Position
	switch {
	case q.SoldOut:
		st.State = stSoldOut
	case !now.Before(sale.EndAt):
		st.State = stEnded
	case q.Admitted:
		st.State, st.Ticket, st.TicketHeader = stAdmitted, q.Ticket, q.TicketHeader
	default:
		st.State, st.Ahead, st.ETASeconds = stWaiting, q.Ahead, q.ETASeconds
		return // no turn yet, so no claim
	}
	// A buyer whose turn came may have bought: the page shows that claim,
	// and offers no second purchase while it holds. Claims change only by
	// a purchase (on the buyer's turn) or as a held one's order moves on,
	// so a feed that read nothing held in a sold-out or ended room keeps
	// that read: a full room costs one read per buyer, not one per tick.
	if last != nil && last.claimRead && last.State != stAdmitted && st.State != stAdmitted && !last.holds() {
		st.ReservationID, st.OrderStatus, st.PayBy, st.claimRead = last.ReservationID, last.OrderStatus, last.PayBy, true
		return
	}
	// A buyer who holds a claim with an order follows that one reservation
	// (a lookup by its id) rather than the list of their claims (the stock
	// store's count and two range reads): who bought may keep the page open
	// until they pay, a read every tick, up to the payment deadline.
	if last != nil && last.claimRead && last.holds() && last.ReservationID != "" {
		if v, ok := h.reservation(ctx, r, sess, last.ReservationID); ok {
			st.ReservationID, st.OrderStatus, st.PayBy, st.claimRead = last.ReservationID, v.Status, v.PayBy, true
			if st.holds() {
				st.Ticket, st.TicketHeader = "", ""
			}
			return
		}
	}
	c, ok, err := h.myClaim(ctx, r, sale.ID, sess, now)
	st.claimRead = err == nil
	if ok {
		st.ReservationID, st.OrderStatus, st.PayBy = c.ReservationID, c.Status, c.PayBy
		if c.Holds() {
			st.Ticket, st.TicketHeader = "", ""
		}
	}
}

// holds reports whether the buyer holds a claim on the sale (a lottery's
// win, a queue buyer's purchase): the page offers them no purchase then.
func (st standing) holds() bool {
	return st.OrderStatus != "" && seckill.BuyerClaim{Status: st.OrderStatus}.Holds()
}

// clock formats a time as the page says it: hours and minutes, UTC (the
// server's clock; the page says so).
func clock(t time.Time) string { return t.UTC().Format("15:04") + " UTC" }

// standingText is what the page says of st at now: the headline, which the
// live region announces, so it changes only when something the buyer acts
// on changes (the state, their place, the minute of their wait), and the
// detail under it.
func standingText(st standing, now time.Time) (headline, detail string) {
	lottery := st.Mode == seckill.AdmitLottery
	if !lottery && st.holds() {
		// What the buyer bought comes before their turn or the stock.
		text, open := claimText(st.OrderStatus, st.PayBy, now)
		if open {
			return text, "Units not paid for by then go back on sale."
		}
		return text, ""
	}
	switch st.State {
	case stSignIn:
		if lottery {
			return "Sign in to enter the draw.", ""
		}
		return "Sign in to join the queue.", ""
	case stNotOpen:
		if lottery {
			return "The draw opens at " + clock(st.OpensAt) + ".", "Entries close at " + clock(st.ResultsAt) + "; entering early gives no better chance."
		}
		return "The queue opens at " + clock(st.OpensAt) + ".", "Everyone who joins before the start gets a random place: being first at the door gives nothing."
	case stEnter:
		return "Enter the draw.", "Entries close at " + clock(st.ResultsAt) + ". Everyone who enters has the same chance, however early."
	case stEntered:
		return "You're in the draw, results at " + clock(st.ResultsAt) + ".", "You entered for " + units(st.EntryQty) + ". Entering again changes nothing."
	case stWon:
		switch st.OrderStatus {
		case "ordered":
			if !st.PayBy.IsZero() && now.Before(st.PayBy) {
				return "You won, pay by " + clock(st.PayBy) + ".", "Units not paid for by then go to the next drawn entrant."
			}
			return "You won, but the time to pay has passed.", "The order is being cancelled."
		case "paid":
			return "You won, and your order is paid.", ""
		case "cancelled":
			return "You won, but the order was cancelled.", "It was not paid in time, or it was cancelled."
		}
		return "You won! Your order is being prepared.", "This page shows it, with the time to pay by, in a moment."
	case stLost:
		return "Not drawn this time.", "Units a winner does not pay for go to the next drawn entrants, in draw order: this page tells you if that is you."
	case stClosed:
		return "Entries are closed.", "The draw was at " + clock(st.ResultsAt) + "."
	case stJoin:
		return "Join the queue.", "Everyone who joins before the start gets a random place; later arrivals queue behind them."
	case stWaiting:
		return "Position " + grouped(st.Position) + " — " + eta(st.ETASeconds) + ".", grouped(st.Ahead) + " ahead of you. Keep this page open: your turn comes by itself."
	case stAdmitted:
		return "It's your turn.", "Buy now: your turn is kept while this page is open."
	case stSoldOut:
		return "Sold out.", "Every unit has been claimed."
	case stEnded:
		return "The sale has ended.", ""
	}
	return "Your standing cannot be read just now.", "The page tries again by itself."
}

// eta is a wait in words, to the minute: the live region announces it, so
// it changes once a minute at most.
func eta(seconds int64) string {
	switch {
	case seconds <= 0:
		return "any moment now"
	case seconds < 60:
		return "less than a minute"
	}
	m := (seconds + 59) / 60
	if m == 1 {
		return "about 1 min"
	}
	return "about " + strconv.FormatInt(m, 10) + " min"
}

func units(n int64) string {
	if n == 1 {
		return "1 unit"
	}
	return strconv.FormatInt(n, 10) + " units"
}

// grouped writes n with thousands separators: 1,234.
func grouped(n int64) string { return english.Sprint(n) }

// english groups digits as the page's English texts do.
var english = message.NewPrinter(language.English)

// notices are the messages a form's redirect may ask the page to show
// (?notice=), by the API's error code or the form's own outcome: a fixed
// table, so the query can name a message but never write one.
var notices = map[string]string{
	"entered":               "You're in the draw.",
	"joined":                "You have a place in the queue.",
	"reserved":              "Reserved.",
	"paid":                  "Paid. Thank you, your order is confirmed.",
	"not_your_turn":         "It is not your turn yet: keep this page open and check again when it says it's your turn.",
	"signed_in":             "Signed in.",
	"signed_out":            "Signed out.",
	"sign_in_failed":        "That sign-in did not work: check the token, or pick another name.",
	"form_expired":          "The page was out of date. Please try again.",
	seckill.ENOTSTARTED:     "Not open yet: try again at the time shown.",
	seckill.EENDED:          "Too late: this has closed.",
	seckill.ERATELIMITED:    "Too many tries in a short time. Please wait a little and try again.",
	seckill.EPURCHASELIMIT:  "That is more than the limit per buyer.",
	seckill.EUNAUTHORIZED:   "Your sign-in is not valid any more. Please sign in again.",
	seckill.EUNAVAILABLE:    "The shop is busy right now. Please try again in a few seconds.",
	seckill.EOVERLOADED:     "The shop is busy right now. Please try again in a few seconds.",
	seckill.EINVALID:        "That request was not understood. Please try again.",
	seckill.EADMISSION:      "This sale does not take that.",
	seckill.ESALENOTFOUND:   "This sale no longer exists.",
	seckill.EINTERNAL:       "Something went wrong on our side. Please try again.",
	seckill.ETRYLATER:       "The shop is busy right now. Please try again in a few seconds.",
	seckill.ESOLDOUT:        "Sold out.",
	seckill.ESTATECONFLICT:  "That is not possible any more.",
	seckill.EMETHODNOTALLOW: "That request was not understood. Please try again.",
	seckill.EKEYREUSED:      "Please try again.",
	seckill.ETOOLARGE:       "That request was not understood. Please try again.",
	seckill.ECONFLICT:       "That is not possible any more.",
	seckill.ENOTFOUND:       "Not found.",
	"":                      "",
}

// noticeOf is the message of a ?notice= code; "" for none or an unknown one.
func noticeOf(code string) string { return notices[code] }

// backTo answers a form with a redirect to the sale's page (post, redirect,
// get: a reload does not resend the form), with a notice code.
func backTo(w http.ResponseWriter, r *http.Request, saleID, notice string) {
	backToClaim(w, r, saleID, notice, "")
}

// backToClaim is backTo a page that shows the buyer's reservation claim
// (?reservation=: the API shows it to its buyer only).
func backToClaim(w http.ResponseWriter, r *http.Request, saleID, notice, claim string) {
	q := url.Values{}
	if notice != "" {
		q.Set("notice", notice)
	}
	if claim != "" {
		q.Set("reservation", claim)
	}
	target := "/sales/" + saleID
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// maxFormBytes caps the pages' form bodies (a token is the largest field).
const maxFormBytes = 8 << 10

// parseForm reads a POSTed urlencoded form of at most maxFormBytes.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	return r.ParseForm() == nil
}

// crossOrigin refuses a POST another site's page made the browser send.
func (h *Handler) crossOrigin(w http.ResponseWriter, r *http.Request) bool {
	if err := h.origins.Check(r); err != nil {
		writeError(w, seckill.Errorf(seckill.EUNAUTHORIZED, "Cross-origin requests are refused."))
		return true
	}
	return false
}

// handleSignIn serves POST /sales/{id}/session: a form with a shop token
// (token) or, in a demo, a name (name) starts a session and goes back to
// the page. The page's script posts the same form asking for JSON
// (Accept: application/json): it gets {user_id, form_token} instead of
// the redirect, and 401 for a token that does not verify.
func (h *Handler) handleSignIn(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		http.NotFound(w, r)
		return
	}
	if h.crossOrigin(w, r) {
		return
	}
	script := r.Header.Get("Accept") == "application/json"
	failed := func(code string) {
		if script {
			writeError(w, seckill.Errorf(seckill.EUNAUTHORIZED, "That token is not valid."))
			return
		}
		backTo(w, r, id, code)
	}
	if !parseForm(w, r) {
		failed("sign_in_failed")
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	if name := strings.TrimSpace(r.PostForm.Get("name")); tok == "" && name != "" && h.demoLogin != nil {
		if len(name) > maxDemoNameBytes || !seckill.ValidUserID(name) {
			failed("sign_in_failed")
			return
		}
		var err error
		if tok, err = h.demoLogin(name); err != nil {
			h.logger.ErrorContext(r.Context(), "demo login", "err", err)
			failed(seckill.EINTERNAL)
			return
		}
	}
	if tok == "" || len(tok) > maxSessionTokenBytes {
		failed("sign_in_failed")
		return
	}
	uid, err := h.verify(r, tok)
	if err != nil {
		failed("sign_in_failed")
		return
	}
	setSession(w, r, tok)
	if script {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]string{"user_id": uid, "form_token": formToken(buyerSession{token: tok, userID: uid}, id)})
		return
	}
	backTo(w, r, id, "signed_in")
}

// handleSignOut serves POST /sales/{id}/session/end.
func (h *Handler) handleSignOut(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		http.NotFound(w, r)
		return
	}
	if h.crossOrigin(w, r) {
		return
	}
	endSession(w, r)
	backTo(w, r, id, "signed_out")
}

// handleEnter serves POST /sales/{id}/enter (qty, form): the buyer's entry
// into the draw, through the API's POST …/entries.
func (h *Handler) handleEnter(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, func(ctx context.Context, sale *seckill.Sale, sess buyerSession) string {
		qty, ok := formQty(r)
		if !ok {
			return seckill.EINVALID
		}
		a := h.callAPI(ctx, r, "POST", "/api/v1/sales/"+sale.ID+"/entries", sess.token, map[string]int64{"qty": qty})
		if a.status == http.StatusOK || a.status == http.StatusCreated {
			return "entered"
		}
		return a.code()
	})
}

// handleJoin serves POST /sales/{id}/join (form): a place in the waiting
// room, through the API's POST …/queue.
func (h *Handler) handleJoin(w http.ResponseWriter, r *http.Request) {
	h.act(w, r, func(ctx context.Context, sale *seckill.Sale, sess buyerSession) string {
		a := h.callAPI(ctx, r, "POST", "/api/v1/sales/"+sale.ID+"/queue", sess.token, nil)
		if a.status == http.StatusOK {
			return "joined"
		}
		return a.code()
	})
}

// handleBuy serves POST /sales/{id}/buy (qty, key, form): the claim of a
// queue sale's buyer whose turn it is, without a script. The ticket comes
// from the buyer's place (the API's …/queue/mine) and goes in-process to
// the API's POST …/reservations: it never reaches the browser. key is the
// form's Idempotency-Key, so a resent form is the same claim.
func (h *Handler) handleBuy(w http.ResponseWriter, r *http.Request) {
	h.actTo(w, r, func(ctx context.Context, sale *seckill.Sale, sess buyerSession) (string, string) {
		if sale.Admission.Of() != seckill.AdmitQueue {
			return seckill.EADMISSION, ""
		}
		qty, ok := formQty(r)
		key := r.PostForm.Get("key")
		if !ok || !seckill.ValidIdempotencyKey(key) {
			return seckill.EINVALID, ""
		}
		q := h.callAPI(ctx, r, "GET", "/api/v1/sales/"+sale.ID+"/queue/mine", sess.token, nil)
		var place struct {
			Admitted     bool   `json:"admitted"`
			SoldOut      bool   `json:"sold_out"`
			Ticket       string `json:"ticket"`
			TicketHeader string `json:"ticket_header"`
		}
		switch {
		case q.status == http.StatusNotFound && q.code() == seckill.ENOTFOUND:
			return "not_your_turn", ""
		case q.status != http.StatusOK:
			return cmp.Or(q.code(), seckill.EUNAVAILABLE), ""
		case json.Unmarshal(q.body, &place) != nil:
			return seckill.EINTERNAL, ""
		case place.SoldOut:
			return seckill.ESOLDOUT, ""
		case !place.Admitted || place.Ticket == "" || place.TicketHeader == "":
			return "not_your_turn", ""
		}
		hdr := http.Header{}
		hdr.Set("Idempotency-Key", key)
		hdr.Set(place.TicketHeader, place.Ticket)
		a := h.callAPIWith(ctx, r, "POST", "/api/v1/sales/"+sale.ID+"/reservations", sess.token, map[string]int64{"qty": qty}, hdr)
		var v struct {
			ReservationID string `json:"reservation_id"`
		}
		if a.status == http.StatusAccepted && json.Unmarshal(a.body, &v) == nil && validClaimID(v.ReservationID) {
			return "reserved", v.ReservationID
		}
		return cmp.Or(a.code(), seckill.EINTERNAL), ""
	})
}

// handlePay serves POST /sales/{id}/pay (reservation, form): the buyer's
// own payment of an order where the engine takes it (--buyer-pay, the
// demo), through the API's POST /api/v1/reservations/{id}/pay.
func (h *Handler) handlePay(w http.ResponseWriter, r *http.Request) {
	h.actTo(w, r, func(ctx context.Context, sale *seckill.Sale, sess buyerSession) (string, string) {
		id := r.PostForm.Get("reservation")
		if !validClaimID(id) {
			return seckill.EINVALID, ""
		}
		a := h.callAPI(ctx, r, "POST", "/api/v1/reservations/"+url.PathEscape(id)+"/pay", sess.token, struct{}{})
		if a.status == http.StatusOK {
			return "paid", id
		}
		return cmp.Or(a.code(), seckill.EINTERNAL), id
	})
}

// formQty is a form's qty, 1 when absent.
func formQty(r *http.Request) (int64, bool) {
	v := r.PostForm.Get("qty")
	if v == "" {
		return 1, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 1
}

// maxClaimIDBytes bounds a reservation id taken from a form or a query.
const maxClaimIDBytes = 128

// validClaimID: a reservation id the page may name in its query and pass
// to the API, which checks it is the buyer's own.
func validClaimID(id string) bool {
	return id != "" && len(id) <= maxClaimIDBytes && seckill.ValidIdempotencyKey(id)
}

// act runs a buyer's form for the sale of the path: the same origin, a
// session, the session's form token; then do, whose notice code goes back
// to the page.
func (h *Handler) act(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, sale *seckill.Sale, sess buyerSession) string) {
	h.actTo(w, r, func(ctx context.Context, sale *seckill.Sale, sess buyerSession) (string, string) {
		return do(ctx, sale, sess), ""
	})
}

// actTo is act for a form whose page then shows a reservation: do returns
// the notice code and the reservation id ("" for none).
func (h *Handler) actTo(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, sale *seckill.Sale, sess buyerSession) (notice, claim string)) {
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		http.NotFound(w, r)
		return
	}
	if h.crossOrigin(w, r) {
		return
	}
	if !parseForm(w, r) {
		backTo(w, r, id, seckill.EINVALID)
		return
	}
	sess, ok := h.session(r)
	if !ok {
		endSession(w, r)
		backTo(w, r, id, seckill.EUNAUTHORIZED)
		return
	}
	if !validFormToken(sess, id, r.PostForm.Get("form_token")) {
		backTo(w, r, id, "form_expired")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.budget)
	defer cancel()
	sale, err := h.sales.Sale(ctx, id)
	if errors.Is(err, seckill.ErrNotFound) {
		backTo(w, r, id, seckill.ESALENOTFOUND)
		return
	} else if err != nil {
		backTo(w, r, id, seckill.EUNAVAILABLE)
		return
	}
	notice, claim := do(ctx, sale, sess)
	backToClaim(w, r, id, notice, claim)
}

// admissionSaleOf reads the sale of a buyer route, answering for it when
// there is none or it is first come; nil then.
func (h *Handler) admissionSaleOf(w http.ResponseWriter, r *http.Request) *seckill.Sale {
	ctx, cancel := context.WithTimeout(r.Context(), h.budget)
	defer cancel()
	sale, err := h.sales.Sale(ctx, r.PathValue("id"))
	if errors.Is(err, seckill.ErrNotFound) {
		writeError(w, seckill.Errorf(seckill.ESALENOTFOUND, "No such sale."))
		return nil
	} else if err != nil {
		h.degraded(r.Pattern, "unavailable")
		writeError(w, seckill.Errorf(seckill.EUNAVAILABLE, "The sale cannot be read; retry shortly."))
		return nil
	}
	if sale.Admission.FirstCome() {
		writeError(w, seckill.Errorf(seckill.EADMISSION, "This sale is first come: it has no standing to follow."))
		return nil
	}
	return sale
}

var errNoSession = seckill.Errorf(seckill.EUNAUTHORIZED, "Sign in on the sale's page first.")

// handleStanding serves GET /sales/{id}/standing: the signed-in buyer's
// standing once, as JSON (what the page polls when the feed fails).
func (h *Handler) handleStanding(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.session(r)
	if !ok {
		writeError(w, errNoSession)
		return
	}
	sale := h.admissionSaleOf(w, r)
	if sale == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.budget)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, h.standingOf(ctx, r, sale, sess, true, nil))
}

// handleBuyerEvents serves GET /sales/{id}/events: the signed-in buyer's
// standing in a lottery or queue sale, as server-sent events
//
//	event: standing   the standing (a JSON standing), at once and on every change
//
// read every BuyerEventInterval through the API, as the page's polling
// would. It shares the control room's stream writer and shutdown.
func (h *Handler) handleBuyerEvents(w http.ResponseWriter, r *http.Request) {
	sess, ok := h.session(r)
	if !ok {
		writeError(w, errNoSession)
		return
	}
	sale := h.admissionSaleOf(w, r)
	if sale == nil {
		return
	}
	if !h.feeds.open(sess.userID) {
		writeError(w, errTooManyFeeds)
		return
	}
	defer h.feeds.close(sess.userID)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no")
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, rc: http.NewResponseController(w), interval: h.buyerInterval}
	if err := st.rc.SetReadDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return
	}
	var (
		last   []byte
		lastSt *standing
	)
	prefix := "retry: 2000\n"
	tick := time.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.closed:
			return
		case <-tick.C:
			tick.Reset(h.buyerInterval)
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.budget)
		s := h.standingOf(ctx, r, sale, sess, true, lastSt)
		cancel()
		lastSt = &s
		b, err := json.Marshal(s)
		if err != nil {
			return
		}
		if string(b) == string(last) {
			if err := st.comment("keep-alive"); err != nil {
				return
			}
			continue
		}
		last = b
		if err := st.write(prefix + "event: standing\ndata: " + string(b) + "\n\n"); err != nil {
			return
		}
		prefix = ""
		if s.State == stSignIn {
			return // the token expired: the page signs in again
		}
	}
}
