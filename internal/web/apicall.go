package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// apiAnswer is one in-process answer of the JSON API.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

// code is the API's error code of the answer, or "".
func (a apiAnswer) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

// callAPI makes one request of the JSON API (Config.API) in-process, as the
// buyer of token, on behalf of the browser request r: its client address
// and forwarding headers go along, so the API's per-address limits count
// the buyer, not this server. body, if not nil, is sent as JSON.
func (h *Handler) callAPI(ctx context.Context, r *http.Request, method, path, token string, body any) apiAnswer {
	return h.callAPIWith(ctx, r, method, path, token, body, nil)
}

// callAPIWith is callAPI with extra request headers (an Idempotency-Key,
// an admission ticket): they stay in this process, never in the browser.
func (h *Handler) callAPIWith(ctx context.Context, r *http.Request, method, path, token string, body any, extra http.Header) apiAnswer {
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return apiAnswer{status: http.StatusInternalServerError}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return apiAnswer{status: http.StatusInternalServerError}
	}
	req.RemoteAddr = r.RemoteAddr
	req.Host = r.Host
	for _, k := range []string{"X-Forwarded-For", "X-Real-Ip", "Forwarded"} {
		if v := r.Header.Values(k); len(v) > 0 {
			req.Header[k] = v
		}
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := &recorder{header: http.Header{}}
	h.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return apiAnswer{status: rec.status, header: rec.header, body: rec.body.Bytes()}
}

// recorder is the ResponseWriter of an in-process API call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
