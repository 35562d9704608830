// Package salescli is `seckill sales list|show|end`: the operator's side
// of sales from a terminal, through the admin API of a running seckill
// (internal/apiclient), printed as tables and sentences or as the API's
// JSON.
package salescli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/seckill-dev/seckill/internal/apiclient"
)

// List prints every sale, following the pages of limit; only those in
// state if it is set.
func List(ctx context.Context, a *apiclient.Admin, state string, limit int, asJSON bool, w io.Writer) error {
	all, err := a.Sales(ctx, state, limit)
	if err != nil {
		return err
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

// Show prints one sale.
func Show(ctx context.Context, a *apiclient.Admin, saleID string, asJSON bool, w io.Writer) error {
	s, err := a.Sale(ctx, saleID)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, s)
	}
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

// End ends a sale now and says whether that changed anything.
func End(ctx context.Context, a *apiclient.Admin, saleID string, asJSON bool, w io.Writer) error {
	v, err := a.EndSale(ctx, saleID)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(w, v)
	}
	if v.Changed {
		fmt.Fprintf(w, "sale %s ended at %v: new claims are refused on every node\n", saleID, v.Sale["end_at"])
	} else {
		fmt.Fprintf(w, "sale %s had already ended (at %v); nothing changed\n", saleID, v.Sale["end_at"])
	}
	return nil
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
