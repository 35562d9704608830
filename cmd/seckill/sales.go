package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/apiclient"
	"github.com/seckill-dev/seckill/internal/salescli"
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
	token, err := cfg.adminToken()
	if err != nil {
		return err
	}
	admin := apiclient.NewAdmin(apiclient.AdminConfig{URL: serverURL, Token: token, Operator: operatorName})
	switch sub {
	case "list":
		return salescli.List(ctx, admin, state, limit, asJSON, stdout)
	case "show":
		return salescli.Show(ctx, admin, saleID, asJSON, stdout)
	default: // end
		return salescli.End(ctx, admin, saleID, asJSON, stdout)
	}
}
