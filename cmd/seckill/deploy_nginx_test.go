package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDeployNginxConf reads deploy/nginx.conf: TLS with the sample
// certificate on 443, port 80 only redirecting, X-Forwarded-For believed
// from one named proxy only, /metrics and /admin/ denied and the
// /metrics exposure documented; and deploy/tls holds a self-signed
// certificate for localhost that its key matches, valid for a year yet.
func TestDeployNginxConf(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	c := string(raw)
	for _, want := range []string{
		"listen 443 ssl;",
		"ssl_certificate     /etc/nginx/tls/sample.crt;",
		"ssl_certificate_key /etc/nginx/tls/sample.key;",
		"real_ip_header X-Forwarded-For;",
		"location = /metrics { deny all; }",
		"location /admin/ { deny all; }",
		"Prometheus scrapes each",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	plain := regexp.MustCompile(`(?s)server \{\s*listen 80;(.*?)\}`).FindStringSubmatch(c)
	if plain == nil || strings.TrimSpace(plain[1]) != "return 308 https://$host$request_uri;" {
		t.Errorf("the port 80 server must only redirect to https: %q", plain)
	}
	froms := regexp.MustCompile(`(?m)^\s*set_real_ip_from\s+([^;]+);`).FindAllStringSubmatch(c, -1)
	if len(froms) == 0 {
		t.Error("nginx.conf names no proxy it takes client addresses from (set_real_ip_from)")
	}
	for _, f := range froms {
		// One proxy, by address: never a network clients can send from.
		if _, err := netip.ParseAddr(f[1]); err != nil {
			t.Errorf("set_real_ip_from %s: want one address, not a network", f[1])
		}
	}

	pair, err := tls.LoadX509KeyPair(filepath.Join(deployDir, "tls", "sample.crt"), filepath.Join(deployDir, "tls", "sample.key"))
	if err != nil {
		t.Fatalf("deploy/tls sample: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("the sample certificate is not self-signed: %v", err)
	}
	if err := cert.VerifyHostname("localhost"); err != nil {
		t.Errorf("the sample certificate does not cover localhost: %v", err)
	}
	if time.Until(cert.NotAfter) < 365*24*time.Hour {
		t.Errorf("the sample certificate expires %s: renew it", cert.NotAfter)
	}
	if !strings.Contains(strings.Join(cert.Subject.Organization, " "), "sample") {
		t.Errorf("the sample certificate's subject %q must say it is a sample", cert.Subject)
	}
}

// TestDeployNginxServes runs deploy/nginx.conf in a real nginx (skipped
// when none is installed) in front of an engine: the upstream names, the
// ports and the certificate's directory are the only changes. Over TLS
// with the sample certificate the public API answers and /metrics and
// /admin/ are 403; plain HTTP redirects to HTTPS.
func TestDeployNginxServes(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin, err = exec.LookPath("/usr/sbin/nginx")
	}
	if err != nil {
		t.Skipf("skipping: nginx is not installed (apt-get install nginx-light): %v", err)
	}
	e := startEngine(t, nil)
	sale := e.liveSale(3, 1)
	raw, err := os.ReadFile(filepath.Join(deployDir, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	tlsDir, err := filepath.Abs(filepath.Join(deployDir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	httpPort, httpsPort := freePort(t), freePort(t)
	conf := string(raw)
	for _, r := range [][2]string{
		{"server seckill-1:8080", "server " + e.m.Addr()},
		{"server seckill-2:8080", "server " + e.m.Addr()},
		{"listen 80;", fmt.Sprintf("listen 127.0.0.1:%d;", httpPort)},
		{"listen 443 ssl;", fmt.Sprintf("listen 127.0.0.1:%d ssl;", httpsPort)},
		{"/etc/nginx/tls", tlsDir},
		{"worker_processes auto;", fmt.Sprintf("worker_processes 1;\npid %s/nginx.pid;\nerror_log %s/error.log;", dir, dir)},
		{"http {", fmt.Sprintf("http {\n    access_log %s/access.log;\n    client_body_temp_path %s;\n    proxy_temp_path %s;", dir, dir, dir)},
	} {
		if !strings.Contains(conf, r[0]) {
			t.Fatalf("nginx.conf has no %q to adapt", r[0])
		}
		conf = strings.ReplaceAll(conf, r[0], r[1])
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// nginx's output goes to a file: its workers inherit the descriptors,
	// and a pipe they hold would keep Wait waiting. Its own process group,
	// so that stopping it stops its workers too.
	logf, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	out := nginxOutput(dir)

	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(filepath.Join(tlsDir, "sample.crt"))
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	base := fmt.Sprintf("https://localhost:%d", httpsPort)
	get := func(url string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v (nginx: %s)", url, err, out)
		}
		resp.Body.Close()
		return resp
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := get(base + "/api/v1/sales/" + sale); r.StatusCode != http.StatusOK || r.TLS == nil || r.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("public sale over TLS: %d, TLS %v, HSTS %q", r.StatusCode, r.TLS != nil, r.Header.Get("Strict-Transport-Security"))
	}
	for _, p := range []string{"/metrics", "/admin/v1/sales"} {
		if r := get(base + p); r.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s through nginx: %d, want 403", p, r.StatusCode)
		}
	}
	r := get(fmt.Sprintf("http://localhost:%d/api/v1/sales/%s", httpPort, sale))
	if loc := r.Header.Get("Location"); r.StatusCode != http.StatusPermanentRedirect || !strings.HasPrefix(loc, "https://localhost") {
		t.Errorf("plain HTTP: %d Location %q, want 308 to https", r.StatusCode, loc)
	}
}

// nginxOutput prints what nginx wrote, for a failure message.
type nginxOutput string

func (d nginxOutput) String() string {
	b, _ := os.ReadFile(filepath.Join(string(d), "output.log"))
	e, _ := os.ReadFile(filepath.Join(string(d), "error.log"))
	return string(b) + string(e)
}
