package httpapi

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

var testProxies = mustProxies("10.0.0.0/8, 192.0.2.1, fd00::/8")

func mustProxies(s string) []netip.Prefix {
	p, err := ParseTrustedProxies(s)
	if err != nil {
		panic(err)
	}
	return p
}

func TestClientAddr(t *testing.T) {
	many := strings.Repeat("10.0.0.7, ", maxForwardedHops+5) + "10.0.0.8"
	for _, tt := range []struct {
		name   string
		remote string
		xff    []string
		want   string // "" means ok == false
	}{
		{"untrusted peer, no header", "198.51.100.1:1", nil, "198.51.100.1"},
		{"untrusted peer's header is ignored", "198.51.100.1:1", []string{"203.0.113.5"}, "198.51.100.1"},
		{"trusted peer, no header", "10.0.0.1:1", nil, "10.0.0.1"},
		{"trusted peer", "10.0.0.1:1", []string{"203.0.113.5"}, "203.0.113.5"},
		{"right-most untrusted", "10.0.0.1:1", []string{"1.1.1.1, 203.0.113.5, 10.0.0.9"}, "203.0.113.5"},
		{"across header lines", "10.0.0.1:1", []string{"1.1.1.1, 203.0.113.5", "192.0.2.1"}, "203.0.113.5"},
		{"forged entries left of the real one", "192.0.2.1:1", []string{"10.0.0.3, 7.7.7.7, 203.0.113.5"}, "203.0.113.5"},
		{"all trusted: left-most", "10.0.0.1:1", []string{"10.0.0.5, 10.0.0.6"}, "10.0.0.5"},
		{"unreadable next to a proxy", "10.0.0.1:1", []string{"203.0.113.5, garbage"}, "10.0.0.1"},
		{"unreadable left of the client", "10.0.0.1:1", []string{"garbage, 203.0.113.5"}, "203.0.113.5"},
		{"unknown", "10.0.0.1:1", []string{"unknown"}, "10.0.0.1"},
		{"with port", "10.0.0.1:1", []string{"203.0.113.5:4711"}, "203.0.113.5"},
		{"IPv6 with port", "10.0.0.1:1", []string{"[2001:db8::1]:80"}, "2001:db8::1"},
		{"IPv6 peer trusted", "[fd00::1]:443", []string{"2001:db8::2"}, "2001:db8::2"},
		{"IPv4-mapped", "[::ffff:10.0.0.1]:80", []string{"::ffff:203.0.113.5"}, "203.0.113.5"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"empty items and spaces", "10.0.0.1:1", []string{" , ,\t203.0.113.5 , ,", ""}, "203.0.113.5"},
		{"too many hops", "10.0.0.1:1", []string{many}, "10.0.0.7"},
		{"unix socket", "@", nil, ""},
		{"no peer", "", []string{"203.0.113.5"}, ""},
	} {
		got, ok := clientAddr(tt.remote, tt.xff, testProxies)
		if tt.want == "" {
			if ok {
				t.Errorf("%s: clientAddr = %s; want none", tt.name, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tt.want) {
			t.Errorf("%s: clientAddr = %s, %v; want %s", tt.name, got, ok, tt.want)
		}
	}
}

func TestIPRateKey(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.5":             "ip:203.0.113.5",
		"2001:db8:1:2:3:4:5:6":    "ip6:2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::9":    "ip6:2001:db8:1:2::/64",
		"::1":                     "ip6:::/64",
		"::ffff:203.0.113.5":      "ip6:::/64", // callers unmap first
		"2001:db8:1:3:3:4:5:6":    "ip6:2001:db8:1:3::/64",
		"fe80::1234:5678:9abc:de": "ip6:fe80::/64",
	} {
		if got := ipRateKey(netip.MustParseAddr(in)); got != want {
			t.Errorf("ipRateKey(%s) = %s; want %s", in, got, want)
		}
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "",
		"  ":                               "",
		"10.0.0.0/8":                       "10.0.0.0/8",
		"10.0.0.0/8,192.0.2.7 , fd00::/8":  "10.0.0.0/8 192.0.2.7/32 fd00::/8",
		"10.1.2.3/8":                       "10.0.0.0/8",
		"::ffff:10.0.0.0/104":              "10.0.0.0/8",
		"::ffff:1.2.3.4":                   "1.2.3.4/32",
		"::ffff:0:0/90":                    "0.0.0.0/0",
		"2001:db8::1":                      "2001:db8::1/128",
		"127.0.0.1, ::1, 172.16.0.0/12":    "127.0.0.1/32 ::1/128 172.16.0.0/12",
		"0.0.0.0/0":                        "0.0.0.0/0",
		"192.0.2.1,192.0.2.1":              "192.0.2.1/32 192.0.2.1/32",
		"10.0.0.0/8 ,\t192.168.0.0/16\n":   "10.0.0.0/8 192.168.0.0/16",
		"2001:db8::/32,2001:db8:1::/48":    "2001:db8::/32 2001:db8:1::/48",
		"100.64.0.0/10,198.18.0.0/15,::/0": "100.64.0.0/10 198.18.0.0/15 ::/0",
	} {
		got, err := ParseTrustedProxies(in)
		if err != nil {
			t.Errorf("ParseTrustedProxies(%q): %v", in, err)
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if strings.Join(s, " ") != want {
			t.Errorf("ParseTrustedProxies(%q) = %v; want %s", in, s, want)
		}
	}
	for _, in := range []string{
		"nope", "10.0.0.0/33", "10.0.0.0/8,,", ",10.0.0.0/8", "fe80::1%eth0", "fe80::%eth0/64",
		"10.0.0.1-10.0.0.5", " , ", "10.0.0.0/8;192.0.2.1", "10.0.0.0/-1", "10.0.0.0/", "*",
	} {
		if got, err := ParseTrustedProxies(in); err == nil {
			t.Errorf("ParseTrustedProxies(%q) = %v; want an error", in, got)
		}
	}
}

// FuzzClientAddr: no input panics; the answer is a plain address (no
// zone, not IPv4-mapped) that is the peer's when the peer is untrusted,
// and otherwise the peer's or one written in the header.
func FuzzClientAddr(f *testing.F) {
	for _, s := range [][2]string{
		{"10.0.0.1:1", "1.1.1.1, 203.0.113.5, 10.0.0.9"}, {"198.51.100.1:1", "203.0.113.5"},
		{"[fd00::1]:443", "[2001:db8::1]:80, ::ffff:1.2.3.4"}, {"@", "1.2.3.4"}, {"10.0.0.1:1", " , ,unknown,"},
		{"[fe80::1%eth0]:80", "fe80::2%25eth1"}, {"10.0.0.1:1", strings.Repeat("10.0.0.2,", 100)},
		{"10.0.0.1", "1.2.3.4:99999"}, {"192.0.2.1:0", "::ffff:10.0.0.1"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		got, ok := clientAddr(remote, strings.Split(xff, "\n"), testProxies)
		peer, peerOK := parseHostAddr(remote)
		if ok != peerOK {
			t.Fatalf("ok = %v for peer %q", ok, remote)
		}
		if !ok {
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("clientAddr(%q, %q) = %v: not a plain address", remote, xff, got)
		}
		if !isTrusted(peer, testProxies) && got != peer {
			t.Fatalf("untrusted peer %s, but clientAddr = %s", peer, got)
		}
		if got != peer && !slices.ContainsFunc(strings.FieldsFunc(xff, func(r rune) bool { return r == ',' || r == '\n' }),
			func(item string) bool { a, ok := parseHostAddr(strings.TrimSpace(item)); return ok && a == got }) {
			t.Fatalf("clientAddr(%q, %q) = %s: neither the peer nor in the header", remote, xff, got)
		}
		if key := ipRateKey(got); len(key) > 64 {
			t.Fatalf("rate key %q too long", key)
		}
	})
}

// FuzzParseTrustedProxies: no input panics; what is accepted is a list
// of valid, masked, unmapped prefixes that reads back the same.
func FuzzParseTrustedProxies(f *testing.F) {
	for _, s := range []string{
		"", "10.0.0.0/8, 192.0.2.7, fd00::/8", "::ffff:10.0.0.0/104", "10.1.2.3/8", "fe80::1%eth0",
		"0.0.0.0/0", "::/0", "1.2.3.4/33", ",,", "2001:db8::1/128,::ffff:0:0/90",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTrustedProxies(s)
		if err != nil {
			if got != nil {
				t.Fatalf("prefixes %v with error %v", got, err)
			}
			return
		}
		var parts []string
		for _, p := range got {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("ParseTrustedProxies(%q) returned %v", s, p)
			}
			parts = append(parts, p.String())
		}
		back, err := ParseTrustedProxies(strings.Join(parts, ","))
		if err != nil || !slices.Equal(back, got) {
			t.Fatalf("ParseTrustedProxies(%q) = %v; reading it back gives %v, %v", s, got, back, err)
		}
	})
}
