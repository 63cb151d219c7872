// Package web is the browser console: server-rendered pages under /ui/ for
// the people who decide (Inbox, Item) and the people who check (Memory,
// Audit). It is a third surface of the same core as chat and the API: every
// decision is chat.Decide, so bot.Decide (the same tool handler as an API
// client's call) made as the signed-in principal on surface "web", and every page reads through the
// same tools, so nothing the API refuses is possible from a page.
//
// Sign-in maps to the same principals: a one-time link (minted by
// `countersign web link` or asked for in chat) or OpenID Connect. Sessions
// are server-side records behind an HttpOnly, SameSite=Strict cookie; every
// request re-resolves the principal, so revoking it (or making it an
// agent) ends its sessions at once. Every form carries a CSRF token; pages
// are sent with a strict Content-Security-Policy (no inline script) and
// X-Frame-Options: DENY.
//
// A request without a session never makes the store grow: a started OIDC
// sign-in is sealed in its browser's cookie (sealed.go), and only a valid
// one-time link, or a sign-in the provider vouched for, writes anything.
// Every request takes a token of its client's rate limit first.
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Options configure New.
type Options struct {
	Bot *bot.Bot
	// People are the principals of the configuration, by name. Stored
	// principals (API keys of kind person) sign in too, by id.
	People map[string]Person
	// LinkKey signs one-time sign-in links (see LinkKey).
	LinkKey []byte
	// PublicURL is where people reach the console (scheme and host, no
	// path); empty means the request's own host.
	PublicURL string
	// OIDC, when set, offers single sign-on.
	OIDC *OIDC
	// Passkeys, when set, lets people register passkeys (after a fresh
	// OIDC sign-in) and step up with them (passkey.go).
	Passkeys *Passkeys
	// SessionTTL is how long a session lasts (default 12h).
	SessionTTL time.Duration
	// PollInterval is how often an open item page checks whether it was
	// decided elsewhere (default 5s).
	PollInterval time.Duration
	// RatePerMinute and RateBurst limit the requests of each client: a
	// signed-in session, else an address (an IPv6 address by its /64).
	// Over the limit a request is answered 429 with Retry-After before
	// anything else is done. Defaults: DefaultRatePerMinute,
	// DefaultRateBurst.
	RatePerMinute int
	RateBurst     int
	Logger        *slog.Logger
}

// Default request limits of a console client (Options.RatePerMinute,
// Options.RateBurst).
const (
	DefaultRatePerMinute = 600
	DefaultRateBurst     = 120
)

// Handler serves the console.
type Handler struct {
	o     Options
	mux   *http.ServeMux
	pages map[string]*template.Template
	oidc  *oidcClient
	byWeb map[string]string // lower-cased claim value -> person name
	// pending seals a started OIDC sign-in into its browser's cookie.
	pending *sealer
	// limit holds a token bucket per client (clientKey).
	limit *bot.RateLimiter
}

