package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

// claimView is a buyer's reservation as a page without a script shows it:
// a line, and how to pay while the order waits for payment.
type claimView struct {
	ID   string
	Text string
	// PayHere: the engine takes the payment (--buyer-pay): a form posts it.
	PayHere bool
	// PayURL is the shop's payment page, linked when PayHere is not set.
	PayURL string
}

// claimOf reads reservation id through the API as the session's buyer
// (the API answers its own buyer only); a zero view when it cannot.
func (h *Handler) claimOf(ctx context.Context, r *http.Request, sess buyerSession, id string) claimView {
	v, ok := h.reservation(ctx, r, sess, id)
	if !ok {
		return claimView{}
	}
	text, open := claimText(v.Status, v.PayBy, h.now())
	c := claimView{ID: id, Text: text}
	if open {
		c.PayHere = h.buyerPay
		if !h.buyerPay && (strings.HasPrefix(v.PayURL, "https://") || strings.HasPrefix(v.PayURL, "http://")) {
			c.PayURL = v.PayURL
		}
	}
	return c
}

// reservationRead is what the pages take of GET /api/v1/reservations/{id}.
type reservationRead struct {
	Status string    `json:"status"`
	PayBy  time.Time `json:"pay_by"`
	PayURL string    `json:"pay_url"`
}

// reservation reads reservation id through the API as the session's
// buyer (its own buyer's only); ok is false when it cannot.
func (h *Handler) reservation(ctx context.Context, r *http.Request, sess buyerSession, id string) (v reservationRead, ok bool) {
	a := h.callAPI(ctx, r, "GET", "/api/v1/reservations/"+url.PathEscape(id), sess.token, nil)
	if a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil {
		return reservationRead{}, false
	}
	return v, true
}

// myClaim reads the buyer's claims on the sale through the API (GET
// …/reservations/mine: the token's own only) and picks the one the page
// shows; ok is false when there is none, err not nil when they cannot be
// read now.
func (h *Handler) myClaim(ctx context.Context, r *http.Request, saleID string, sess buyerSession, now time.Time) (_ seckill.BuyerClaim, ok bool, err error) {
	a := h.callAPI(ctx, r, "GET", "/api/v1/sales/"+saleID+"/reservations/mine", sess.token, nil)
	var v struct {
		Reservations []struct {
			ReservationID string    `json:"reservation_id"`
			Status        string    `json:"status"`
			PayBy         time.Time `json:"pay_by"`
		} `json:"reservations"`
		PendingUnits int64 `json:"pending_units"`
	}
	if a.status != http.StatusOK {
		return seckill.BuyerClaim{}, false, errClaimsUnread
	} else if err := json.Unmarshal(a.body, &v); err != nil {
		return seckill.BuyerClaim{}, false, err
	}
	claims := make([]seckill.BuyerClaim, 0, len(v.Reservations))
	for _, c := range v.Reservations {
		if validClaimID(c.ReservationID) {
			claims = append(claims, seckill.BuyerClaim{ReservationID: c.ReservationID, Status: c.Status, PayBy: c.PayBy})
		}
	}
	c, ok := seckill.ShownClaim(claims, v.PendingUnits, now)
	return c, ok, nil
}

var errClaimsUnread = errors.New("the buyer's claims cannot be read now")

// claimText is what the page says of a reservation in status, with its
// time to pay by, at now; open says it waits for payment.
func claimText(status string, payBy, now time.Time) (text string, open bool) {
	switch status {
	case "pending":
		return "Reserved — your order is being prepared. Check again in a moment.", false
	case "ordered":
		if !payBy.IsZero() && now.Before(payBy) {
			return "Reserved — pay by " + clock(payBy) + ".", true
		}
		return "Reserved, but the time to pay has passed: the order is being cancelled.", false
	case "paid":
		return "Paid. Your order is confirmed.", false
	case "cancelled":
		return "This order was cancelled: it was not paid in time, or it was cancelled.", false
	case "refund_due":
		return "Your payment arrived after the order was cancelled, so the shop will refund it.", false
	case "refunded":
		return "Your payment arrived after the order was cancelled and has been refunded.", false
	case "failed":
		return "We could not finish this order automatically; our team will complete it or refund you.", false
	}
	return "", false
}

// newFormKey is a fresh Idempotency-Key for one rendering of a form.
func newFormKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}
