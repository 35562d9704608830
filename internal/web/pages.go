package web

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/httpapi"
)

//go:embed static
var staticFS embed.FS

//go:embed templates
var templateFS embed.FS

// contentTypes are the only kinds of file the static folder may hold: the
// table is ours, not the host's MIME database, so a type never depends on
// the machine the binary runs on.
var contentTypes = map[string]string{
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".html": "text/html; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".txt":  "text/plain; charset=utf-8",
}

// asset is one embedded file, ready to serve.
type asset struct {
	name  string
	body  []byte
	ctype string
	etag  string
}

func loadAssets(static fs.FS) (map[string]*asset, error) {
	assets := map[string]*asset{}
	err := fs.WalkDir(static, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("web: static/%s: no content type for %q", p, path.Ext(p))
		}
		body, err := fs.ReadFile(static, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		assets[p] = &asset{name: p, body: body, ctype: ctype, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	return assets, err
}

// contentSecurityPolicy allows the pages nothing but their own origin: no
// inline script, no third-party host, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func setPageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// A buyer arrives with #token=…, which no request carries; a
	// mistaken ?token=… must not reach another site either.
	h.Set("Referrer-Policy", "no-referrer")
}

// renderPage writes the template name with data. Pages carry live numbers
// (stock), so they are never cached.
func (h *Handler) renderPage(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.logger.ErrorContext(r.Context(), "render page", "page", name, "err", err)
		http.Error(w, "Internal error.", http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	setPageHeaders(hdr)
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type indexData struct{ DemoLogin bool }

func (h *Handler) handleIndex(w http.ResponseWriter, r *http.Request) {
	h.renderPage(w, r, http.StatusOK, "index.html", indexData{DemoLogin: h.demoLogin != nil})
}

// buyerData is what the buyer page is rendered with. The page shows it at
// once and then keeps it live from the API.
type buyerData struct {
	SaleID        string
	Name          string
	Price         string // plain decimal; the page reformats it in Currency
	PriceCents    int64
	Stock         int64
	Remaining     int64
	PurchaseLimit int64
	StartAt       string // RFC 3339, UTC
	EndAt         string
	State         seckill.SaleState
	QtyOptions    []int64 // 1 to the per-buyer limit, at most maxQtyChoice
	DemoLogin     bool
	BuyerPay      bool
	ShopSignIn    string
	Currency      string

	// Admission of the sale; the rest is set for lottery and queue sales.
	Mode      seckill.AdmissionMode
	ResultsAt string // RFC 3339, UTC: a lottery's entries_close_at
	ModeNote  string
	// Sessions says the page can sign a buyer in without a script.
	Sessions bool
	// Buyer is the signed-in buyer of the session, "" for none.
	Buyer     string
	FormToken string
	Standing  standing
	// Notice is the message a form's redirect asked for.
	Notice string
	// BuyKey is the Idempotency-Key of the no-script buy form: one per
	// rendering, so a resent form is the same claim. Set only when the
	// page offers to buy: the buyer's turn, and no claim held.
	BuyKey string
	// Claim is the buyer's reservation as the page shows it without a
	// script (the script shows its own).
	Claim claimView
}

// maxQtyChoice caps the quantity menu; a limit above it still applies.
const maxQtyChoice = 10

type notFoundData struct{ SaleID string }

// busyRetrySeconds is how often the busy page reloads itself.
const busyRetrySeconds = 5

type busyData struct{ RetrySeconds int }

func (h *Handler) handleBuyerPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !seckill.ValidSaleID(id) {
		h.renderPage(w, r, http.StatusNotFound, "notfound.html", notFoundData{})
		return
	}
	// Every backend call of the page ends with its budget, so a database
	// or Redis that is down costs the buyer seconds, not minutes.
	ctx, cancel := context.WithTimeout(r.Context(), h.budget)
	defer cancel()
	sale, err := h.sales.Sale(ctx, id)
	if errors.Is(err, seckill.ErrNotFound) {
		h.renderPage(w, r, http.StatusNotFound, "notfound.html", notFoundData{SaleID: id})
		return
	} else if err != nil {
		if r.Context().Err() != nil {
			return // the buyer left
		}
		if seckill.ErrorCode(err) != seckill.EOVERLOADED { // a flood of made-up ids is not logged line by line
			h.logger.WarnContext(r.Context(), "buyer page: sale", "sale", id, "err", err)
		}
		// A friendly page that retries by itself, with what a client
		// needs to retry too.
		w.Header().Set("Retry-After", strconv.Itoa(busyRetrySeconds))
		h.degraded(r.Pattern, "unavailable")
		h.renderPage(w, r, http.StatusServiceUnavailable, "busy.html", busyData{RetrySeconds: busyRetrySeconds})
		return
	}
	// Never above the database's unsold units, whatever Redis says.
	remaining := seckill.RemainingOf(sale, seckill.StockLevel{}, false)
	if lvl, err := h.stock.Stock(ctx, id); err == nil {
		remaining = seckill.RemainingOf(sale, lvl, true)
	} else if !errors.Is(err, seckill.ErrNotFound) {
		// The page polls the API for stock anyway: render what is known.
		h.logger.WarnContext(r.Context(), "buyer page: stock", "sale", id, "err", err)
	}
	qty := make([]int64, min(sale.PurchaseLimit, maxQtyChoice))
	for i := range qty {
		qty[i] = int64(i + 1)
	}
	data := buyerData{
		SaleID:        sale.ID,
		Name:          sale.Name,
		Price:         fmt.Sprintf("%d.%02d", sale.PriceCents/100, sale.PriceCents%100),
		PriceCents:    sale.PriceCents,
		Stock:         sale.Stock,
		Remaining:     remaining,
		PurchaseLimit: sale.PurchaseLimit,
		StartAt:       sale.StartAt.UTC().Format(time.RFC3339Nano),
		EndAt:         sale.EndAt.UTC().Format(time.RFC3339Nano),
		State:         sale.State(h.now(), remaining),
		QtyOptions:    qty,
		DemoLogin:     h.demoLogin != nil,
		BuyerPay:      h.buyerPay,
		ShopSignIn:    h.signIn,
		Currency:      cmp.Or(sale.Currency, h.currency),
		Mode:          sale.Admission.Of(),
		Sessions:      h.api != nil,
		Notice:        noticeOf(r.URL.Query().Get("notice")),
	}
	if !sale.Admission.FirstCome() {
		data.ModeNote = modeNote(sale, h.queueOpensBefore)
		if sale.Admission.Of() == seckill.AdmitLottery {
			data.ResultsAt = sale.Admission.EntriesCloseAt.UTC().Format(time.RFC3339Nano)
		}
		sess, ok := h.session(r)
		if ok {
			data.Buyer, data.FormToken = sess.userID, formToken(sess, sale.ID)
		}
		data.Standing = h.standingOf(ctx, r, sale, sess, ok, nil)
		// The ticket is the script's, from the buyer feed: never in the
		// page's HTML.
		data.Standing.Ticket = ""
		if ok {
			if data.Standing.State == stAdmitted && !data.Standing.holds() {
				data.BuyKey = newFormKey()
			}
			claim := r.URL.Query().Get("reservation")
			if !validClaimID(claim) {
				claim = data.Standing.ReservationID // a lottery's win
			}
			if claim != "" {
				data.Claim = h.claimOf(ctx, r, sess, claim)
			}
		}
	}
	h.renderPage(w, r, http.StatusOK, "buyer.html", data)
}

// modeNote says in a sentence how a lottery or queue sale is allotted.
func modeNote(sale *seckill.Sale, opensBefore time.Duration) string {
	switch sale.Admission.Of() {
	case seckill.AdmitLottery:
		return "A draw: everyone who enters by " + clock(sale.Admission.EntriesCloseAt) +
			" has the same chance, and the winners are drawn then."
	case seckill.AdmitQueue:
		pace := grouped(sale.Admission.AdmitPerSecond) + " a second"
		if b, ok := sale.Admission.Bounds(); ok {
			pace = "at the pace the shop can serve (" + grouped(b.Min) + " to " + grouped(b.Max) + " a second)"
		}
		return "A waiting room, open from " + clock(sale.StartAt.Add(-opensBefore)) +
			": everyone who joins before the start gets a random place, and buyers take their turn " +
			pace + " from " + clock(sale.StartAt) + "."
	}
	return ""
}

// handleOpenSale serves the landing page's "open a sale" form, which
// needs no script: GET /sales?id=X redirects to /sales/X.
func (h *Handler) handleOpenSale(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	if !seckill.ValidSaleID(id) {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/sales/"+id, http.StatusSeeOther)
}

type adminData struct{ Currency string }

func (h *Handler) handleAdminPage(w http.ResponseWriter, r *http.Request) {
	h.renderPage(w, r, http.StatusOK, "admin.html", adminData{Currency: h.currency})
}

func redirectTo(target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusMovedPermanently)
	}
}

// handleStatic serves the embedded assets. They change only with the
// binary, so browsers revalidate by ETag rather than refetch.
func (h *Handler) handleStatic(w http.ResponseWriter, r *http.Request) {
	a, ok := h.assets[strings.TrimPrefix(r.URL.Path, "/static/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("ETag", a.etag)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}

type timeResponse struct {
	Now    time.Time `json:"now"`
	UnixMS int64     `json:"unix_ms"`
}

// handleTime serves GET /api/v1/time: the pages count down by the server's
// clock, never the device's, which may be minutes off.
func (h *Handler) handleTime(w http.ResponseWriter, r *http.Request) {
	now := h.now()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, timeResponse{Now: now.UTC(), UnixMS: now.UnixMilli()})
}

// maxSmallBody caps the bodies of this package's POST routes.
const maxSmallBody = 1 << 10

type ticketRequest struct {
	SaleID string `json:"sale_id"`
}

type ticketResponse struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
	EventsURL string    `json:"events_url"`
}

// handleTicket serves POST /admin/v1/sse-ticket {sale_id}: a ticket for
// that sale's live feed, for a caller holding the admin token.
func (h *Handler) handleTicket(w http.ResponseWriter, r *http.Request) {
	if !h.isAdmin(r) {
		writeError(w, errAdminAuth)
		return
	}
	var req ticketRequest
	if err := decodeSmallJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if !seckill.ValidSaleID(req.SaleID) {
		writeError(w, seckill.Errorf(seckill.EINVALID, "sale_id must be a valid sale id."))
		return
	}
	ticket, exp := h.tickets.sign(req.SaleID, h.now())
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ticketResponse{
		Ticket:    ticket,
		ExpiresAt: exp.UTC(),
		EventsURL: "/admin/v1/sales/" + req.SaleID + "/events?ticket=" + ticket,
	})
}

// isAdmin reports whether the request carries the admin token as a
// bearer token, comparing digests in constant time.
func (h *Handler) isAdmin(r *http.Request) bool {
	if h.tickets == nil {
		return false
	}
	auth := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimLeft(auth[len(prefix):], " ")))
	want := h.tickets.tokenHash
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