// New builds the console's handler; mount it at "/ui/".
func New(o Options) (*Handler, error) {
	if o.Bot == nil {
		return nil, errors.New("web: Bot is required")
	}
	if len(o.LinkKey) < 16 {
		return nil, errors.New("web: LinkKey must be at least 16 bytes")
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RatePerMinute <= 0 {
		o.RatePerMinute = DefaultRatePerMinute
	}
	if o.RateBurst <= 0 {
		o.RateBurst = DefaultRateBurst
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	h := &Handler{o: o, mux: http.NewServeMux(), byWeb: map[string]string{}, limit: bot.NewRateLimiter(o.RatePerMinute, o.RateBurst, o.Bot.Now)}
	var err error
	if h.pending, err = newSealer(o.LinkKey, "oidc pending sign-in"); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	for name, p := range o.People {
		if p.Web == "" {
			continue
		}
		k := strings.ToLower(strings.TrimSpace(p.Web))
		if other, dup := h.byWeb[k]; dup {
			return nil, fmt.Errorf("web identity %s is mapped to both %s and %s", p.Web, other, name)
		}
		h.byWeb[k] = name
	}
	if o.OIDC != nil {
		oc := *o.OIDC
		if oc.Claim == "" {
			oc.Claim = "email"
		}
		h.oidc = &oidcClient{o: oc}
	}
	if o.Passkeys != nil {
		if err := ValidatePasskeys(o.Passkeys, o.PublicURL); err != nil {
			return nil, fmt.Errorf("web: passkeys: %w", err)
		}
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

func (h *Handler) parseTemplates() error {
	funcs := template.FuncMap{
		"stamp": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		// shown is the one rule for showing an argument or a value (and
		// text that holds them: titles, audit details): every invisible
		// character (zero-width, bidirectional control) as its escape,
		// \u200b, as cards show arguments (bot.EscapeInvisible), so that
		// "pay\u200bments" never reads as "payments".
		"shown":      bot.EscapeInvisible,
		"grantValue": grantValue,
		"pretty":     prettyJSON, // raw JSON arguments under Details, indented
		"f1":         f1,         // an SVG coordinate (insights.go)
		"days":       func() []int { return []int{7, 14, 30, 90} },
		"outcomeClass": func(name string) string {
			for _, o := range outcomes {
				if o.Name == name {
					return o.Class
				}
			}
			return ""
		},
		"tsShort": func(ts string) string {
			t, err := time.Parse(time.RFC3339, ts)
			if err != nil {
				return ts
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
	}
	h.pages = map[string]*template.Template{}
	for _, page := range []string{"inbox", "item", "memory", "audit", "signin", "link", "message", "stepup", "grants", "insights", "batch", "delegation", "passkeys"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return fmt.Errorf("web: template %s: %w", page, err)
		}
		h.pages[page] = t
	}
	return nil
}

func (h *Handler) routes() {
	static, _ := fs.Sub(assets, "static")
	fileServer := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	h.mux.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		fileServer.ServeHTTP(w, r)
	}))
	h.mux.HandleFunc("GET /ui/signin", h.signinPage)
	h.mux.HandleFunc("GET /ui/signin/link", h.linkPage)
	h.mux.HandleFunc("POST /ui/signin/link", h.linkSignIn)
	h.mux.HandleFunc("GET /ui/signin/oidc", h.oidcStart)
	h.mux.HandleFunc("GET /ui/oidc/callback", h.oidcCallback)
	h.mux.HandleFunc("POST /ui/signout", h.authed(h.signOut))
	h.mux.HandleFunc("GET /ui/{$}", h.authed(h.inbox))
	h.mux.HandleFunc("GET /ui/items/{id}", h.authed(h.item))
	h.mux.HandleFunc("GET /ui/items/{id}/status", h.authed(h.itemStatus))
	h.mux.HandleFunc("POST /ui/items/{id}/decide", h.authed(h.decide))
	h.mux.HandleFunc("POST /ui/items/{id}/stepup", h.authed(h.stepUpItem)) // stepup.go
	h.mux.HandleFunc("GET /ui/stepup", h.stepUpLinkPage)
	h.mux.HandleFunc("POST /ui/stepup", h.stepUpLinkStart)
	h.mux.HandleFunc("GET /ui/batch", h.authed(h.batchReview))                            // batch.go
	h.mux.HandleFunc("POST /ui/batch", h.authed(h.batchDecide))                           // batch.go
	h.mux.HandleFunc("GET /ui/passkeys", h.authed(h.passkeysPage))                        // passkey_pages.go
	h.mux.HandleFunc("POST /ui/passkeys/signin", h.authed(h.passkeySignIn))               // passkey_pages.go
	h.mux.HandleFunc("POST /ui/passkeys/begin", h.authed(h.passkeyBeginRegister))         // passkey_pages.go
	h.mux.HandleFunc("POST /ui/passkeys/register", h.authed(h.passkeyRegister))           // passkey_pages.go
	h.mux.HandleFunc("POST /ui/passkeys/remove", h.authed(h.passkeyRemove))               // passkey_pages.go
	h.mux.HandleFunc("POST /ui/items/{id}/passkey/begin", h.authed(h.passkeyBeginStepUp)) // passkey_pages.go
	h.mux.HandleFunc("POST /ui/items/{id}/passkey", h.authed(h.passkeyStepUp))            // passkey_pages.go
	h.mux.HandleFunc("GET /ui/requests/{rid}", h.authed(h.requestItem))
	h.mux.HandleFunc("GET /ui/memory", h.authed(h.memory))
	h.mux.HandleFunc("GET /ui/grants", h.authed(h.grants))                  // grants.go
	h.mux.HandleFunc("POST /ui/grants/{n}/revoke", h.authed(h.revokeGrant)) // grants.go
	h.mux.HandleFunc("GET /ui/insights", h.authed(h.insights))              // insights.go
	h.mux.HandleFunc("GET /ui/delegation", h.authed(h.delegation))          // delegation.go
	h.mux.HandleFunc("POST /ui/delegation", h.authed(h.delegate))           // delegation.go
	h.mux.HandleFunc("POST /ui/delegation/end", h.authed(h.endDelegation))  // delegation.go
	h.mux.HandleFunc("GET /ui/audit", h.authed(h.audit))
	h.mux.HandleFunc("POST /ui/audit/verify", h.authed(h.verify))
	h.mux.HandleFunc("GET /ui/audit/export", h.authed(h.export))
	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "There is no page here. Go to the inbox.")
	})
}

