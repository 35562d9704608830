package bench

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ProcessCPU samples the CPU time of this machine's processes named one
// of names (a database or broker server the engines use), read from
// /proc: every process of the name, so a shared server's other clients
// count too. Nil when no such process runs here (a remote server, or
// no /proc).
func ProcessCPU(names ...string) Sampler {
	if len(procStats(names)) == 0 {
		return nil
	}
	return func(context.Context) (time.Duration, error) {
		// Listed again on each sample: PostgreSQL starts a process per
		// connection.
		var ticks int64
		for _, p := range procStats(names) {
			raw, err := os.ReadFile(p)
			if err != nil {
				continue // gone meanwhile
			}
			s := string(raw)
			// After the name (which may hold spaces): state, then
			// fields 4…; utime and stime are fields 14 and 15.
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) < 13 {
				continue
			}
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + st
		}
		return time.Duration(ticks) * time.Second / 100, nil // USER_HZ
	}
}

// procStats lists the /proc/<pid>/stat files of the processes named one
// of names.
func procStats(names []string) []string {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var found []string
	for _, p := range stats {
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(p), "comm"))
		if err != nil {
			continue
		}
		comm := strings.TrimSpace(string(raw))
		for _, n := range names {
			if comm == n {
				found = append(found, p)
				break
			}
		}
	}
	return found
}

// serverProcesses names the processes of the server a URL points at, by
// its scheme, when it is on this machine: the database's (mysql,
// postgres) or the broker's (amqp, nats). None for an embedded one or a
// remote host.
func serverProcesses(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil || rawURL == "" {
		return nil
	}
	switch h := u.Hostname(); h {
	case "localhost", "127.0.0.1", "::1", "":
	default:
		return nil
	}
	switch u.Scheme {
	case "mysql":
		return []string{"mariadbd", "mysqld"}
	case "postgres", "postgresql":
		return []string{"postgres"}
	case "amqp", "amqps":
		return []string{"beam.smp"}
	case "nats":
		return []string{"nats-server"}
	}
	return nil
}
