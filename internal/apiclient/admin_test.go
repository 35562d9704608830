package apiclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAdmin: Sales follows every page with the token and operator sent;
// an answer other than 200 is an *Error with the API's code.
func TestAdmin(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Seckill-Operator") != "erin" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path != "/admin/v1/sales":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such sale"}}`))
		case r.URL.Query().Get("after") == "":
			_, _ = w.Write([]byte(`{"sales":[{"id":"a"}],"next":"a"}`))
		default:
			_, _ = w.Write([]byte(`{"sales":[{"id":"b"}]}`))
		}
	}))
	defer srv.Close()
	a := NewAdmin(AdminConfig{URL: srv.URL + "/", Token: "tok", Operator: "erin"})
	sales, err := a.Sales(context.Background(), "", 1)
	if err != nil || len(sales) != 2 || sales[0]["id"] != "a" || sales[1]["id"] != "b" {
		t.Fatalf("Sales = %v, %v; want a and b from two pages", sales, err)
	}
	_, err = a.Sale(context.Background(), "nosuch")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != "not_found" || !IsAnswer(err) {
		t.Fatalf("Sale(nosuch) = %v; want a 404 not_found *Error", err)
	}
	if _, err := NewAdmin(AdminConfig{URL: srv.URL, Token: "wrong"}).Sale(context.Background(), "x"); !IsAnswer(err) {
		t.Fatalf("wrong token: %v; want the server's 401 as an *Error", err)
	}
}
