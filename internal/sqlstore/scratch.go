package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// scratchName is what a scratch database may be called: it goes into DDL
// unquoted by any driver, so nothing but [a-z0-9_].
var scratchName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

// Scratch creates an empty database of its own on the server rawURL names
// (a MySQL/MariaDB database, or a PostgreSQL schema in rawURL's database)
// and returns its URL and a func that drops it with everything in it. Its
// name is prefix_<unix seconds>_<suffix>, so DropScratches can tell a
// killed run's leftover from a live one. SQLite has no server: the caller
// gives each user a file of its own instead.
func Scratch(ctx context.Context, rawURL, prefix, suffix string, now time.Time) (string, func(context.Context) error, error) {
	name := fmt.Sprintf("%s_%d_%s", prefix, now.Unix(), suffix)
	if !scratchName.MatchString(name) {
		return "", nil, fmt.Errorf("scratch database: bad name %q", name)
	}
	pool, dialect, err := OpenPool(ctx, rawURL, 1)
	if err != nil {
		return "", nil, err
	}
	defer pool.Close()
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", nil, fmt.Errorf("scratch database: %w", err)
	}
	create, drop, err := scratchDDL(dialect, name)
	if err != nil {
		return "", nil, err
	}
	if _, err := pool.ExecContext(ctx, create); err != nil {
		return "", nil, fmt.Errorf("scratch database: create %s: %w", name, err)
	}
	if dialect == postgresDialect.name {
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
	} else {
		u.Path = "/" + name
	}
	dropFn := func(ctx context.Context) error {
		pool, _, err := OpenPool(ctx, rawURL, 1)
		if err != nil {
			return err
		}
		defer pool.Close()
		if _, err := pool.ExecContext(ctx, drop); err != nil {
			return fmt.Errorf("scratch database: drop %s: %w", name, err)
		}
		return nil
	}
	return u.String(), dropFn, nil
}

// DropScratches drops the scratch databases of prefix on rawURL's server
// made before cutoff: what runs killed before their own cleanup left. It
// returns how many it dropped.
func DropScratches(ctx context.Context, rawURL, prefix string, cutoff time.Time) (int, error) {
	pool, dialect, err := OpenPool(ctx, rawURL, 1)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	var list string
	switch dialect {
	case mysqlDialect.name:
		list = "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?"
	case postgresDialect.name:
		list = "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE $1"
	default:
		return 0, nil
	}
	names, err := scratchNames(ctx, pool, list, prefix)
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, name := range names {
		if !ScratchExpired(name, prefix, cutoff) {
			continue
		}
		_, drop, err := scratchDDL(dialect, name)
		if err == nil {
			_, err = pool.ExecContext(ctx, drop)
		}
		if err != nil {
			return dropped, fmt.Errorf("scratch database: drop %s: %w", name, err)
		}
		dropped++
	}
	return dropped, nil
}

// ScratchExpired reports whether name is a scratch database of prefix made
// before cutoff. A name of any other shape is never expired.
func ScratchExpired(name, prefix string, cutoff time.Time) bool {
	rest, ok := strings.CutPrefix(name, prefix+"_")
	if !ok || !scratchName.MatchString(name) {
		return false
	}
	stamp, _, ok := strings.Cut(rest, "_")
	if !ok {
		return false
	}
	sec, err := strconv.ParseInt(stamp, 10, 64)
	return err == nil && time.Unix(sec, 0).Before(cutoff)
}

func scratchNames(ctx context.Context, pool *sql.DB, list, prefix string) ([]string, error) {
	// LIKE's _ matches any character; the exact check is ScratchExpired's.
	names, err := queryColumn[string](ctx, pool, list, prefix+"%")
	if err != nil {
		return nil, fmt.Errorf("scratch database: list: %w", err)
	}
	return names, nil
}

func scratchDDL(dialect, name string) (create, drop string, err error) {
	switch dialect {
	case mysqlDialect.name:
		return "CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4", "DROP DATABASE IF EXISTS `" + name + "`", nil
	case postgresDialect.name:
		return `CREATE SCHEMA "` + name + `"`, `DROP SCHEMA IF EXISTS "` + name + `" CASCADE`, nil
	}
	return "", "", errors.New("scratch database: only MySQL/MariaDB and PostgreSQL have a server to make one on")
}
