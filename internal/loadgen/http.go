package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Target is an HTTP server to send requests to: http://host:port, with an
// optional path prefix.
type Target struct {
	Addr   string // host:port to dial
	Host   string // the Host header
	Prefix string // prepended to every path, without a trailing slash
}

// ParseTarget reads a base URL such as http://127.0.0.1:8080. Only plain
// http is supported: the generator measures servers, not TLS.
func ParseTarget(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: %w", raw, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return Target{}, fmt.Errorf("target %q: want http://host:port", raw)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	p := u.Path
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return Target{Addr: addr, Host: u.Host, Prefix: p}, nil
}

// Header is one request header.
type Header struct{ Name, Value string }

// AppendRequest appends an HTTP/1.1 request for t to buf and returns it.
// The connection is kept alive; a body gets its Content-Length.
func (t Target) AppendRequest(buf []byte, method, path string, body []byte, headers ...Header) []byte {
	buf = append(buf, method...)
	buf = append(buf, ' ')
	buf = append(buf, t.Prefix...)
	buf = append(buf, path...)
	buf = append(buf, " HTTP/1.1\r\nHost: "...)
	buf = append(buf, t.Host...)
	buf = append(buf, "\r\nUser-Agent: seckill-loadgen\r\n"...)
	for _, h := range headers {
		buf = append(buf, h.Name...)
		buf = append(buf, ": "...)
		buf = append(buf, h.Value...)
		buf = append(buf, "\r\n"...)
	}
	if body != nil || method == "POST" || method == "PUT" || method == "PATCH" {
		buf = append(buf, "Content-Length: "...)
		buf = strconv.AppendInt(buf, int64(len(body)), 10)
		buf = append(buf, "\r\n"...)
	}
	buf = append(buf, "\r\n"...)
	return append(buf, body...)
}

// Response is one answer read by a Conn. Body is valid until the Conn's
// next call.
type Response struct {
	Status int
	Body   []byte
	// RetryAfter is the Retry-After header, raw; empty when absent.
	RetryAfter string
}

// DefaultTimeout bounds one request on a Conn unless Conn.Timeout says
// otherwise.
const DefaultTimeout = 30 * time.Second

// maxBody caps a response body: the generator reads API answers, not
// downloads.
const maxBody = 4 << 20

// Conn is one keep-alive HTTP/1.1 connection, used by one goroutine at a
// time: a worker owns its Conn, so requests need no pool lookup, no extra
// goroutine and no allocation beyond the response body's first growth.
// It dials on first use and again after the server closes it.
type Conn struct {
	Target  Target
	Timeout time.Duration // per request; 0 means DefaultTimeout

	c    net.Conn
	br   *bufio.Reader
	body []byte
	used bool      // a request was answered on c: it may since have been closed
	last time.Time // when c was dialled or last sent a request
}

// NewConn returns a Conn to t; nothing is dialled yet.
func NewConn(t Target) *Conn { return &Conn{Target: t} }

// Connect dials now unless connected, so that a run can open its
// connections before its start instead of during it.
func (c *Conn) Connect() error {
	if c.c != nil {
		return nil
	}
	nc, err := net.DialTimeout("tcp", c.Target.Addr, c.timeout())
	if err != nil {
		return err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c.c, c.used, c.last = nc, false, time.Now()
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 16<<10)
	} else {
		c.br.Reset(nc)
	}
	return nil
}

// Close closes the connection; the Conn dials again if used.
func (c *Conn) Close() error {
	if c.c == nil {
		return nil
	}
	err := c.c.Close()
	c.c = nil
	return err
}

func (c *Conn) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// errStale marks a failure on a reused connection before any byte of the
// answer arrived: the server had closed it while idle.
var errStale = errors.New("stale keep-alive connection")

// ErrNotSent marks a request that never reached the server whole: the
// dial failed, or the connection broke while the request was written.
// The server cannot have acted on it; it is the client's failure, not an
// unanswered request.
var ErrNotSent = errors.New("request not sent")

// idleCheck is how long a connection may sit idle before Do asks the
// kernel whether the server has closed it.
const idleCheck = time.Second

