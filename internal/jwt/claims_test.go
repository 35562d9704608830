package jwt

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPlainClaims: what issuers write takes the short way, and decodes to
// what encoding/json makes of it; anything unusual is left to
// encoding/json.
func TestPlainClaims(t *testing.T) {
	tok, err := Sign(secret, "user-42", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := segments.DecodeString(strings.Split(tok, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	exp := itoa(t0.Add(time.Hour).Unix())
	for _, c := range []string{
		string(signed),
		`{"sub":"u1","exp":` + exp + `}`,
		`{"exp":` + exp + `,"nbf":0,"iat":1,"sub":"u 1~","iss":"https://id.example","jti":"x"}`,
		`{"sub":"","exp":999999999999999}`,
		`{}`,
	} {
		got, ok := decodePlainClaims([]byte(c))
		if !ok {
			t.Errorf("%s: not decoded, want the short way", c)
			continue
		}
		sameAsJSON(t, []byte(c), got)
	}
	for _, c := range []string{
		`{"sub":"u1","exp":` + exp + `,"aud":"shop"}`, // aud: the long way
		`{"sub":"u1","sub":"u2"}`,
		`{"sub":"u1","exp":1,"exp":2}`,
		`{"Sub":"u1"}`,
		`{"sub":"u\u0031"}`,
		`{"sub":"ü"}`,
		`{"sub":"u1","exp":null}`,
		`{"sub":"u1","exp":"1"}`,
		`{"sub":"u1","exp":1.5}`,
		`{"sub":"u1","exp":1e9}`,
		`{"sub":"u1","exp":-1}`,
		`{"sub":"u1","exp":01}`,
		`{"sub":"u1","exp":1000000000000000}`, // 16 digits
		`{"sub":"u1","x":1}`,
		`{"sub":"u1",}`,
		`{"sub":"u1" ,"exp":1}`,
		` {"sub":"u1"}`,
		`{"sub":"u1"}x`,
		`{"sub":7}`,
		`{"sub"}`,
		`{"sub":"u1"`,
		`{,}`,
		`[]`,
		``,
	} {
		if got, ok := decodePlainClaims([]byte(c)); ok {
			t.Errorf("%s: decoded the short way to %+v, want it left to encoding/json", c, got)
		}
	}
}

// FuzzPlainClaims: whatever the short way decodes, encoding/json decodes
// to the same claims.
func FuzzPlainClaims(f *testing.F) {
	f.Add([]byte(`{"sub":"u1","exp":1893456000,"iat":1893452400}`))
	f.Add([]byte(`{"iss":"a","jti":"b","nbf":0,"sub":"","exp":7}`))
	f.Add([]byte(`{"sub":"u1","sub":"u2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, ok := decodePlainClaims(b); ok {
			sameAsJSON(t, b, got)
		}
	})
}

func sameAsJSON(t *testing.T, b []byte, got *strictClaims) {
	t.Helper()
	var want strictClaims
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: decoded the short way to %+v; encoding/json refuses it: %v", b, got, err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("%s: decoded the short way to %+v; encoding/json gives %+v", b, *got, want)
	}
}
