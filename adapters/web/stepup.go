package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// Step-up: approving an item that requires it (bot.Item.StepUp) needs a
// fresh sign-in at the identity provider. The console asks the provider to
// authenticate the person again (prompt=login, max_age=0), checks the ID
// token's auth_time against the moment the step-up started (a provider
// that ignores prompt=login and answers from its old session is refused),
// and keeps auth_time in the new session; the one decision rule then
// reads it from bot.Caller.AuthAt when the person approves.

// stepUpLeeway is how much older than the start of a step-up the
// provider's auth_time may be (clocks differ a little); older is refused.
const stepUpLeeway = 30 * time.Second

// futureSkew is how far ahead of this server's clock an auth_time may be;
// further is not recorded.
const futureSkew = time.Minute

// signInState is what a sign-in adds to its session beyond the principal.
type signInState struct {
	AuthAt time.Time // the provider's auth_time; zero: none
	StepUp bool      // a step-up sign-in (prompt=login)
	Next   string    // where the browser lands; "" the inbox
	// Groups are the ID token's groups claim (oidcGroups): approver
	// groups the provider asserts for the person.
	Groups []string
}

// auditNote is what the sign-in's audit entry adds.
func (st signInState) auditNote() string {
	switch {
	case st.StepUp:
		return fmt.Sprintf(" again for step-up (prompt=login), auth_time=%s", st.AuthAt.UTC().Format(time.RFC3339))
	case !st.AuthAt.IsZero():
		return fmt.Sprintf(", auth_time=%s", st.AuthAt.UTC().Format(time.RFC3339))
	}
	return ""
}

// oidcAuthTime reads the ID token's auth_time for the session. For a
// step-up it must be present and no older than the step-up's start, and
// the person must be the one it was started for; the refusal is returned
// (and audited) as a message.
func (h *Handler) oidcAuthTime(ctx context.Context, claims map[string]any, pend *pendingOIDC, ref string) (signInState, string) {
	now := h.now()
	st := signInState{StepUp: pend.StepUp, Next: pend.Next}
	at, ok := claimTime(claims["auth_time"])
	if ok && !at.After(now.Add(futureSkew)) {
		st.AuthAt = at
		if at.After(now) {
			st.AuthAt = now
		}
	}
	if !pend.StepUp {
		return st, ""
	}
	var msg string
	switch {
	case pend.Expect != "" && pend.Expect != ref:
		msg = fmt.Sprintf("You signed in at the identity provider as %s, but this step-up was started for %s. Nothing was approved: sign in there as %s, or ask for a new link.", refName(ref), refName(pend.Expect), refName(pend.Expect))
	case st.AuthAt.IsZero():
		msg = "The identity provider did not say when you authenticated (no auth_time claim in the ID token), so this sign-in cannot count as a step-up. Nothing was approved. An admin must let the provider send auth_time (docs/web.md, Step-up)."
	case st.AuthAt.Before(pend.Started.Add(-stepUpLeeway)):
		msg = fmt.Sprintf("The identity provider answered with an earlier sign-in (auth_time %s) instead of asking you to sign in again, so it cannot count as a step-up. Nothing was approved. Try again; if it keeps happening, the provider ignores prompt=login (docs/web.md, Step-up).", st.AuthAt.UTC().Format(time.RFC3339))
	}
	if msg != "" {
		if c, err := h.resolve(ctx, ref); err == nil {
			if err := h.o.Bot.Chat().Audit(ctx, c, bot.Space{}, "access_denied", "web: step-up refused: "+msg); err != nil {
				h.o.Logger.Error("web: auditing a refused step-up failed; the refusal stands", "err", err)
			}
		}
	}
	return st, msg
}

// leaveFor sends the browser to the identity provider's url from a page
// of our own (a form's POST cannot redirect to another origin under the
// console's form-action 'self').
func (h *Handler) leaveFor(w http.ResponseWriter, url string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	u := template.HTMLEscapeString(url)
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=%s"><title>Signing in again</title><link rel="stylesheet" href="/ui/static/style.css"></head><body><main class="narrow"><p>Sign in again at your identity provider. <a href="%s">Continue</a>.</p></main></body></html>`, u, u)
}

// claimTime reads a NumericDate claim.
func claimTime(v any) (time.Time, bool) {
	switch n := v.(type) {
	case float64:
		if n > 0 {
			return time.Unix(int64(n), 0).UTC(), true
		}
	case json.Number:
		if i, err := n.Int64(); err == nil && i > 0 {
			return time.Unix(i, 0).UTC(), true
		}
	}
	return time.Time{}, false
}

// refName is the principal name of a session reference ("c:dr_smith").
func refName(ref string) string {
	_, name, _ := strings.Cut(ref, ":")
	return name
}

