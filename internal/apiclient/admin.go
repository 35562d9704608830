package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/seckill-dev/seckill/internal/reconcile"
)

// AdminConfig says which node an Admin calls and as whom.
type AdminConfig struct {
	URL   string // base URL of the node, e.g. http://127.0.0.1:8080
	Token string // the admin token
	// Operator, if set, names the caller in the audit log
	// (X-Seckill-Operator).
	Operator string
	// Timeout of each call; default a minute.
	Timeout time.Duration
}

// Admin calls a running seckill's admin API as an operator: every answer
// other than 200 is an *Error.
type Admin struct {
	cfg AdminConfig
	hc  *http.Client
}

// NewAdmin returns the Admin of cfg.
func NewAdmin(cfg AdminConfig) *Admin {
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	return &Admin{cfg: cfg, hc: &http.Client{}}
}

// Error is an answer of the admin API other than 200.
type Error struct {
	Method, Path string
	Status       int
	Code         string // the API's error code; "" if the body had none
	Message      string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

func (a *Admin) do(ctx context.Context, method, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer " + a.cfg.Token}}
	if a.cfg.Operator != "" {
		h.Set("X-Seckill-Operator", a.cfg.Operator)
	}
	status, body, err := send(ctx, a.hc, method, a.cfg.URL+path, h, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		return &Error{Method: method, Path: path, Status: status, Code: e.Error.Code, Message: e.Error.Message}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// Sales lists the sales, every page of limit of them; only those in state
// (scheduled, live or ended) if it is set.
func (a *Admin) Sales(ctx context.Context, state string, limit int) ([]map[string]any, error) {
	var all []map[string]any
	after := ""
	for {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if state != "" {
			q.Set("state", state)
		}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Sales []map[string]any `json:"sales"`
			Next  string           `json:"next"`
		}
		if err := a.do(ctx, "GET", "/admin/v1/sales?"+q.Encode(), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Sales...)
		if page.Next == "" {
			return all, nil
		}
		after = page.Next
	}
}

// Sale is the admin view of one sale.
func (a *Admin) Sale(ctx context.Context, id string) (map[string]any, error) {
	var v map[string]any
	err := a.do(ctx, "GET", "/admin/v1/sales/"+url.PathEscape(id), &v)
	return v, err
}

// Ended is the answer to ending a sale: its row now, and whether this
// call ended it (false: it had ended already).
type Ended struct {
	Sale    map[string]any `json:"sale"`
	Changed bool           `json:"changed"`
}

// EndSale ends a sale now.
func (a *Admin) EndSale(ctx context.Context, id string) (*Ended, error) {
	var v Ended
	if err := a.do(ctx, "POST", "/admin/v1/sales/"+url.PathEscape(id)+"/end", &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Reconciliation is the server's reconciliation of a sale.
func (a *Admin) Reconciliation(ctx context.Context, id string) (*reconcile.Report, error) {
	var rep reconcile.Report
	if err := a.do(ctx, "GET", "/admin/v1/sales/"+url.PathEscape(id)+"/reconciliation", &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// IsAnswer reports whether err is the server's answer (an *Error) rather
// than a failure to reach it.
func IsAnswer(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
