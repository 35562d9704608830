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
	"time"

	"github.com/seckill-dev/seckill"
)

// runDraw is `seckill draw verify`: recompute a lottery's winners from
// its published entry list and revealed seed (docs/fairness.md), from a
// running seckill or from saved files.
func runDraw(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: seckill draw verify --sale ID [--url URL] | --draw FILE --entries FILE")
		return errUsage
	}
	cfg := DefaultConfig()
	var serverURL, saleID, drawFile, entriesFile string
	fs := flagSet("draw verify", stderr)
	fs.StringVar(&serverURL, "url", "", "base URL of the running seckill (default: http:// + --http-addr)")
	stringFlag(fs, &cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "address of the running seckill")
	fs.StringVar(&saleID, "sale", "", "the lottery sale's id")
	fs.StringVar(&drawFile, "draw", "", "a saved answer of GET /api/v1/sales/{id}/draw, instead of asking the server")
	fs.StringVar(&entriesFile, "entries", "", "a saved answer of GET /api/v1/sales/{id}/draw/entries, with --draw")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	var (
		d       seckill.DrawPublished
		entries struct {
			Entries []seckill.LotteryEntry `json:"entries"`
		}
	)
	switch {
	case drawFile != "" && entriesFile != "":
		if err := readJSONFile(drawFile, &d); err != nil {
			return err
		}
		if err := readJSONFile(entriesFile, &entries); err != nil {
			return err
		}
	case seckill.ValidSaleID(saleID):
		if serverURL == "" {
			serverURL = "http://" + cfg.HTTPAddr
		}
		base := strings.TrimRight(serverURL, "/") + "/api/v1/sales/" + url.PathEscape(saleID) + "/draw"
		if err := getJSON(ctx, base, &d); err != nil {
			return err
		}
		if err := getJSON(ctx, base+"/entries", &entries); err != nil {
			return err
		}
	default:
		fmt.Fprintln(stderr, "give --sale (and --url), or --draw and --entries")
		return errUsage
	}
	winners, err := seckill.VerifyDraw(d, entries.Entries)
	if err != nil {
		fmt.Fprintf(stdout, "NOT VERIFIED: %v\n", err)
		return exitError{code: 3}
	}
	var units int64
	for _, w := range winners {
		units += w.Qty
	}
	fmt.Fprintf(stdout, "verified: SHA-256(seed) = commitment %s\n", d.Commitment)
	fmt.Fprintf(stdout, "verified: %d winners (%d units of %d) among %d entrants, the same as published\n", len(winners), units, d.Stock, d.Entrants)
	return nil
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func getJSON(ctx context.Context, u string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}
