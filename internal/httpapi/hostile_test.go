package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gojwt "github.com/golang-jwt/jwt/v5"

	"github.com/seckill-dev/seckill"
	"github.com/seckill-dev/seckill/internal/servicetest"
)

// protectedEnv is a Server with every protection on, as production runs
// it, limits high enough that only hostile input is refused.
func protectedEnv(t testing.TB) *env {
	t.Helper()
	return newEnv(t, func(c *Config) {
		c.RateLimiter = embeddedLimiter(t)
		c.RateLimitIP = seckill.RateLimit{Rate: 100_000, Period: time.Minute}
		c.RateLimitUser = seckill.RateLimit{Rate: 100_000, Period: time.Minute}
		c.TrustedProxies = mustProxies("192.0.2.0/24")
		c.MaxInFlight = 64
	})
}

// TestHostileInput sends what an attacker or a broken client would. Each
// must get its 4xx in the error shape, never a 5xx, and never reach the
// stock or sale store.
func TestHostileInput(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	tok := buyerToken(t, "mallory")
	reservations := "/api/v1/sales/" + testSaleID + "/reservations"
	sale := func(field, value string) string {
		fields := map[string]string{
			"id": `"hostile-1"`, "name": `"Tea"`, "price_cents": "100", "stock": "10", "per_user_limit": "1",
			"start_at": `"2030-01-01T12:00:00Z"`, "end_at": `"2030-01-01T13:00:00Z"`,
		}
		fields[field] = value
		var b strings.Builder
		b.WriteString("{")
		for _, k := range []string{"id", "name", "price_cents", "stock", "per_user_limit", "start_at", "end_at"} {
			if b.Len() > 1 {
				b.WriteString(",")
			}
			b.WriteString(`"` + k + `":` + fields[k])
		}
		return b.String() + "}"
	}
	type tc struct {
		name    string
		method  string // default POST
		path    string // default the reservation route
		body    string
		auth    string // default a buyer token; "-" for none
		headers map[string][]string
		status  int
		code    string
	}
	cases := []tc{
		// Numbers.
		{name: "qty 1e400", body: `{"qty":1e400}`, status: 400, code: seckill.EINVALID},
		{name: "qty 2^64", body: `{"qty":18446744073709551616}`, status: 400, code: seckill.EINVALID},
		{name: "qty min int64", body: `{"qty":-9223372036854775808}`, status: 400, code: seckill.EINVALID},
		{name: "qty -1", body: `{"qty":-1}`, status: 400, code: seckill.EINVALID},
		{name: "qty -0", body: `{"qty":-0}`, status: 400, code: seckill.EINVALID},
		{name: "qty 400 digits", body: `{"qty":` + strings.Repeat("9", 400) + `}`, status: 400, code: seckill.EINVALID},
		{name: "qty hex", body: `{"qty":0x10}`, status: 400, code: seckill.EINVALID},
		{name: "qty NaN", body: `{"qty":NaN}`, status: 400, code: seckill.EINVALID},
		{name: "qty Infinity", body: `{"qty":Infinity}`, status: 400, code: seckill.EINVALID},
		// Shapes and encodings.
		{name: "deep nesting", body: strings.Repeat("[", 4000) + strings.Repeat("]", 4000), status: 400, code: seckill.EINVALID},
		{name: "invalid UTF-8", body: "{\"qty\":1,\"\xff\xfe\":1}", status: 400, code: seckill.EINVALID},
		{name: "NUL in body", body: "{\"qty\":1}\x00", status: 400, code: seckill.EINVALID},
		{name: "BOM", body: "\ufeff{\"qty\":1}", status: 400, code: seckill.EINVALID},
		{name: "fullwidth field", body: `{"ｑｔｙ":1}`, status: 400, code: seckill.EINVALID},
		{name: "1 MiB body", body: `{"qty":1,"pad":"` + mib + `"}`, status: 413, code: seckill.ETOOLARGE},
		{name: "1 MiB of whitespace first", body: strings.Repeat(" ", 1<<20) + `{"qty":1}`, status: 413, code: seckill.ETOOLARGE},
		{name: "content type with NUL", body: `{"qty":1}`, headers: map[string][]string{"Content-Type": {"application/json\x00"}}, status: 400, code: seckill.EINVALID},
		// Idempotency-Key.
		{name: "key unicode", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"ключ-🔑"}}, status: 400, code: seckill.EINVALID},
		{name: "key NUL", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a\x00b"}}, status: 400, code: seckill.EINVALID},
		{name: "key DEL", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a\x7fb"}}, status: 400, code: seckill.EINVALID},
		// net/http itself refuses these two on the wire (TestHostileWire
		// checks that answer's shape); a proxy in front may let them by.
		{name: "key SOH", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a\x01b"}}, status: 400, code: seckill.EINVALID},
		{name: "key CRLF", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a\r\nX-Admin: 1"}}, status: 400, code: seckill.EINVALID},
		{name: "key tab", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"a\tb"}}, status: 400, code: seckill.EINVALID},
		{name: "key 1 MiB", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {mib}}, status: 400, code: seckill.EINVALID},
		{name: "key RTL override", body: `{"qty":1}`, headers: map[string][]string{"Idempotency-Key": {"abc\u202edef"}}, status: 400, code: seckill.EINVALID},
		// Path ids.
		{name: "sale id NUL", path: "/api/v1/sales/tea%00/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id newline", path: "/api/v1/sales/tea%0A2030/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id unicode", path: "/api/v1/sales/caf%C3%A9/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id RTL override", path: "/api/v1/sales/tea%E2%80%AE/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id braces", path: "/api/v1/sales/a%7Bb%7D/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id encoded slash", path: "/api/v1/sales/..%2F..%2Fadmin/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "sale id space", path: "/api/v1/sales/tea%202030/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "raw dot-dot path", path: "/api/v1/sales/../..", body: `{"qty":1}`, status: 400, code: seckill.EINVALID},
		{name: "dot-dot onto the admin API", path: "/api/v1/sales/../../admin/v1/sales", auth: admin(), body: sale("id", `"dotdot"`), status: 400, code: seckill.EINVALID},
		{name: "sale id 10 KiB", path: "/api/v1/sales/" + strings.Repeat("a", 10<<10) + "/reservations", body: `{"qty":1}`, status: 404, code: seckill.ESALENOTFOUND},
		{name: "public sale id unicode", method: "GET", path: "/api/v1/sales/%F0%9F%8D%B5", auth: "-", status: 404, code: seckill.ESALENOTFOUND},
		{name: "admin sale id control", method: "GET", path: "/admin/v1/sales/a%01b", auth: admin(), status: 404, code: seckill.ESALENOTFOUND},
		// Tokens.
		{name: "token 1 MiB", body: `{"qty":1}`, auth: "Bearer " + mib, status: 401, code: seckill.EUNAUTHORIZED},
		{name: "token control chars", body: `{"qty":1}`, auth: "Bearer a.b\x00.c", status: 401, code: seckill.EUNAUTHORIZED},
		{name: "token unicode", body: `{"qty":1}`, auth: "Bearer ёжик.ёжик.ёжик", status: 401, code: seckill.EUNAUTHORIZED},
		{name: "token truncated", body: `{"qty":1}`, auth: "Bearer " + tok[:len(tok)-1], status: 401, code: seckill.EUNAUTHORIZED},
		{name: "token exp numeric string", body: `{"qty":1}`, auth: "Bearer " + stringExpToken(t), status: 401, code: seckill.EUNAUTHORIZED},
		{name: "token twice", body: `{"qty":1}`, auth: "Bearer " + tok + " " + tok, status: 401, code: seckill.EUNAUTHORIZED},
		// Admin sale bodies.
		{name: "sale stock 1e18", path: "/admin/v1/sales", auth: admin(), body: sale("stock", "1000000000000000000"), status: 400, code: seckill.EINVALID},
		{name: "sale stock 2^63", path: "/admin/v1/sales", auth: admin(), body: sale("stock", "9223372036854775808"), status: 400, code: seckill.EINVALID},
		{name: "sale negative limit", path: "/admin/v1/sales", auth: admin(), body: sale("per_user_limit", "-1"), status: 400, code: seckill.EINVALID},
		{name: "sale negative price", path: "/admin/v1/sales", auth: admin(), body: sale("price_cents", "-100"), status: 400, code: seckill.EINVALID},
		{name: "sale price float", path: "/admin/v1/sales", auth: admin(), body: sale("price_cents", "9.99"), status: 400, code: seckill.EINVALID},
		{name: "sale name control", path: "/admin/v1/sales", auth: admin(), body: sale("name", `"Tea\u0000set"`), status: 400, code: seckill.EINVALID},
		{name: "sale name 1 MiB", path: "/admin/v1/sales", auth: admin(), body: sale("name", `"`+mib+`"`), status: 413, code: seckill.ETOOLARGE},
		{name: "sale id unicode", path: "/admin/v1/sales", auth: admin(), body: sale("id", `"ча́й"`), status: 400, code: seckill.EINVALID},
		{name: "sale id braces", path: "/admin/v1/sales", auth: admin(), body: sale("id", `"a{b}"`), status: 400, code: seckill.EINVALID},
		{name: "sale year 10000", path: "/admin/v1/sales", auth: admin(), body: sale("end_at", `"10000-01-01T00:00:00Z"`), status: 400, code: seckill.EINVALID},
		{name: "sale bad date", path: "/admin/v1/sales", auth: admin(), body: sale("start_at", `"2030-13-45T99:99:99Z"`), status: 400, code: seckill.EINVALID},
		{name: "sale ends first", path: "/admin/v1/sales", auth: admin(), body: sale("end_at", `"2029-01-01T00:00:00Z"`), status: 400, code: seckill.EINVALID},
		{name: "sale ten years", path: "/admin/v1/sales", auth: admin(), body: sale("end_at", `"2040-01-01T00:00:00Z"`), status: 400, code: seckill.EINVALID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := protectedEnv(t)
			method, path, auth := c.method, c.path, c.auth
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = reservations
			}
			switch auth {
			case "":
				auth = "Bearer " + tok
			case "-":
				auth = ""
			}
			w := e.do(req{method: method, path: path, body: c.body, auth: auth, headers: c.headers})
			wantError(t, w, c.status, c.code)
			if n := e.reserver.count(); n != 0 {
				t.Fatalf("hostile input reached the reserver %d times", n)
			}
			if len(e.sales.Created) != 0 {
				t.Fatalf("hostile input created a sale: %+v", e.sales.Created[0])
			}
		})
	}
}

