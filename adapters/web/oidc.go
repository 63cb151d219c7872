package web

import (
	"context"
	"crypto/hmac"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"golang.org/x/oauth2"
)

// OIDC configures sign-in through the organisation's identity provider.
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// Claim is the ID token claim whose value maps to Person.Web (default
	// email).
	Claim string
}

// oidcPendingTTL bounds how long a started sign-in may take at the provider.
const oidcPendingTTL = 10 * time.Minute

// pendingOIDC is a started authorization-code flow. It is kept by the
// browser that started it, sealed in a cookie (sealed.go), never in the
// store: starting a sign-in needs no account, so it must cost the store
// nothing.
type pendingOIDC struct {
	State    string    `json:"state"`    // must come back as the callback's state
	Verifier string    `json:"verifier"` // PKCE
	Nonce    string    `json:"nonce"`
	Redirect string    `json:"redirect"`
	Expires  time.Time `json:"expires"`
	// A step-up (stepup.go): the provider is asked to authenticate the
	// person again (prompt=login, max_age=0), the ID token's auth_time
	// must be no older than Started, the signed-in principal must be
	// Expect, and the browser lands on Next.
	StepUp  bool      `json:"step_up,omitempty"`
	Started time.Time `json:"started,omitzero"`
	Expect  string    `json:"expect,omitempty"`
	Next    string    `json:"next,omitempty"`
}

// oidcCookie is the name and path of the cookie that holds a started
// sign-in. Over https it is a __Host- cookie (Secure, Path=/, no Domain),
// which no sibling subdomain can set or overwrite, so nobody can plant a
// sign-in of their own in a victim's browser (login CSRF). Over plain http
// a browser refuses the prefix; the cookie is then bound to the callback's
// path.
func (h *Handler) oidcCookie(r *http.Request) (name, path string) {
	if h.secure(r) {
		return "__Host-countersign-oidc", "/"
	}
	return "countersign_oidc", "/ui/oidc/"
}

func (h *Handler) setOIDCCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	name, path := h.oidcCookie(r)
	// Lax, because the provider's redirect back is a cross-site navigation.
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteLaxMode,
	})
}

// oidcClient discovers the provider on first use (so that an identity
// provider that is down does not stop Countersign from starting) and keeps it.
type oidcClient struct {
	o        OIDC
	mu       sync.Mutex
	provider *oidc.Provider
}

func (c *oidcClient) get(ctx context.Context) (*oidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(ctx, c.o.Issuer)
	if err != nil {
		return nil, err
	}
	c.provider = p
	return p, nil
}

func (c *oidcClient) config(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     c.o.ClientID,
		ClientSecret: c.o.ClientSecret,
		Endpoint:     p.Endpoint(),
		RedirectURL:  redirect,
		Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
	}
}

// oidcStart redirects to the provider with state, nonce and a PKCE challenge.
func (h *Handler) oidcStart(w http.ResponseWriter, r *http.Request) {
	h.startOIDC(w, r, pendingOIDC{})
}

// startOIDC starts the authorization-code flow for pend (its step-up
// fields set by the caller; the rest here).
func (h *Handler) startOIDC(w http.ResponseWriter, r *http.Request, pend pendingOIDC) {
	if h.oidc == nil {
		h.fail(w, r, http.StatusNotFound, "Single sign-on is not configured here. Ask for a sign-in link instead.")
		return
	}
	p, err := h.oidc.get(r.Context())
	if err != nil {
		h.o.Logger.Error("web: OIDC discovery failed", "issuer", h.oidc.o.Issuer, "err", err)
		h.fail(w, r, http.StatusBadGateway, "The identity provider cannot be reached right now, so single sign-on is unavailable. Try again in a moment, or ask for a sign-in link.")
		return
	}
	state, err1 := randomToken(24)
	nonce, err2 := randomToken(24)
	if err1 != nil || err2 != nil {
		h.internal(w, r, fmt.Errorf("random: %v %v", err1, err2))
		return
	}
	pend.State, pend.Verifier, pend.Nonce, pend.Redirect, pend.Expires = state, oauth2.GenerateVerifier(), nonce, h.base(r)+"/ui/oidc/callback", h.o.Bot.Now().Add(oidcPendingTTL)
	sealed, err := h.pending.seal(pend)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	// Bind the attempt to this browser: the callback must come back to the
	// browser that started it, with the state sealed here, so that nobody
	// can sign a victim in to the attacker's account by sending a callback
	// URL. Nothing is stored: an abandoned attempt costs nothing.
	h.setOIDCCookie(w, r, sealed, int(oidcPendingTTL.Seconds()))
	opts := []oauth2.AuthCodeOption{oidc.Nonce(nonce), oauth2.S256ChallengeOption(pend.Verifier)}
	if pend.StepUp {
		// Authenticate again now, whatever session the provider holds.
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"), oauth2.SetAuthURLParam("max_age", "0"))
	}
	url := h.oidc.config(p, pend.Redirect).AuthCodeURL(state, opts...)
	if r.Method == http.MethodPost {
		// A form's redirect to another origin is blocked by form-action
		// 'self': leave through a page of our own instead (stepup.go).
		h.leaveFor(w, url)
		return
	}
	http.Redirect(w, r, url, http.StatusFound)
}

