package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// command is one subcommand. Each owns its flags and writes only to the
// writers it is given, so tests can run it and read what it printed.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"serve":     {"run the engine (HTTP API, preheat, background workers)", runServe},
	"migrate":   {"apply database migrations and exit", runMigrate},
	"token":     {"print a buyer JWT for a user id", runToken},
	"demo":      {"run a flash sale on the embedded engine and report on it", runDemo},
	"bench":     {"load benchmarks: rush, compare, hello, textbook, live, soldout, all", runBench},
	"sales":     {"list, show or end sales of a running seckill (the admin API): sales list|show|end", runSales},
	"draw":      {"draw verify: recompute a lottery's winners from its entry list and revealed seed", runDraw},
	"orders":    {"orders export: stream a sale's orders as CSV or JSON Lines for the shop's back office", runOrders},
	"reconcile": {"compare a sale's Redis and database ledgers; exit 3 if oversold or unexplained", runReconcile},
}

// errUsage marks an error whose message is already printed by flag.
var errUsage = errors.New("usage")

// run dispatches args to a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "seckill: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var exit exitError
		if errors.As(err, &exit) {
			return exit.code
		}
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "seckill %s: %v\n", args[0], err)
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: seckill <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set by an SECKILL_* environment variable; run 'seckill <command> -h'.")
}

// flagSet returns a FlagSet that reports errors on stderr and returns them
// instead of exiting.
func flagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("seckill "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args and turns flag errors into errUsage (flag has printed them).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return errUsage
	}
	return nil
}

// envName is the SECKILL_* variable for a flag: "redis-url" → SECKILL_REDIS_URL.
func envName(flagName string) string {
	return "SECKILL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// stringFlag defines a string flag whose default comes from its variable.
func stringFlag(fs *flag.FlagSet, p *string, name, def, help string) {
	if v, ok := os.LookupEnv(envName(name)); ok {
		def = v
	}
	fs.StringVar(p, name, def, help+" ($"+envName(name)+")")
}

// durationFlag defines a duration flag whose default comes from its variable.
func durationFlag(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, help string) error {
	if v, ok := os.LookupEnv(envName(name)); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %w", envName(name), err)
		}
		def = d
	}
	fs.DurationVar(p, name, def, help+" ($"+envName(name)+")")
	return nil
}

// intFlag defines an int flag whose default comes from its variable.
func intFlag(fs *flag.FlagSet, p *int, name string, def int, help string) error {
	if v, ok := os.LookupEnv(envName(name)); ok {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil {
			return fmt.Errorf("%s: %w", envName(name), err)
		}
		def = n
	}
	fs.IntVar(p, name, def, help+" ($"+envName(name)+")")
	return nil
}

// writeReport prints a subcommand's report: as indented JSON, or as text
// by table.
func writeReport(w io.Writer, asJSON bool, v any, table func(io.Writer) error) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return table(w)
}
