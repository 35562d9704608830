package httpapi

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/seckill-dev/seckill"
)

// Two kinds of bad request never reach a handler, and net/http answers
// them in plain text: a path that is not canonical (ServeMux redirects it,
// 307, to the cleaned path: /api/v1/sales/../.. lands on /) and a request
// the server cannot parse at all (a control character in a header value,
// headers too large, a bad Host). Harden and JSONErrorListener give both
// the API's error shape.

var errPathNotCanonical = newStaticError(seckill.EINVALID,
	"The request path must be canonical: no '.' or '..' segments and no empty ones.")

// Harden answers a request whose path is not canonical with 400 in the
// API's error shape instead of ServeMux's redirect, and passes every other
// request to next. Put it in front of the outermost mux.
func Harden(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// CONNECT paths are not cleaned by ServeMux either.
		if r.Method != http.MethodConnect {
			if p := r.URL.EscapedPath(); p != cleanPath(p) {
				errPathNotCanonical.write(w)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is ServeMux's canonical form of a path.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// JSONErrorListener wraps ln so that the answers net/http's server writes
// by itself, before any handler runs, to a request it could not read
// (400, 431, 501), carry the API's JSON error shape. Handler answers pass
// through untouched.
func JSONErrorListener(ln net.Listener) net.Listener { return jsonErrorListener{ln} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return jsonErrorConn{c}, nil
}

type jsonErrorConn struct{ net.Conn }

func (c jsonErrorConn) Write(p []byte) (int, error) {
	if answer, ok := rewriteServerError(p); ok {
		if _, err := c.Conn.Write(answer); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// serverErrorHeaders is what net/http's server puts after the status line
// of an answer it writes itself (server.go, c.serve). A handler's answer
// never has these two headers in this order right after its status line:
// the server writes a handler's headers sorted, Connection before
// Content-Type, and always with a Date.
const serverErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// rewriteServerError returns the JSON version of one of net/http's own
// error answers, or false when p is not one.
func rewriteServerError(p []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(proto)) || len(p) < len(proto)+3 {
		return nil, false
	}
	eol := bytes.Index(p, []byte("\r\n"))
	if eol < 0 || !bytes.HasPrefix(p[eol:], []byte(serverErrorHeaders)) {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[len(proto) : len(proto)+3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	// The status line is "400 Bad Request" or "400 Bad Request: why",
	// and why is the server's own client-safe wording.
	message := "The request could not be read."
	if _, why, ok := strings.Cut(string(p[len(proto):eol]), ": "); ok && why != "" {
		message = "The request could not be read: " + why + "."
	} else if status == http.StatusRequestHeaderFieldsTooLarge {
		message = "The request headers are too large."
	} else if status == http.StatusNotImplemented {
		message = "Unsupported transfer encoding."
	}
	body, _ := json.Marshal(errorResponse{errorBody{Code: seckill.EINVALID, Message: message}})
	var b bytes.Buffer
	b.WriteString(proto + strconv.Itoa(status) + " " + http.StatusText(status))
	b.WriteString("\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(body) + 1))
	b.WriteString("\r\n\r\n")
	b.Write(body)
	b.WriteByte('\n')
	return b.Bytes(), true
}