// stringExpToken is a buyer token signed with the right secret whose exp
// is a numeric string, not the JSON number RFC 7519 requires.
func stringExpToken(t *testing.T) string {
	t.Helper()
	tok, err := gojwt.NewWithClaims(gojwt.SigningMethodHS256, gojwt.MapClaims{
		"sub": "mallory", "exp": strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10),
	}).SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestHostileForwardedFor: whatever a client writes in X-Forwarded-For,
// the request is served (or limited) normally, never failed.
func TestHostileForwardedFor(t *testing.T) {
	e := protectedEnv(t)
	for name, xff := range map[string]string{
		"10k entries": strings.Repeat("203.0.113.1, ", 10_000) + "203.0.113.2",
		"garbage":     "\x00\xff, ../../, {}, 999.999.999.999, ::::",
		"unicode":     "２０３.０.１１３.１, ١٢٧.٠.٠.١",
		"1 MiB":       strings.Repeat("x", 1<<20),
		"zones":       "fe80::1%eth0, fe80::1%25lo",
	} {
		for _, peer := range []string{"192.0.2.10:1", "198.51.100.1:1"} { // trusted proxy, plain client
			if w := e.from(peer, "buyer-"+name, `{"qty":1}`, xff); w.Code != http.StatusAccepted {
				t.Fatalf("%s via %s: %d %s; want 202", name, peer, w.Code, w.Body)
			}
		}
	}
}

