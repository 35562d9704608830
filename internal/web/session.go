package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// A buyer's session on the pages is a cookie holding their buyer token,
// so that the page of a lottery or queue sale can be rendered with the
// buyer's own standing and its forms work without a script. The API never
// reads the cookie (it takes the token from Authorization only), so the
// cookie opens nothing but these pages' routes, and every one of those
// passes the token to the API, which verifies it again.
//
// Cross-site requests: the cookie is SameSite=Lax, every POST goes through
// net/http's CrossOriginProtection (Sec-Fetch-Site / Origin), and the
// forms that act for the buyer carry a token derived from their session.

const sessionCookie = "seckill_buyer"

// sessionPath scopes the cookie to the buyer pages and their routes.
const sessionPath = "/sales/"

// maxSessionTokenBytes bounds a token taken from a form or a cookie.
const maxSessionTokenBytes = 4096

// buyerSession is the signed-in buyer of a request.
type buyerSession struct {
	token  string
	userID string
}

// session returns the request's buyer session, verified; ok is false
// when there is none or its token no longer verifies.
func (h *Handler) session(r *http.Request) (buyerSession, bool) {
	if h.buyers == nil {
		return buyerSession{}, false
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > maxSessionTokenBytes {
		return buyerSession{}, false
	}
	uid, err := h.verify(r, c.Value)
	if err != nil {
		return buyerSession{}, false
	}
	return buyerSession{token: c.Value, userID: uid}, true
}

// verify checks a buyer token the browser sent with r: through
// Config.VerifyBuyer when set, else Config.Buyers.
func (h *Handler) verify(r *http.Request, token string) (string, error) {
	if h.verifyBuyer != nil {
		return h.verifyBuyer(r, token)
	}
	return h.buyers.Verify(token)
}

// setSession starts a session with token, for this browser session only
// (no Max-Age: it ends when the browser closes, as the page's own
// sessionStorage does).
func setSession(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: sessionPath,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isHTTPS(r),
	})
}

func endSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: sessionPath, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: isHTTPS(r),
	})
}

// isHTTPS reports whether the browser reached us over TLS, here or at a
// proxy in front; the cookie is then never sent in clear.
func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// formToken is the token a form of the sale carries for the session: an
// HMAC keyed by the buyer's own token, so only a page rendered for that
// session can hold it, and every node computes the same one.
func formToken(s buyerSession, saleID string) string {
	m := hmac.New(sha256.New, []byte(s.token))
	m.Write([]byte("seckill/web/form/v1\n"))
	m.Write([]byte(saleID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validFormToken checks a form's token in constant time.
func validFormToken(s buyerSession, saleID, got string) bool {
	return hmac.Equal([]byte(got), []byte(formToken(s, saleID)))
}