type loginRequest struct {
	Name string `json:"name"`
}

type loginResponse struct {
	Token  string `json:"token"`
	UserID string `json:"user_id"`
}

// maxDemoNameBytes keeps demo names short enough to show anywhere.
const maxDemoNameBytes = 64

// handleDemoLogin serves POST /demo/v1/login {name} → {token}. It exists
// only when Config.DemoLogin is set: anyone may become anyone here.
func (h *Handler) handleDemoLogin(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := decodeSmallJSON(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	name := strings.TrimSpace(req.Name)
	if len(name) > maxDemoNameBytes || !utf8.ValidString(name) || !seckill.ValidUserID(name) {
		writeError(w, seckill.Errorf(seckill.EINVALID, "name must be 1-%d printable characters.", maxDemoNameBytes))
		return
	}
	tok, err := h.demoLogin(name)
	if err != nil {
		h.logger.ErrorContext(r.Context(), "demo login", "err", err)
		writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, loginResponse{Token: tok, UserID: name})
}

// decodeSmallJSON decodes exactly one JSON object of at most maxSmallBody
// bytes into v, strictly (unknown fields are errors), as the API does.
func decodeSmallJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return seckill.Errorf(seckill.EINVALID, "Content-Type must be application/json.")
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSmallBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Only whitespace may follow; reading on also finds a body that
		// is over the limit after a complete value.
		if _, err = dec.Token(); err == io.EOF {
			return nil
		} else if err == nil {
			err = errTrailing
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return seckill.Errorf(seckill.ETOOLARGE, "The request body must be at most %d bytes.", maxSmallBody)
	case errors.Is(err, io.EOF):
		return seckill.Errorf(seckill.EINVALID, "A JSON request body is required.")
	}
	return seckill.Errorf(seckill.EINVALID, "The request body must be one JSON object with the documented fields.")
}

var errTrailing = errors.New("data after the JSON value")

var errAdminAuth = seckill.Errorf(seckill.EUNAUTHORIZED, "The admin token is required (Authorization: Bearer ADMIN_TOKEN).")

// writeError answers err in the API's error shape, with the status
// httpapi's one table maps its code to.
func writeError(w http.ResponseWriter, err error) { httpapi.WriteError(w, err) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, status = []byte(`{"error":{"code":"internal","message":"Internal error."}}`), http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