// csp is the Content-Security-Policy of every page: no inline script or
// style, nothing from elsewhere, no framing, forms only to this origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxForm bounds a form's body.
const maxForm = 64 << 10

// ServeHTTP serves every /ui/ route with the security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if h.secure(r) {
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if !strings.HasPrefix(r.URL.Path, "/ui/static/") {
		if ok, wait := h.limit.Allow(h.clientKey(r)); !ok {
			secs := max(1, int(math.Ceil(wait.Seconds())))
			hd.Set("Retry-After", strconv.Itoa(secs))
			h.fail(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many requests from your browser or network: wait %d second(s), then reload the page. Nothing was done.", secs))
			return
		}
	}
	if r.Method == http.MethodPost && !h.sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "Refused: this form was sent from another site. Open Countersign and try again from its own page.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// clientKey names whose token bucket a request takes from: its session's,
// when it carries a live one (so a flood from strangers on the same address,
// such as a proxy's, never slows a signed-in person), else its address's.
// An IPv6 client is its /64, which one host usually holds whole.
func (h *Handler) clientKey(r *http.Request) string {
	if c, err := r.Cookie(h.cookieName(r)); err == nil {
		if s, err := h.loadSession(r.Context(), c.Value); err == nil && s != nil {
			return "session:" + string(tokenKey(c.Value))
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "addr:" + host
	}
	if ip = ip.Unmap(); ip.Is6() {
		p, _ := ip.Prefix(64)
		return "addr:" + p.String()
	}
	return "addr:" + ip.String()
}

// sameOrigin checks a POST's Origin header, when the browser sends one,
// against this console's origin.
func (h *Handler) sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	return strings.EqualFold(strings.TrimRight(o, "/"), h.base(r))
}

// base is the console's origin: web.public_url, else the request's host.
func (h *Handler) base(r *http.Request) string {
	if h.o.PublicURL != "" {
		return h.o.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (h *Handler) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(h.o.PublicURL), "https://")
}

// cookieName is the session cookie's name: __Host- prefixed over https.
func (h *Handler) cookieName(r *http.Request) string {
	if h.secure(r) {
		return "__Host-countersign"
	}
	return "countersign_session"
}

func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: h.cookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode,
	})
}

