// Package apiclient is a small client of seckill's HTTP API for setting
// up and checking a sale (create, preheat, read back): the calls around a
// rush or a benchmark, not its hot path, which internal/loadgen drives.
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
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	if out != nil && resp.StatusCode/100 != 2 {
		if m, ok := out.(*map[string]any); ok {
			_ = json.Unmarshal(raw, m)
		}
	}
	return resp.StatusCode, nil
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
