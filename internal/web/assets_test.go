package web

import (
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestAssetsServed(t *testing.T) {
	f := newFixture(t, nil)
	want := map[string]string{
		"style.css": "text/css; charset=utf-8",
		"common.js": "text/javascript; charset=utf-8",
		"buyer.js":  "text/javascript; charset=utf-8",
		"admin.js":  "text/javascript; charset=utf-8",
	}
	for name, ctype := range want {
		a := f.do(t, "GET", "/static/"+name, "", "")
		if a.status != 200 || a.header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %q, want 200 %q", name, a.status, a.header.Get("Content-Type"), ctype)
			continue
		}
		if a.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", name)
		}
		etag := a.header.Get("ETag")
		if etag == "" || len(a.body) == 0 {
			t.Errorf("%s: ETag %q, %d bytes", name, etag, len(a.body))
			continue
		}
		if again := f.do(t, "GET", "/static/"+name, "", "", "If-None-Match", etag); again.status != http.StatusNotModified {
			t.Errorf("%s with its ETag: %d, want 304", name, again.status)
		}
		if head := f.do(t, "HEAD", "/static/"+name, "", ""); head.status != 200 || len(head.body) != 0 {
			t.Errorf("HEAD %s: %d, %d bytes", name, head.status, len(head.body))
		}
	}
	for _, p := range []string{"/static/", "/static/nope.js", "/static/../web.go", "/static/%2e%2e/web.go"} {
		if a := f.do(t, "GET", p, "", ""); a.status != 404 {
			t.Errorf("GET %s: %d, want 404", p, a.status)
		}
	}
	// Every page the package serves loads only assets that exist.
	ref := regexp.MustCompile(`(?:src|href)="(/static/[^"]+)"`)
	for _, page := range []string{"/", "/admin", "/sales/tea", "/sales/nope"} {
		a := f.do(t, "GET", page, "", "")
		for _, m := range ref.FindAllStringSubmatch(string(a.body), -1) {
			if b := f.do(t, "GET", m[1], "", ""); b.status != 200 {
				t.Errorf("%s loads %s: %d", page, m[1], b.status)
			}
		}
	}
}

var (
	urlPattern   = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.\-\[\]:]+`)
	localPattern = regexp.MustCompile(`(?i)^(https?:)?//(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$`)
)

// externalURLs returns the addresses in text that name a host other than
// this machine: http(s)://host, and protocol-relative //host where a URL
// goes (an attribute, url(), a string). A "//" elsewhere is a comment.
func externalURLs(text string) []string {
	var out []string
	for _, loc := range urlPattern.FindAllStringIndex(text, -1) {
		m := text[loc[0]:loc[1]]
		if !strings.HasPrefix(strings.ToLower(m), "http") {
			before := text[max(0, loc[0]-4):loc[0]]
			if !strings.HasSuffix(before, `="`) && !strings.HasSuffix(before, `url(`) &&
				!strings.HasSuffix(before, `("`) && !strings.HasSuffix(before, `('`) && !strings.HasSuffix(before, `(`) {
				continue
			}
		}
		if !localPattern.MatchString(m) {
			out = append(out, m)
		}
	}
	return out
}

func TestExternalURLsScan(t *testing.T) {
	for _, bad := range []string{
		`<link href="https://fonts.example.com/x.css">`, `<script src="//cdn.example.com/a.js">`,
		`background: url(https://x.example/y.png)`, `fetch("http://10.0.0.1/api")`, `url(//cdn.example/z.woff2)`,
	} {
		if len(externalURLs(bad)) == 0 {
			t.Errorf("the scan misses %s", bad)
		}
	}
	for _, ok := range []string{
		`fetch("http://localhost:8080/x")`, `"http://127.0.0.1/"`, `// a comment`, `/* see // below */`, `a = b; // http later`,
	} {
		if got := externalURLs(ok); len(got) != 0 {
			t.Errorf("the scan flags %s: %v", ok, got)
		}
	}
}

// TestNoExternalURLs: the pages must work offline, so no asset, template or
// rendered page names another host (fonts, CDNs, analytics).
func TestNoExternalURLs(t *testing.T) {
	for _, root := range []fs.FS{staticFS, templateFS} {
		err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(root, p)
			if err != nil {
				return err
			}
			if bad := externalURLs(string(b)); len(bad) > 0 {
				t.Errorf("%s names external addresses: %q", p, bad)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, func(c *Config) { c.DemoLogin = func(string) (string, error) { return "t", nil } })
	for _, page := range []string{"/", "/admin", "/sales/tea", "/sales/nope"} {
		if bad := externalURLs(string(f.do(t, "GET", page, "", "").body)); len(bad) > 0 {
			t.Errorf("%s names external addresses: %q", page, bad)
		}
	}
}

// TestAssetsAccessible spot-checks the markup people with assistive
// technology depend on: every form control has a label, live regions
// exist, and the language is set.
func TestAssetsAccessible(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.DemoLogin = func(string) (string, error) { return "t", nil } })
	control := regexp.MustCompile(`<(input|select|textarea)\b[^>]*\bid="([^"]+)"`)
	for _, page := range []string{"/", "/admin", "/sales/tea"} {
		body := string(f.do(t, "GET", page, "", "").body)
		if !strings.Contains(body, `<html lang="en">`) {
			t.Errorf("%s: no lang", page)
		}
		for _, m := range control.FindAllStringSubmatch(body, -1) {
			if !strings.Contains(body, `for="`+m[2]+`"`) {
				t.Errorf("%s: <%s id=%q> has no label", page, m[1], m[2])
			}
		}
	}
	buyer := string(f.do(t, "GET", "/sales/tea", "", "").body)
	for _, want := range []string{`role="status"`, `role="alert"`, `role="timer"`, `role="progressbar"`} {
		if !strings.Contains(buyer, want) {
			t.Errorf("buyer page lacks %s", want)
		}
	}
	admin := string(f.do(t, "GET", "/admin", "", "").body)
	for _, want := range []string{`role="img"`, `aria-live="polite"`, `<th scope="col">`} {
		if !strings.Contains(admin, want) {
			t.Errorf("control room lacks %s", want)
		}
	}
}
