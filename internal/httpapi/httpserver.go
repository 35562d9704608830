package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// NewHTTPServer is the engine's HTTP server around h: its timeouts and
// header cap bound what a slow or hostile client can hold. bench serves
// its baselines with the same settings, so that they are compared alike.
func NewHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// NotTheAPI answers every request 404 not_found in the API's error shape,
// naming the roles the node runs instead: the catch-all of a node without
// the api role.
func NotTheAPI(roles string) http.Handler {
	body := fmt.Sprintf(`{"error":{"code":"not_found","message":"this node runs the roles %s, not the API"}}`+"\n", strings.ReplaceAll(roles, `"`, ""))
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, body)
	})
}
