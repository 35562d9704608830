package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/secrets"
)

// runSales is `seckill sales list|show|end`: the operator's side of sales
// from the terminal, through the admin API of a running seckill.
func runSales(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: seckill sales list|show|end [flags]   (seckill sales list -h)")
		return errUsage
	}
	sub, args := args[0], args[1:]
	cfg := DefaultConfig()
	var (
		serverURL, state, operatorName, saleID string
		limit                                  int
		asJSON                                 bool
	)
	fs := flagSet("sales "+sub, stderr)
	fs.StringVar(&serverURL, "url", "", "base URL of the running seckill (default: http:// + --http-addr)")
	stringFlag(fs, &cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "address of the running seckill")
	stringFlag(fs, &cfg.DataDir, "data-dir", cfg.DataDir, "data directory (the generated admin token)")
	stringFlag(fs, &cfg.AdminToken, "admin-token", cfg.AdminToken, "admin token; empty reads the generated one")
	fs.BoolVar(&asJSON, "json", false, "print the API's JSON")
	switch sub {
	case "list":
		fs.StringVar(&state, "state", "", "only sales in this state: scheduled, live or ended")
		if err := intFlag(fs, &limit, "limit", 50, "sales per page (the list follows every page)"); err != nil {
			return err
		}
	case "show", "end":
		fs.StringVar(&saleID, "sale", "", "sale id (required)")
		if sub == "end" {
			fs.StringVar(&operatorName, "operator", os.Getenv("USER"), "your name, for the audit log")
		}
	default:
		fmt.Fprintf(stderr, "seckill sales: unknown subcommand %q (want list, show or end)\n", sub)
		return errUsage
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if sub != "list" && !seckill.ValidSaleID(saleID) {
		fmt.Fprintln(stderr, "--sale is required: a sale id")
		return errUsage
	}
	if serverURL == "" {
		serverURL = "http://" + cfg.HTTPAddr
	}
	if cfg.AdminToken == "" {
		s, _, err := secrets.LoadOrCreate(cfg.DataDir)
		if err != nil {
			return err
		}
		cfg.AdminToken = s.AdminToken
	}
	c := &adminClient{base: strings.TrimRight(serverURL, "/"), token: cfg.AdminToken, operator: operatorName,
		http: &http.Client{Timeout: time.Minute}}
	switch sub {
	case "list":
		return salesList(ctx, c, state, limit, asJSON, stdout)
	case "show":
		var v map[string]any
		if err := c.do(ctx, "GET", "/admin/v1/sales/"+url.PathEscape(saleID), &v); err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdout, v)
		}
		return printSale(stdout, v)
	default: // end
		var v struct {
			Sale    map[string]any `json:"sale"`
			Changed bool           `json:"changed"`
		}
		if err := c.do(ctx, "POST", "/admin/v1/sales/"+url.PathEscape(saleID)+"/end", &v); err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdout, v)
		}
		if v.Changed {
			fmt.Fprintf(stdout, "sale %s ended at %v: new claims are refused on every node\n", saleID, v.Sale["end_at"])
		} else {
			fmt.Fprintf(stdout, "sale %s had already ended (at %v); nothing changed\n", saleID, v.Sale["end_at"])
		}
		return nil
	}
}

// adminClient calls a running seckill's admin API.
type adminClient struct {
	base, token, operator string
	http                  *http.Client
}

func (c *adminClient) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.operator != "" {
		req.Header.Set("X-Seckill-Operator", c.operator)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return json.Unmarshal(body, out)
}

func salesList(ctx context.Context, c *adminClient, state string, limit int, asJSON bool, w io.Writer) error {
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
		if err := c.do(ctx, "GET", "/admin/v1/sales?"+q.Encode(), &page); err != nil {
			return err
		}
		all = append(all, page.Sales...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if asJSON {
		return printJSON(w, map[string]any{"sales": all})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tPHASE\tREMAINING\tSTOCK\tPRICE\tSTART\tEND")
	for _, s := range all {
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%s\t%v\t%v\n", s["id"], s["name"], s["state"], orDash(s["phase"]),
			jsonInt(s["remaining"]), jsonInt(s["stock"]), price(s), s["start_at"], s["end_at"])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "no sales")
	}
	return nil
}

func printSale(w io.Writer, s map[string]any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range [][2]any{
		{"id", s["id"]}, {"name", s["name"]}, {"state", s["state"]}, {"phase", orDash(s["phase"])},
		{"price", price(s)}, {"stock", jsonInt(s["stock"])}, {"unsold (database)", jsonInt(s["unsold"])},
		{"remaining", jsonInt(s["remaining"])}, {"per-user limit", jsonInt(s["per_user_limit"])},
		{"start", s["start_at"]}, {"end", s["end_at"]}, {"loaded in redis", s["loaded"]},
		{"outbox", orDash(jsonInt(s["outbox_len"]))}, {"version", jsonInt(s["version"])},
	} {
		fmt.Fprintf(tw, "%v:\t%v\n", row[0], row[1])
	}
	return tw.Flush()
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonInt prints a JSON number as an integer.
func jsonInt(v any) any {
	if f, ok := v.(float64); ok {
		return int64(f)
	}
	return v
}

func orDash(v any) any {
	if v == nil || v == "" {
		return "-"
	}
	return v
}

func price(s map[string]any) string {
	cents, _ := s["price_cents"].(float64)
	cur, _ := s["currency"].(string)
	return strings.TrimSpace(fmt.Sprintf("%d.%02d %s", int64(cents)/100, int64(cents)%100, cur))
}