// Do sends req, a complete request (see Target.AppendRequest), and reads
// the answer. Before writing on a connection that was never used or sat
// idle, Do checks that the server has not closed it (a server closes a
// connection that sends nothing within its header timeout) and dials
// again: nothing was sent, so nothing runs twice. A request that fails on
// a kept-alive connection before any byte of the answer arrives is sent
// once more on a new connection, as net/http does: the server closed the
// idle connection. Callers whose requests must not run twice make them
// idempotent (an Idempotency-Key). A failure before the request was sent
// wraps ErrNotSent.
func (c *Conn) Do(req []byte) (Response, error) {
	resp, err := c.do(req)
	if errors.Is(err, errStale) {
		resp, err = c.do(req)
	}
	if err != nil {
		c.Close()
	}
	return resp, err
}

func (c *Conn) do(req []byte) (Response, error) {
	now := time.Now()
	if c.c != nil && (!c.used || now.Sub(c.last) >= idleCheck) && peerClosed(c.c) {
		c.Close()
	}
	if err := c.Connect(); err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	reused := c.used
	c.last = now
	if err := c.c.SetDeadline(now.Add(c.timeout())); err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	if _, err := c.c.Write(req); err != nil {
		c.Close()
		if reused {
			return Response{}, fmt.Errorf("%w: %w", errStale, err)
		}
		return Response{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	resp, closeAfter, err := c.read(reused, bytes.HasPrefix(req, []byte("HEAD ")))
	if err != nil {
		c.Close()
		return Response{}, err
	}
	c.used = true
	if closeAfter {
		c.Close()
	}
	return resp, nil
}

// read parses one response: status line, headers, then a body framed by
// Content-Length or chunked encoding.
func (c *Conn) read(reused, head bool) (resp Response, closeAfter bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		if reused && len(line) == 0 && (errors.Is(err, io.EOF) || isReset(err)) {
			return resp, false, fmt.Errorf("%w: %w", errStale, err)
		}
		return resp, false, fmt.Errorf("read status line: %w", err)
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return resp, false, fmt.Errorf("malformed status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return resp, false, fmt.Errorf("malformed status line %q", line)
	}
	resp.Status = status
	closeAfter = line[7] == '0' // HTTP/1.0 closes unless told otherwise
	length, chunked := int64(-1), false
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return resp, false, fmt.Errorf("read headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "content-length"):
			if length, err = strconv.ParseInt(string(value), 10, 64); err != nil || length < 0 || length > maxBody {
				return resp, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case equalFold(name, "transfer-encoding"):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case equalFold(name, "connection"):
			v := bytes.ToLower(value)
			if bytes.Contains(v, []byte("close")) {
				closeAfter = true
			} else if bytes.Contains(v, []byte("keep-alive")) {
				closeAfter = false
			}
		case equalFold(name, "retry-after"):
			resp.RetryAfter = string(value)
		}
	}
	c.body = c.body[:0]
	switch {
	case head || status == 204 || status == 304 || status/100 == 1:
	case chunked:
		if err := c.readChunked(); err != nil {
			return resp, false, err
		}
	case length >= 0:
		c.body = grow(c.body, int(length))
		if _, err := io.ReadFull(c.br, c.body); err != nil {
			return resp, false, fmt.Errorf("read body: %w", err)
		}
	default: // until the server closes
		b, err := io.ReadAll(io.LimitReader(c.br, maxBody))
		if err != nil {
			return resp, false, fmt.Errorf("read body: %w", err)
		}
		c.body, closeAfter = append(c.body, b...), true
	}
	resp.Body = c.body
	return resp, closeAfter, nil
}

func (c *Conn) readChunked() error {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("read chunk size: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		if err != nil || n < 0 || int64(len(c.body))+n > maxBody {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			// Trailers, then the empty line.
			for {
				line, err := c.br.ReadSlice('\n')
				if err != nil {
					return fmt.Errorf("read trailer: %w", err)
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		start := len(c.body)
		c.body = grow(c.body, start+int(n))
		if _, err := io.ReadFull(c.br, c.body[start:]); err != nil {
			return fmt.Errorf("read chunk: %w", err)
		}
		if _, err := c.br.Discard(2); err != nil { // CRLF after the chunk
			return fmt.Errorf("read chunk: %w", err)
		}
	}
}

// grow returns b resized to n bytes, reusing its array when it can.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// isReset reports a connection the peer reset or closed; a timeout is not
// one (the server may be working on the request).
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
