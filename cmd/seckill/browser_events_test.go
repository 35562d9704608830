package main

// Browser test of the control room's order events: a dead letter shown
// with its lag and attempts, redelivered from the room.

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestBrowserOrderEventRedelivered: the shop refuses every delivery, so
// the order's order.created is dead-lettered within its short retry
// window; the control room shows it (dead letters 1, its attempts and
// error) and its Redeliver button, once the shop is fixed, gets it
// delivered: the shop has the event and the room shows no dead letter.
func TestBrowserOrderEventRedelivered(t *testing.T) {
	requireChromium(t)
	s := startShop(t)
	var broken atomic.Bool
	broken.Store(true)
	s.answer = func(int) int {
		if broken.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	e := &webEngine{engine: startEngine(t, func(c *Config) {
		c.DemoLogin = "on"
		c.Events.WebhookURL, c.Events.WebhookSecret = s.url(), shopSecret
		c.Events.Backoff, c.Events.MaxBackoff, c.Events.RetryFor = 20*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond
	})}
	e.url = e.base
	sale := e.newSale("Event tea", "EUR", 3, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	r := e.reserve(sale, e.token("shopper"), 1, "")
	if r.status != http.StatusAccepted {
		t.Fatalf("reserve: %d %v", r.status, r.body)
	}
	resID, _ := r.body["reservation_id"].(string)
	eventID := seckill.OrderEventID(seckill.EventOrderCreated, resID)
	servicetest.WaitFor(t, 30*time.Second, "the dead letter", func() bool {
		return e.admin("GET", "/admin/v1/order-events?state=dead", nil).body["dead"] == float64(1)
	})

	browser := startChromium(t)
	op := openTab(t, browser, "operator")
	op.signInAdmin(e, "/admin", "ops-erin")
	op.waitFor("the dead letter in the room", `!document.getElementById("events-card").hidden &&
		document.getElementById("ev-dead").textContent === "1" &&
		document.querySelector('#events-list li[data-event-id="`+eventID+`"] button.redeliver') !== null`, 30*time.Second)
	if got := op.text("events-list"); !containsAll(got, "order.created", "dead", "attempt", "503") {
		t.Errorf("the dead letter reads %q: want its type, state, attempts and error", got)
	}
	op.shot("order-events-dead")

	broken.Store(false)
	// Clicked from the page itself: the list may be redrawn between a
	// lookup from here and the click.
	if !evalJS[bool](op, `(function(){ const b = document.querySelector('#events-list li[data-event-id="`+eventID+`"] button.redeliver'); if (b) b.click(); return !!b })()`) {
		t.Fatal("no Redeliver button to click")
	}
	op.waitFor("no dead letter left", `document.getElementById("ev-dead").textContent === "0" &&
		document.querySelectorAll("#events-list li").length === 0`, 30*time.Second)
	servicetest.WaitFor(t, 30*time.Second, "the shop to have the event", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.accepted[eventID] == 1
	})
	if got := op.text("events-msg"); !containsAll(got, "Redelivering", eventID) {
		t.Errorf("after the click the room says %q", got)
	}
	op.noErrors()
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
