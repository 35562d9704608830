// Package apiclient is a small client of seckill's HTTP API for setting
// up and checking a sale (create, preheat, read back): the calls around a
// rush or a benchmark, not its hot path, which internal/loadgen drives;
// and the operator's calls of the admin API (Admin: list, show and end
// sales, reconcile one) that `seckill sales` and `seckill reconcile` make.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client makes the few calls of setting up and checking: not on the hot
// path, so plain net/http.
type Client struct {
	base string
	hc   *http.Client
	tr   *http.Transport
}

// New returns a Client of the node at base, e.g. http://127.0.0.1:8080.
func New(base string) *Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	return &Client{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, tr: tr}
}

// Close closes the idle connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// Do sends body as JSON with token as bearer (if any) and decodes a 2xx
// answer into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path, token string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	status, raw, err := send(ctx, c.hc, method, c.base+path, h, rd)
	if err != nil {
		return status, err
	}
	if out != nil && status/100 == 2 && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return status, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	if out != nil && status/100 != 2 {
		if m, ok := out.(*map[string]any); ok {
			_ = json.Unmarshal(raw, m)
		}
	}
	return status, nil
}

// send makes one request with header and reads the answer, at most
// 64 MiB of it (a large sale's reconciliation lists its discrepancies).
func send(ctx context.Context, hc *http.Client, method, url string, header http.Header, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header = header
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, raw, err
}

// ErrorCode is the code of an API error body ({"error":{"code":…}}), or
// "" for any other body.
func ErrorCode(body []byte) string {
	if !bytes.HasPrefix(body, []byte(`{"error"`)) {
		return ""
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}
