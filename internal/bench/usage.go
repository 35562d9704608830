package bench

import (
	"fmt"
	"io"
)

// commands are the benchmarks of `seckill bench`.
var commands = []struct{ name, summary string }{
	{"rush", "the demo's flash sale against running seckill nodes (--url …, --admin-token, --jwt-secret)"},
	{"compare", "the same rush against six ways of deducting stock, on --redis-url and --database-url"},
	{"hello", "a bare net/http handler: the HTTP ceiling of this machine"},
	{"textbook", "a bare handler doing one EVALSHA of a plain reserve script (and hello, for the ratio)"},
	{"live", "reservations through the full API on --redis-url (and hello and textbook, for the ratios)"},
	{"soldout", "the sold-out path through the full API (and hello and textbook, for the ratios)"},
	{"all", "hello, textbook, live and soldout in sequence, with a ratio table"},
	{"entries", "lottery entries (repeated and new) and queue joins through the full API against the sold-out path (issue 29: an entry or a join costs at most 1/0.9 of a sold-out answer)"},
	{"fairness", "bots (10%, at the opening instant, zero latency) against people (over the first seconds, 50-500 ms latency): the bots' share of the units under first_come, lottery and queue"},
}

// Usage writes the usage of `seckill bench`: its benchmarks, and how to
// read their results.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "usage: seckill bench <benchmark> [flags]\n\nbenchmarks:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'seckill bench <benchmark> -h' for its flags. Results are ratios to baselines measured in the same run:\nthe machine is shared and noisy, its absolute numbers are not.")
}
