package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/webhooksig"
)

// Payment is confirmed by the shop's side only (seckill.DecidePayment):
//
//   - POST /webhooks/v1/payments, from the shop's payment provider, signed
//     with the webhook secret (Stripe's scheme, internal/webhooksig);
//   - POST /admin/v1/orders/{order_id}/payments, from the shop's server,
//     with the service token (not the admin token: a shop's server that
//     reports payments needs no power over sales).
//
// Both take the same body and are idempotent by event id. A buyer's own
// POST /api/v1/reservations/{id}/pay exists only when Config.BuyerPay is
// set (the demo).

var (
	errWebhookSignature = newStaticError(seckill.EUNAUTHORIZED, "The Seckill-Signature header is missing, malformed, too old or does not match.")
	errServiceAuth      = newStaticError(seckill.EUNAUTHORIZED, "The service token is required (Authorization: Bearer SERVICE_TOKEN).")
	errPaymentNoOrder   = seckill.Errorf(seckill.ENOTFOUND, "No order for this reservation (yet): it may still be on its way to the database; retry later.")
	errPaymentOrderID   = seckill.Errorf(seckill.EINVALID, "reservation_id must be the reservation of the order in the path (order id o-<reservation id>).")
)

// paymentStatus is the HTTP status answering a payment record: the
// provider retries anything but 2xx, so a mismatch (422) or a conflict
// (409) keeps showing on the shop's side until someone looks; each is
// recorded and alerted once.
func paymentStatus(o seckill.PaymentOutcome) int {
	switch o {
	case seckill.PaymentMismatch:
		return http.StatusUnprocessableEntity
	case seckill.PaymentConflict:
		return http.StatusConflict
	}
	return http.StatusOK
}

// handlePaymentWebhook serves POST /webhooks/v1/payments: the event is
// applied only if the Seckill-Signature header signs the raw body, within
// webhooksig.DefaultTolerance of now, under the webhook secret.
func (s *Server) handlePaymentWebhook(w http.ResponseWriter, r *http.Request) int {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return s.writeError(w, r, errBodyTooLarge)
		}
		return s.writeError(w, r, seckill.Errorf(seckill.EINVALID, "The request body could not be read."))
	}
	if err := webhooksig.Verify(r.Header.Get(webhooksig.Header), body, s.now(), webhooksig.DefaultTolerance, s.pay.secrets...); err != nil {
		s.pay.metrics.refused.Inc()
		return errWebhookSignature.write(w)
	}
	var e seckill.PaymentEvent
	if err := decodeProviderJSON(bytes.NewReader(body), &e); err != nil {
		return s.writeError(w, r, err)
	}
	return s.applyPayment(w, r, e, seckill.SourceWebhook)
}

// handleServicePayment serves POST /admin/v1/orders/{order_id}/payments
// for the shop's server, with the service token.
func (s *Server) handleServicePayment(w http.ResponseWriter, r *http.Request) int {
	if !s.isService(r) {
		return errServiceAuth.write(w)
	}
	var e seckill.PaymentEvent
	err := checkContentType(r)
	if err == nil {
		err = decodeProviderJSON(http.MaxBytesReader(w, r.Body, MaxBodyBytes), &e)
	}
	if err != nil {
		return s.writeError(w, r, err)
	}
	if r.PathValue("order_id") != seckill.OrderIDOf(e.ReservationID) {
		return s.writeError(w, r, errPaymentOrderID)
	}
	return s.applyPayment(w, r, e, seckill.SourceService)
}

// applyPayment stores e and answers what it did; an event that needs an
// operator is logged ALERT (once: a replay logs nothing).
func (s *Server) applyPayment(w http.ResponseWriter, r *http.Request, e seckill.PaymentEvent, source seckill.PaymentSource) int {
	if err := e.Validate(); err != nil {
		return s.writeError(w, r, err)
	}
	rec, err := s.pay.store.ApplyPayment(r.Context(), e, source, s.now())
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return s.writeError(w, r, errPaymentNoOrder)
	case err != nil:
		return s.writeError(w, r, fmt.Errorf("payment event %s: %w", e.ID, err))
	}
	s.pay.metrics.count(source, rec)
	if !rec.Replayed && rec.Outcome.Alerts() {
		s.logger.ErrorContext(r.Context(), "ALERT payment needs an operator: "+string(rec.Outcome),
			"event_id", rec.ID, "type", rec.Type, "source", rec.Source, "order_id", rec.OrderID, "sale_id", rec.SaleID,
			"amount_cents", rec.AmountCents, "currency", rec.Currency, "order_status", rec.FromStatus, "detail", rec.Detail)
	}
	return s.writeJSON(w, r, paymentStatus(rec.Outcome), rec)
}

// isService reports whether r carries the service token.
func (s *Server) isService(r *http.Request) bool { return s.pay.service.carriedBy(r) }

// PaymentStore applies and lists payment events (internal/sqlstore).
type PaymentStore interface {
	// ApplyPayment stores e and applies seckill.DecidePayment in one
	// transaction. A stored id is Replayed (other fields: EKEYREUSED); no
	// order: ErrNotFound.
	ApplyPayment(ctx context.Context, e seckill.PaymentEvent, source seckill.PaymentSource, now time.Time) (*seckill.PaymentRecord, error)
	Payments(ctx context.Context, f seckill.PaymentFilter) ([]*seckill.PaymentRecord, string, error)
}