// stepUpItem starts a step-up for the signed-in person from an item's
// page: the provider authenticates them again, and they land back on the
// item to approve it.
func (h *Handler) stepUpItem(w http.ResponseWriter, r *http.Request) {
	id, err := bot.ParseItemID(r.PathValue("id"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "That is not an item number.")
		return
	}
	if msg := h.stepUpUnavailable(sessionOf(r).Ref); msg != "" {
		h.backToItem(w, r, id, msg)
		return
	}
	h.startOIDC(w, r, pendingOIDC{StepUp: true, Started: h.now(), Expect: sessionOf(r).Ref, Next: fmt.Sprintf("/ui/items/%d", id)})
}

// stepUpUnavailable says why the principal of ref cannot step up here, or "".
func (h *Handler) stepUpUnavailable(ref string) string {
	if h.oidc == nil {
		return "Approving this item needs a fresh sign-in through single sign-on (OpenID Connect), which is not configured here. Ask an admin to set web.oidc."
	}
	kind, name, _ := strings.Cut(ref, ":")
	if p, ok := h.o.People[name]; kind != "c" || !ok || p.Web == "" {
		return fmt.Sprintf("Approving this item needs a fresh sign-in through single sign-on, and %s has no single sign-on identity (principals[].web in the config). Ask an admin to add one, or another approver to decide.", name)
	}
	return ""
}

// Step-up links: a chat click on an item that requires step-up answers
// with one. It is bound to one principal and one item, signed like a
// sign-in link but never accepted as one, valid for LinkTTL and used once.

// MintStepUpLink returns a one-time step-up token for ref ("c:<name>") and
// item, valid until now+LinkTTL.
func MintStepUpLink(key []byte, ref string, item uint64, now time.Time) (string, error) {
	nonce, err := randomToken(16)
	if err != nil {
		return "", err
	}
	payload := fmt.Sprintf("su1|%s|%d|%d|%s", ref, item, now.Add(LinkTTL).Unix(), nonce)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// StepUpURL is the full URL of a step-up token under base.
func StepUpURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/ui/stepup?t=" + token
}

var errBadStepUpLink = errSignIn{"This step-up link is not valid: it is incomplete, altered, or was made with another key. Click Approve in Slack or Discord again for a new one, or open the item in the console."}

// parseStepUpLink checks a step-up token's signature and expiry.
func parseStepUpLink(key []byte, tok string, now time.Time) (linkClaims, uint64, error) {
	p64, s64, ok := strings.Cut(tok, ".")
	if !ok || len(tok) > 512 {
		return linkClaims{}, 0, errBadStepUpLink
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil {
		return linkClaims{}, 0, errBadStepUpLink
	}
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	if !hmac.Equal(sig, m.Sum(nil)) {
		return linkClaims{}, 0, errBadStepUpLink
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 5 || parts[0] != "su1" {
		return linkClaims{}, 0, errBadStepUpLink
	}
	item, err1 := strconv.ParseUint(parts[2], 10, 64)
	exp, err2 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || item == 0 {
		return linkClaims{}, 0, errBadStepUpLink
	}
	c := linkClaims{Ref: parts[1], Expires: time.Unix(exp, 0), Nonce: parts[4]}
	if !now.Before(c.Expires) {
		return linkClaims{}, 0, errSignIn{"This step-up link has expired: links last 5 minutes. Click Approve in Slack or Discord again for a new one, or open the item in the console."}
	}
	return c, item, nil
}

type stepUpData struct {
	Token string
	Name  string
	Item  uint64
}

// stepUpLinkPage shows a verified step-up link's Continue button; only
// the POST uses the link (a chat client's preview cannot).
func (h *Handler) stepUpLinkPage(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("t")
	c, item, err := parseStepUpLink(h.o.LinkKey, tok, h.now())
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	caller, err := h.resolve(r.Context(), c.Ref)
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "stepup", page{Title: "Sign in again", Data: stepUpData{Token: tok, Name: caller.Name, Item: item}})
}

// stepUpLinkStart uses the link once and sends the person to the identity
// provider to authenticate again, as the link's principal only.
func (h *Handler) stepUpLinkStart(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, item, err := parseStepUpLink(h.o.LinkKey, r.PostForm.Get("t"), h.now())
	if err != nil {
		h.signInFailed(w, r, err)
		return
	}
	if _, err := h.resolve(r.Context(), c.Ref); err != nil {
		h.signInFailed(w, r, err)
		return
	}
	if msg := h.stepUpUnavailable(c.Ref); msg != "" {
		h.fail(w, r, http.StatusForbidden, msg)
		return
	}
	if err := h.o.Bot.Store().Update(r.Context(), func(tx kv.Tx) error { return consumeLink(tx, c) }); err != nil {
		if err == errLinkUsed {
			err = errSignIn{"This step-up link was already used: each link works once. Click Approve in Slack or Discord again for a new one, or open the item in the console."}
		}
		h.signInFailed(w, r, err)
		return
	}
	h.startOIDC(w, r, pendingOIDC{StepUp: true, Started: h.now(), Expect: c.Ref, Next: fmt.Sprintf("/ui/items/%d", item)})
}
