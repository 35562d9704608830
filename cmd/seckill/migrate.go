package main

import (
	"context"
	"fmt"
	"io"

	"github.com/seckill-dev/seckill/internal/redact"
	"github.com/seckill-dev/seckill/internal/sqlstore"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	fs := flagSet("migrate", stderr)
	stringFlag(fs, &cfg.DatabaseURL, "database-url", cfg.DatabaseURL, "database URL (mysql://, postgres://, sqlite:PATH); empty uses SQLite in the data dir")
	stringFlag(fs, &cfg.DataDir, "data-dir", cfg.DataDir, "data directory of the embedded default")
	if err := parse(fs, args); err != nil {
		return err
	}
	db, err := sqlstore.Open(ctx, cfg.databaseURL())
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database %s is up to date\n", redact.URL(cfg.databaseURL()))
	return nil
}