// oidcCallback finishes the flow: one use of the state, the code exchanged
// with the PKCE verifier, the ID token verified (issuer, audience, expiry,
// signature) and its nonce checked, then the claim mapped to a principal.
func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if h.oidc == nil {
		h.fail(w, r, http.StatusNotFound, "Single sign-on is not configured here.")
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		// The provider's words are not shown: anyone can send a link to
		// this page with an error of their own (error_description is
		// never read). A known code is explained in our words.
		h.setOIDCCookie(w, r, "", -1)
		code, msg := providerError(e)
		h.o.Logger.Warn("web: the identity provider refused a sign-in", "error", code)
		h.fail(w, r, http.StatusUnauthorized, msg)
		return
	}
	state, code := q.Get("state"), q.Get("code")
	if state == "" || code == "" || len(state) > 128 {
		h.fail(w, r, http.StatusBadRequest, "This sign-in response is missing its state or code. Start again from the sign-in page.")
		return
	}
	cookieName, _ := h.oidcCookie(r)
	bound, err := r.Cookie(cookieName)
	h.setOIDCCookie(w, r, "", -1)
	var pend pendingOIDC
	if err != nil || !h.pending.open(bound.Value, &pend) || !hmac.Equal([]byte(pend.State), []byte(state)) {
		h.fail(w, r, http.StatusBadRequest, "This sign-in response does not belong to a sign-in started in this browser. Start again from the sign-in page.")
		return
	}
	if !h.o.Bot.Now().Before(pend.Expires) {
		h.fail(w, r, http.StatusBadRequest, "This sign-in attempt took longer than 10 minutes. Start again from the sign-in page.")
		return
	}
	p, err := h.oidc.get(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusBadGateway, "The identity provider cannot be reached right now. Try again in a moment.")
		return
	}
	tok, err := h.oidc.config(p, pend.Redirect).Exchange(r.Context(), code, oauth2.VerifierOption(pend.Verifier))
	if err != nil {
		h.o.Logger.Warn("web: OIDC code exchange failed", "err", err)
		h.fail(w, r, http.StatusUnauthorized, "The identity provider refused the sign-in code. Start again from the sign-in page.")
		return
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		h.fail(w, r, http.StatusUnauthorized, "The identity provider returned no ID token. Check that the client is an OpenID Connect client.")
		return
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: h.oidc.o.ClientID, Now: h.o.Bot.Now}).Verify(r.Context(), raw)
	if err != nil {
		h.o.Logger.Warn("web: OIDC ID token rejected", "err", err)
		h.fail(w, r, http.StatusUnauthorized, "The ID token did not verify. Start again from the sign-in page.")
		return
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(pend.Nonce)) {
		h.fail(w, r, http.StatusUnauthorized, "The ID token's nonce does not match this sign-in attempt. Start again from the sign-in page.")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		h.fail(w, r, http.StatusUnauthorized, "The ID token's claims cannot be read.")
		return
	}
	value, _ := claims[h.oidc.o.Claim].(string)
	if value == "" {
		h.fail(w, r, http.StatusForbidden, fmt.Sprintf("The identity provider sent no %q claim, which maps you to a Countersign principal. Ask a Countersign admin.", h.oidc.o.Claim))
		return
	}
	if h.oidc.o.Claim == "email" {
		// An address the provider does not vouch for is anyone's: without
		// email_verified: true it signs nobody in.
		if !emailVerified(claims["email_verified"]) {
			h.fail(w, r, http.StatusForbidden, "Your email address is not verified at the identity provider (the ID token does not say email_verified: true), so it cannot sign you in. Verify it there, or ask a Countersign admin.")
			return
		}
	}
	name, ok := h.byWeb[strings.ToLower(value)]
	ref := "c:" + name
	if !ok {
		// config.yaml first (it is authoritative), then the people the
		// organisation's directory provisioned (SCIM), by userName.
		dref, err := h.directoryRef(r.Context(), value)
		if err != nil {
			h.signInFailed(w, r, err)
			return
		}
		if dref == "" {
			h.fail(w, r, http.StatusForbidden, fmt.Sprintf("%s is not mapped to a Countersign principal. This is by design: only people listed under principals: with web: %s, or provisioned by the directory (SCIM) under that userName, sign in. Ask a Countersign admin.", bot.OneLine(value, 120), bot.OneLine(value, 120)))
			return
		}
		name, ref = value, dref
	}
	if _, err := h.resolve(r.Context(), ref); err != nil {
		h.signInFailed(w, r, err)
		return
	}
	// One use of this response, recorded only now that the provider has
	// vouched for a person of ours (an unmapped account writes nothing).
	if err := h.o.Bot.Store().Update(r.Context(), func(tx kv.Tx) error {
		return consumeLink(tx, linkClaims{Nonce: "oidc:" + pend.Nonce, Expires: pend.Expires})
	}); err != nil {
		if err == errLinkUsed {
			err = errSignIn{"This sign-in response was already used. Start again from the sign-in page."}
		}
		h.signInFailed(w, r, err)
		return
	}
	st, msg := h.oidcAuthTime(r.Context(), claims, &pend, ref)
	if msg != "" {
		h.o.Logger.Warn("web: OIDC step-up refused", "principal", name, "reason", msg)
		h.fail(w, r, http.StatusForbidden, msg)
		return
	}
	st.Groups = oidcGroups(claims["groups"])
	h.signInWith(w, r, ref, "oidc", st)
}

