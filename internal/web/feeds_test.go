package web

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/seckill-dev/seckill/internal/servicetest"
)

// TestBuyerFeedsCapped: one buyer may hold MaxBuyerFeeds live feeds open
// on a node; the next is refused 429 (the page then polls), another buyer
// is not touched, and a closed feed gives its place back.
func TestBuyerFeedsCapped(t *testing.T) {
	api := newFakeAPI()
	f := newAdmissionFixture(t, api)
	api.places["ann"], api.places["bob"] = 1, 2
	open := func(user string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/sales/q/events", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: "tok-" + user})
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp, cancel
	}
	var closeFirst context.CancelFunc
	for i := range MaxBuyerFeeds {
		resp, cancel := open("ann")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("ann's feed %d: %d; want 200", i+1, resp.StatusCode)
		}
		if i == 0 {
			closeFirst = cancel
		}
	}
	resp, _ := open("ann")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("ann's feed %d: %d; want 429", MaxBuyerFeeds+1, resp.StatusCode)
	}
	if resp, _ := open("bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's first feed: %d; want 200", resp.StatusCode)
	}
	if a := f.do(t, "GET", "/sales/q/standing", "", "", "Cookie", sessionCookie+"=tok-ann"); a.status != http.StatusOK {
		t.Fatalf("ann's poll of her standing while her feeds are full: %d; want 200", a.status)
	}
	closeFirst()
	servicetest.WaitFor(t, 10*time.Second, "ann's closed feed to give its place back", func() bool {
		resp, cancel := open("ann")
		defer cancel()
		return resp.StatusCode == http.StatusOK
	})
}
