package main

import "testing"

// TestEmbeddedFsyncDatabaseURL: with --embedded-fsync on (the default)
// a SQLite database runs synchronous=FULL unless its URL says otherwise;
// off, or another database, leaves the URL as it is.
func TestEmbeddedFsyncDatabaseURL(t *testing.T) {
	for _, tc := range []struct {
		name, fsync, url, want string
	}{
		{"embedded default", "on", "", "sqlite:/d/seckill.db?_synchronous=FULL"},
		{"embedded default, fsync off", "off", "", "sqlite:/d/seckill.db"},
		{"a SQLite URL", "on", "sqlite:/x.db", "sqlite:/x.db?_synchronous=FULL"},
		{"a SQLite URL with parameters", "on", "sqlite:/x.db?_busy_timeout=1", "sqlite:/x.db?_busy_timeout=1&_synchronous=FULL"},
		{"the URL's own choice", "on", "sqlite:/x.db?_synchronous=NORMAL", "sqlite:/x.db?_synchronous=NORMAL"},
		{"MariaDB", "on", "mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.DataDir, c.DatabaseURL, c.EmbeddedFsync = "/d", tc.url, tc.fsync
			if got := c.databaseURL(); got != tc.want {
				t.Errorf("databaseURL() = %q; want %q", got, tc.want)
			}
		})
	}
	if DefaultConfig().EmbeddedFsync != "on" {
		t.Errorf("embedded fsync defaults to %q; want on", DefaultConfig().EmbeddedFsync)
	}
	c := DefaultConfig()
	c.EmbeddedFsync = "maybe"
	if _, err := c.parse(); err == nil {
		t.Error("embedded fsync \"maybe\" parsed; want an error")
	}
}