// startServer serves h as cmd/seckill does, with short timeouts.
func startServer(t *testing.T, h http.Handler, readHeader, read time.Duration) string {
	t.Helper()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeader,
		ReadTimeout:       read,
		MaxHeaderBytes:    16 << 10,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(JSONErrorListener(ln)) }()
	t.Cleanup(func() {
		// Shutdown, unlike Close, waits for the connection goroutines
		// (one lingers half a second after cutting off a client).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		<-done
	})
	return ln.Addr().String()
}

// dribble writes p to c one byte per gap, until all is written, c fails
// or stop closes. It returns when done.
func dribble(c net.Conn, p string, gap time.Duration, stop <-chan struct{}) {
	for i := 0; i < len(p); i++ {
		if _, err := c.Write([]byte{p[i]}); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(gap):
		}
	}
}

// awaitCutOff reads c until the server answers or closes it, and returns
// how long that took and the status line, if any.
func awaitCutOff(t *testing.T, c net.Conn, limit time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	status, err := bufio.NewReader(c).ReadString('\n')
	took := time.Since(start)
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		t.Fatalf("the server neither answered nor closed the connection within %s", limit)
	}
	if err != nil && !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read: %v", err)
	}
	return took, strings.TrimSpace(status)
}

// TestSlowlorisIsCutOff: a client that sends its headers or its body a
// byte at a time holds a connection only until ReadHeaderTimeout or
// ReadTimeout, and reserves nothing.
func TestSlowlorisIsCutOff(t *testing.T) {
	const readHeader, read = 300 * time.Millisecond, 700 * time.Millisecond
	e := protectedEnv(t)
	addr := startServer(t, e.h, readHeader, read)
	tok := buyerToken(t, "slow")

	t.Run("slow headers", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stop := make(chan struct{})
		defer close(stop)
		headers := "POST /api/v1/sales/" + testSaleID + "/reservations HTTP/1.1\r\nHost: x\r\n" +
			strings.Repeat("X-Pad: aaaaaaaa\r\n", 100)
		go dribble(c, headers, 20*time.Millisecond, stop) // 3.4 s of headers
		took, status := awaitCutOff(t, c, 5*time.Second)
		t.Logf("slow headers cut off after %s (status line %q)", took, status)
		servicetest.WantWithin(t, fmt.Sprintf("cut off (ReadHeaderTimeout %s)", readHeader), took, readHeader+time.Second)
	})

	t.Run("slow body", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"qty":1}` + strings.Repeat(" ", 200)
		head := "POST /api/v1/sales/" + testSaleID + "/reservations HTTP/1.1\r\nHost: x\r\n" +
			"Authorization: Bearer " + tok + "\r\nContent-Type: application/json\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		defer close(stop)
		go dribble(c, body, 20*time.Millisecond, stop) // 4 s of body
		took, status := awaitCutOff(t, c, 5*time.Second)
		t.Logf("slow body cut off after %s (status line %q)", took, status)
		servicetest.WantWithin(t, fmt.Sprintf("cut off (ReadTimeout %s)", read), took, read+time.Second)
		if status != "" && !strings.HasPrefix(status, "HTTP/1.1 4") {
			t.Fatalf("status line %q; want a 4xx or a closed connection", status)
		}
		if n := e.reserver.count(); n != 0 {
			t.Fatalf("a request cut off mid-body reached the reserver %d times", n)
		}
	})

	t.Run("huge headers", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
		_, status := awaitCutOff(t, c, 5*time.Second)
		if !strings.HasPrefix(status, "HTTP/1.1 431") {
			t.Fatalf("status line %q; want 431", status)
		}
	})
}

// TestHostileWire sends what net/http itself refuses or redirects before
// any handler runs, over a real connection to a server set up as
// cmd/seckill sets it up (Harden in front, JSONErrorListener under it).
// Each answer must carry the API's JSON error shape, never Go's plain text
// or a redirect, and reserve nothing.
func TestHostileWire(t *testing.T) {
	e := protectedEnv(t)
	addr := startServer(t, Harden(e.h), 5*time.Second, 0)
	tok := buyerToken(t, "mallory")
	reserve := func(extra string) string {
		return "POST /api/v1/sales/" + testSaleID + "/reservations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nContent-Length: 9\r\n" + extra + "\r\n{\"qty\":1}"
	}
	for _, c := range []struct {
		name, raw string
		status    int
	}{
		{"key with \\x01", reserve("Idempotency-Key: a\x01b\r\n"), 400},
		{"key with \\x7f", reserve("Idempotency-Key: a\x7fb\r\n"), 400},
		{"raw dot-dot path", "GET /api/v1/sales/../.. HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"raw dot-dot under a route", "POST /api/v1/sales/../../admin/v1/sales HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 400},
		{"dot segment", "GET /api/v1/./sales/" + testSaleID + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"double slash", "GET /api/v1//sales/" + testSaleID + " HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"no Host", "GET /api/v1/sales/" + testSaleID + " HTTP/1.1\r\n\r\n", 400},
		{"headers over the cap", "GET /api/v1/sales/" + testSaleID + " HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 32<<10) + "\r\n\r\n", 431},
		{"unknown transfer encoding", "POST /api/v1/sales/" + testSaleID + "/reservations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(conn, c.raw); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%s); want %d", resp.StatusCode, body, c.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q, body %q; want the JSON error shape", ct, body)
			}
			var shape struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(body, &shape); err != nil || shape.Error.Code != seckill.EINVALID || shape.Error.Message == "" {
				t.Fatalf("body %q (%v); want {\"error\":{\"code\":%q,...}}", body, err, seckill.EINVALID)
			}
		})
	}
	if n := e.reserver.count(); n != 0 {
		t.Fatalf("hostile input reached the reserver %d times", n)
	}
	// A sound request on the same server still gets its answer untouched.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sound request: %d", resp.StatusCode)
	}
}
