package httpapi

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// pprofPrefix is where the Go profiler is served, to admins only.
//
// Importing net/http/pprof also registers its handlers on
// http.DefaultServeMux; nothing in this program serves that mux, and the
// profiler is reachable only here.
const pprofPrefix = "/admin/debug/pprof/"

// handlePprof serves the profiler under pprofPrefix behind the admin
// token: the index, named profiles (heap, goroutine, allocs, block, mutex,
// threadcreate), profile (CPU; keep ?seconds= under the server's
// WriteTimeout), trace and symbol. cmdline is not served: command-line
// flags may carry secrets.
func (s *Server) handlePprof(w http.ResponseWriter, r *http.Request) int {
	if !s.isAdmin(r) {
		return errAdminAuth.write(w)
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	switch name := strings.TrimPrefix(r.URL.Path, pprofPrefix); name {
	case "":
		pprof.Index(sw, r)
	case "cmdline":
		return errRouteNotFound.write(w)
	case "profile":
		pprof.Profile(sw, r)
	case "symbol":
		pprof.Symbol(sw, r)
	case "trace":
		pprof.Trace(sw, r)
	default:
		pprof.Handler(name).ServeHTTP(sw, r)
	}
	return sw.status
}