type ctxKey int

const (
	keyCaller ctxKey = iota
	keySession
	keyToken
)

// authed resolves the session cookie to a caller; without one it sends the
// browser to the sign-in page (a page) or answers 401 (the status poll).
func (h *Handler) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var tok string
		if c, err := r.Cookie(h.cookieName(r)); err == nil {
			tok = c.Value
		}
		s, err := h.loadSession(r.Context(), tok)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		var caller *bot.Caller
		if s != nil {
			caller, err = h.resolve(r.Context(), s.Ref)
			if caller != nil {
				caller.AuthAt, caller.AuthMethod = s.AuthAt, s.AuthMethod // step-up: the session's last sign-in at the provider
				caller.Groups = s.Groups                                  // the provider's groups claim (approver groups)
				caller.SignIn = s.Via                                     // assurance: how the session was opened
			}
			if err != nil {
				if _, ok := isSignIn(err); !ok {
					h.internal(w, r, err)
					return
				}
				// Revoked or removed: the session ends now.
				if err := h.endSession(r.Context(), tok); err != nil {
					h.o.Logger.Error("web: ending the session of a revoked principal failed", "err", err)
				}
				s = nil
			}
		}
		if s == nil {
			if tok != "" {
				h.setCookie(w, r, "", -1)
			}
			if strings.HasSuffix(r.URL.Path, "/status") {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"status":"signed_out"}`)
				return
			}
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.fail(w, r, http.StatusUnauthorized, "You are signed out, so nothing was done. Sign in again and retry.")
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				h.fail(w, r, http.StatusBadRequest, "The form could not be read. Reload the page and try again.")
				return
			}
			if !csrfOK(s, r.PostForm.Get("csrf")) {
				h.fail(w, r, http.StatusForbidden, "Refused: this form's security token is missing or does not match your session, so nothing was done. Reload the page and try again.")
				return
			}
		}
		ctx := context.WithValue(r.Context(), keyCaller, caller)
		ctx = context.WithValue(ctx, keySession, s)
		ctx = context.WithValue(ctx, keyToken, tok)
		next(w, r.WithContext(ctx))
	}
}

func callerOf(r *http.Request) *bot.Caller {
	c, _ := r.Context().Value(keyCaller).(*bot.Caller)
	return c
}
func sessionOf(r *http.Request) *session { s, _ := r.Context().Value(keySession).(*session); return s }
func tokenOf(r *http.Request) string     { t, _ := r.Context().Value(keyToken).(string); return t }

// page is what every template receives.
type page struct {
	Title   string
	Nav     string // which nav entry is current
	Caller  *bot.Caller
	CSRF    string
	Notice  string
	Problem string
	Data    any
	// Passkeys says passkeys are configured (the nav links their page).
	Passkeys bool
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if c := callerOf(r); c != nil {
		p.Caller = c
	}
	if s := sessionOf(r); s != nil {
		p.CSRF = s.CSRF
	}
	p.Passkeys = h.o.Passkeys != nil
	var b strings.Builder
	if err := h.pages[name].Execute(&b, p); err != nil {
		h.o.Logger.Error("web: rendering a page failed", "page", name, "err", err)
		http.Error(w, "Sorry, this page could not be shown. It may be a temporary fault; try again in a moment.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail shows msg on a page of its own with status.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "message", page{Title: http.StatusText(status), Problem: msg})
}

// internal logs err and shows a page that claims nothing about what changed.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.o.Logger.Error("web: request failed", "path", r.URL.Path, "err", err)
	h.fail(w, r, http.StatusServiceUnavailable, "Sorry, that could not be completed. It may be a temporary fault; reload the page before trying again.")
}

// SignInURL returns the full one-time sign-in URL of token under base.
func SignInURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/ui/signin/link?t=" + url.QueryEscape(token)
}

func (h *Handler) now() time.Time { return h.o.Bot.Now() }
