package sqlstore

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/seckill-dev/seckill/internal/sqlstore/sqltest"
)

func TestParseSQLiteURL(t *testing.T) {
	tests := []struct {
		url     string
		path    string
		params  url.Values // checked keys only
		wantErr bool
	}{
		{url: "sqlite:seckill-data/seckill.db", path: "seckill-data/seckill.db",
			params: url.Values{"_journal_mode": {"WAL"}, "_busy_timeout": {sqliteBusyTimeout}, "_foreign_keys": {"1"}, "_txlock": {"immediate"}}},
		{url: "sqlite:/var/lib/seckill/db.sqlite", path: "/var/lib/seckill/db.sqlite"},
		{url: "sqlite:///var/lib/seckill/db.sqlite", path: "/var/lib/seckill/db.sqlite"},
		{url: "sqlite://rel/db.sqlite", path: "rel/db.sqlite"},
		{url: "sqlite::memory:", path: ":memory:"},
		{url: "sqlite:x.db?_busy_timeout=50&_pragma=cache_size(-4000)", path: "x.db",
			params: url.Values{"_busy_timeout": {"50"}, "_pragma": {"temp_store(memory)", "cache_size(-4000)"}, "_journal_mode": {"WAL"}}},
		{url: "sqlite:x.db?_pragma=temp_store(file)&_pragma=cache_size(-4000)", path: "x.db",
			params: url.Values{"_pragma": {"temp_store(file)", "cache_size(-4000)"}}},
		{url: "sqlite:", wantErr: true},
		{url: "sqlite://", wantErr: true},
		{url: "sqlite:?_txlock=deferred", wantErr: true},
		{url: "sqlite:x.db?%zz", wantErr: true},
	}
	for _, tt := range tests {
		path, params, err := parseSQLiteURL(tt.url)
		if tt.wantErr {
			if err == nil {
				t.Errorf("parseSQLiteURL(%q) succeeded, want an error", tt.url)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseSQLiteURL(%q): %v", tt.url, err)
			continue
		}
		if path != tt.path {
			t.Errorf("parseSQLiteURL(%q) path = %q, want %q", tt.url, path, tt.path)
		}
		for k, want := range tt.params {
			if got := params[k]; strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("parseSQLiteURL(%q) %s = %q, want %q", tt.url, k, got, want)
			}
		}
	}
	// The defaults are copied, never changed by a URL's parameters.
	if got := sqliteParams.Get("_busy_timeout"); got != sqliteBusyTimeout {
		t.Errorf("default _busy_timeout changed to %q", got)
	}
	if got := sqliteParams["_pragma"]; len(got) != 1 {
		t.Errorf("default _pragma changed to %q", got)
	}
}

func TestMySQLConfig(t *testing.T) {
	tests := []struct {
		url                        string
		user, pass, addr, dbName   string
		sqlMode, tlsServer, tzParm string
	}{
		{url: "mysql://root@127.0.0.1:3306/test", user: "root", addr: "127.0.0.1:3306", dbName: "test", sqlMode: "'TRADITIONAL'"},
		{url: "mysql://app:p%40ss%3Aw%2Frd@db.internal/seckill", user: "app", pass: "p@ss:w/rd", addr: "db.internal:3306", dbName: "seckill", sqlMode: "'TRADITIONAL'"},
		{url: "mysql://u:p@[::1]:3307/d", user: "u", pass: "p", addr: "[::1]:3307", dbName: "d", sqlMode: "'TRADITIONAL'"},
		{url: "mysql://u@db.example.com/d?tls=true&sql_mode=%27ANSI%27&time_zone=%27%2B00%3A00%27", user: "u", addr: "db.example.com:3306", dbName: "d",
			sqlMode: "'ANSI'", tlsServer: "db.example.com", tzParm: "'+00:00'"},
	}
	for _, tt := range tests {
		cfg, err := mysqlConfig(tt.url)
		if err != nil {
			t.Errorf("mysqlConfig(%q): %v", tt.url, err)
			continue
		}
		if cfg.User != tt.user || cfg.Passwd != tt.pass || cfg.Net != "tcp" || cfg.Addr != tt.addr || cfg.DBName != tt.dbName {
			t.Errorf("mysqlConfig(%q) = user %q pass %q net %q addr %q db %q; want %q %q tcp %q %q",
				tt.url, cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, tt.user, tt.pass, tt.addr, tt.dbName)
		}
		if got := cfg.Params["sql_mode"]; got != tt.sqlMode {
			t.Errorf("mysqlConfig(%q) sql_mode = %q, want %q", tt.url, got, tt.sqlMode)
		}
		if got := cfg.Params["time_zone"]; got != tt.tzParm {
			t.Errorf("mysqlConfig(%q) time_zone = %q, want %q", tt.url, got, tt.tzParm)
		}
		if tt.tlsServer != "" && (cfg.TLS == nil || cfg.TLS.ServerName != tt.tlsServer) {
			t.Errorf("mysqlConfig(%q) TLS = %+v, want server name %q", tt.url, cfg.TLS, tt.tlsServer)
		}
		if cfg.MultiStatements || cfg.ParseTime {
			t.Errorf("mysqlConfig(%q) turned on multiStatements or parseTime", tt.url)
		}
	}
	for _, bad := range []string{
		"mysql://",
		"mysql://host",
		"mysql://host/",
		"mysql://host/a/b",
		"mysql:host/db",
		"mysql://host/db?timeout=forever",
		"mysql://u:p@host:port/db",
	} {
		if _, err := mysqlConfig(bad); err == nil {
			t.Errorf("mysqlConfig(%q) succeeded, want an error", bad)
		}
	}
}

// FuzzParseURL: the database URL is outside input (a flag or environment
// variable). Parsing must never panic, and a parsed URL must name a
// database.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"sqlite:seckill-data/seckill.db", "sqlite://x.db?_txlock=deferred", "sqlite::memory:",
		"mysql://root@127.0.0.1:3306/test?tls=skip-verify", "mysql://u:p@[::1]/d", "mysql://%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) >= len("sqlite:") && strings.EqualFold(raw[:len("sqlite:")], "sqlite:") {
			if path, _, err := parseSQLiteURL(raw); err == nil && path == "" {
				t.Errorf("parseSQLiteURL(%q) gave an empty path", raw)
			}
		}
		if cfg, err := mysqlConfig(raw); err == nil && (cfg.DBName == "" || cfg.Addr == "") {
			t.Errorf("mysqlConfig(%q) gave db %q addr %q", raw, cfg.DBName, cfg.Addr)
		}
	})
}

// TestSQLitePragmas: the defaults reach the connections of both pools
// (temp_store 2 is MEMORY), and a URL's pragma adds to them.
func TestSQLitePragmas(t *testing.T) {
	db := openDB(t, sqltest.SQLite(t)+"?_pragma=cache_size(-4000)")
	for name, pool := range map[string]*sql.DB{"write": db.write, "read": db.read} {
		var tempStore, cacheSize int
		if err := pool.QueryRowContext(t.Context(), `PRAGMA temp_store`).Scan(&tempStore); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRowContext(t.Context(), `PRAGMA cache_size`).Scan(&cacheSize); err != nil {
			t.Fatal(err)
		}
		if tempStore != 2 || cacheSize != -4000 {
			t.Errorf("%s pool: temp_store %d, cache_size %d; want 2, -4000", name, tempStore, cacheSize)
		}
	}
}