// paySide is the Server's part of payments.
type paySide struct {
	store       PaymentStore
	secrets     [][]byte
	metrics     *paymentMetrics
	service     staticToken
	buyerPay    bool
	urlTemplate string
}

func newPaySide(cfg Config) (paySide, error) {
	p := paySide{store: cfg.Payments, buyerPay: cfg.BuyerPay, urlTemplate: cfg.PaymentURLTemplate}
	if err := CheckPaymentURLTemplate(p.urlTemplate); err != nil {
		return p, fmt.Errorf("httpapi: Config.PaymentURLTemplate: %w", err)
	}
	for _, secret := range cfg.PaymentWebhookSecrets {
		if secret != "" {
			p.secrets = append(p.secrets, []byte(secret))
		}
	}
	p.service = newStaticToken(cfg.ServiceToken)
	return p, nil
}

// CheckPaymentURLTemplate accepts "" or an absolute http(s) URL that
// names the order by {id} or {order_id}.
func CheckPaymentURLTemplate(t string) error {
	if t == "" {
		return nil
	}
	if !strings.Contains(t, "{id}") && !strings.Contains(t, "{order_id}") {
		return fmt.Errorf("%q names no order: put {id} (the reservation id) or {order_id} in it", t)
	}
	u, err := url.Parse(payURLFields("x", "o-x", "0").Replace(t))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", t)
	}
	return nil
}

func payURLFields(id, orderID, cents string) *strings.Replacer {
	return strings.NewReplacer("{id}", id, "{order_id}", orderID, "{amount_cents}", cents)
}

// payURL is the shop's payment page of o, if o may still be paid at now
// and the shop has one.
func (p paySide) payURL(o *seckill.Order, now time.Time) string {
	if p.urlTemplate == "" || o == nil || !o.CanPay(now) {
		return ""
	}
	return payURLFields(url.QueryEscape(o.ReservationID), url.QueryEscape(o.ID), strconv.FormatInt(o.AmountCents, 10)).Replace(p.urlTemplate)
}

var (
	errPaymentOutcome = seckill.Errorf(seckill.EINVALID, "outcome must be applied, noted, refund_due, mismatch or conflict; leave it out for those that need an operator.")
	errPaymentBefore  = seckill.Errorf(seckill.EINVALID, "before must be the next of a previous page; leave it out for the newest.")
)

// handlePayments serves GET /admin/v1/payments?outcome=&limit=&before=:
// the payment events an operator must see (refund_due, mismatch,
// conflict; or those of one outcome), newest first, limit (default 100,
// at most 1000) a page.
func (s *Server) handlePayments(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	limit, err := parseLimit(r.URL.RawQuery)
	if err != nil {
		return s.writeError(w, r, err)
	}
	q, _ := url.ParseQuery(r.URL.RawQuery) // parseLimit has checked it parses
	f := seckill.PaymentFilter{Limit: min(limit, seckill.MaxPaymentPage)}
	if vals, ok := q["outcome"]; ok {
		if len(vals) != 1 || !slices.Contains(seckill.PaymentOutcomes(), seckill.PaymentOutcome(vals[0])) {
			return s.writeError(w, r, errPaymentOutcome)
		}
		f.Outcome = seckill.PaymentOutcome(vals[0])
	}
	if vals, ok := q["before"]; ok {
		if len(vals) != 1 || vals[0] == "" {
			return s.writeError(w, r, errPaymentBefore)
		}
		f.Before = vals[0]
	}
	page, next, err := s.pay.store.Payments(r.Context(), f)
	if err != nil {
		return s.writeError(w, r, fmt.Errorf("payments: %w", err))
	}
	return s.writeJSON(w, r, http.StatusOK, paymentsResponse{Payments: page, Next: next})
}

type paymentsResponse struct {
	Payments []*seckill.PaymentRecord `json:"payments"`
	// Next is the before of the following page; omitted on the last.
	Next string `json:"next,omitempty"`
}

// paymentMetrics count payment events by door and outcome.
type paymentMetrics struct {
	events  *prometheus.CounterVec
	refused prometheus.Counter
}

func newPaymentMetrics(reg prometheus.Registerer) (*paymentMetrics, error) {
	m := &paymentMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payment_events_total",
			Help: "Payment events received, by source (webhook, service), outcome (applied, noted, refund_due, mismatch, conflict) and whether it was a replay of a stored event id. refund_due, mismatch and conflict each also logged ALERT.",
		}, []string{"source", "outcome", "replayed"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_payment_webhook_refused_total",
			Help: "Payment webhooks refused for a missing, malformed, stale or wrong signature (401).",
		}),
	}
	for _, c := range []prometheus.Collector{m.events, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register payment metrics: %w", err)
		}
	}
	for _, src := range []seckill.PaymentSource{seckill.SourceWebhook, seckill.SourceService} {
		for _, o := range seckill.PaymentOutcomes() {
			m.events.WithLabelValues(string(src), string(o), "false")
		}
	}
	return m, nil
}

func (m *paymentMetrics) count(source seckill.PaymentSource, rec *seckill.PaymentRecord) {
	replayed := "false"
	if rec.Replayed {
		replayed = "true"
	}
	m.events.WithLabelValues(string(source), string(rec.Outcome), replayed).Inc()
}