// Bounds of the groups claim a session keeps.
const (
	maxClaimGroups    = 100
	maxClaimGroupName = 128
)

// oidcGroups reads the ID token's groups claim: a list of strings (a
// single string is one group); anything else, and names that are empty,
// too long or hold control characters, are ignored, and at most
// maxClaimGroups are kept. The groups only ever widen who may approve
// through groups: a tool names, never a role or a scope.
func oidcGroups(v any) []string {
	var raw []any
	switch x := v.(type) {
	case string:
		raw = []any{x}
	case []any:
		raw = x
	}
	var out []string
	for _, g := range raw {
		s, ok := g.(string)
		if !ok || strings.TrimSpace(s) == "" || len(s) > maxClaimGroupName || strings.ContainsFunc(s, unicode.IsControl) {
			continue
		}
		if out = append(out, s); len(out) == maxClaimGroups {
			break
		}
	}
	return out
}

// emailVerified reads the email_verified claim: true, or the string "true"
// that some providers send; anything else, or no claim, is not verified.
func emailVerified(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}

// providerError maps the error code of a provider's redirect (RFC 6749
// 4.1.2.1, OpenID Connect Core 3.1.2.6) to the code to log and the
// sentence to show; an unknown code is not repeated.
func providerError(code string) (string, string) {
	const again = " Try again, or ask for a sign-in link."
	switch code {
	case "access_denied":
		return code, "The sign-in was declined at the identity provider (access_denied)." + again
	case "login_required", "interaction_required", "consent_required", "account_selection_required":
		return code, "The identity provider needs you to sign in or confirm there first (" + code + ")." + again
	case "temporarily_unavailable", "server_error":
		return code, "The identity provider could not sign you in just now (" + code + "). Try again in a moment, or ask for a sign-in link."
	case "invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope",
		"invalid_request_uri", "invalid_request_object", "request_not_supported", "request_uri_not_supported", "registration_not_supported":
		return code, "The identity provider refused Countersign's sign-in request (" + code + "): an admin should check Countersign's client registration there (docs/web.md)." + again
	}
	return "unknown", "The identity provider did not sign you in." + again
}
