package webhook

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/countersign/countersign/bot"
)

// HostGuard checks the Host and Origin headers of browser-reachable
// routes, against DNS rebinding and cross-site requests. A page on another
// site that resolves its own name to this server's address reaches it with
// that name as its Host: only the server's own names are answered. A page
// of another origin that makes the browser send a request carries that
// origin: only the server's own origins are accepted.
//
// A Host is accepted when its name is localhost, an IP address (a browser
// sends one only for a page loaded from that address, which no rebinding
// can produce), or one of the configured names: any port for a bare name
// ("countersign.example"), that port only for "name:port". An Origin, when
// the request has one, is accepted when it is the request's own origin
// (its host and port are the Host), a loopback origin on the port the
// request arrived on, or one of the configured origins. A request without
// Host or Origin is not from a browser and passes that check.
type HostGuard struct {
	hosts   []string        // lower-case names and name:port pairs, no trailing dot
	origins map[string]bool // lower-case scheme://host[:port]
	log     *slog.Logger
}

// NewHostGuard returns the guard for the names (hosts) and origins the
// server answers to besides localhost and IP addresses: in Countersign,
// the listen address's host when it is a name, web.public_url and
// http.allowed_hosts / http.allowed_origins.
func NewHostGuard(hosts, origins []string, log *slog.Logger) *HostGuard {
	g := &HostGuard{origins: map[string]bool{}, log: orDiscard(log)}
	for _, h := range lower(hosts) {
		g.hosts = append(g.hosts, trimDot(h))
	}
	for _, o := range lower(origins) {
		g.origins[strings.TrimSuffix(o, "/")] = true
	}
	return g
}

// Check returns middleware that refuses, with a 403 saying what to
// configure, a request whose Host is not one of the server's names, or
// (origin true) whose Origin is not one of its origins. origin is false
// for a surface that checks Origin itself (the web console's forms).
func (g *HostGuard) Check(next http.Handler, origin bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			g.refuse(w, r, "host", r.Host, "this server does not answer to the name in the Host header (a guard against DNS rebinding). If it is a name of this server, set web.public_url to the address people use, or add the name to http.allowed_hosts")
			return
		}
		if o := r.Header.Get("Origin"); origin && o != "" && !g.originAllowed(o, r) {
			g.refuse(w, r, "origin", o, "requests sent by a page of another origin (the Origin header) are refused here (a guard against cross-site requests). If that page is yours, add its origin to http.allowed_origins, for example https://console.example")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *HostGuard) refuse(w http.ResponseWriter, r *http.Request, header, value, msg string) {
	if len(value) > 100 {
		value = value[:100]
	}
	g.log.Warn("request refused", "request_id", RequestID(r.Context()), "path", r.URL.Path, header, value, "reason", "not an allowed "+header)
	writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden: " + msg, "text": "forbidden: " + msg})
}

func lower(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// trimDot drops the trailing dot of a fully qualified name, in "name" or
// "name:port".
func trimDot(h string) string {
	if name, port, err := net.SplitHostPort(h); err == nil {
		return net.JoinHostPort(strings.TrimSuffix(name, "."), port)
	}
	return strings.TrimSuffix(h, ".")
}

// splitHost splits a Host value into its name (lower case, no brackets,
// no trailing dot) and port ("" when none).
func splitHost(host string) (name, port string) {
	host = strings.ToLower(host)
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, ""
	}
	return strings.TrimSuffix(strings.Trim(name, "[]"), "."), port
}

func (g *HostGuard) hostAllowed(host string) bool {
	if host == "" {
		return true // HTTP/1.0 without Host: not a browser
	}
	name, port := splitHost(host)
	if name == "localhost" || net.ParseIP(name) != nil {
		return true
	}
	for _, a := range g.hosts {
		an, ap := splitHost(a)
		if an == name && (ap == "" || ap == port) {
			return true
		}
	}
	return false
}

func (g *HostGuard) originAllowed(origin string, r *http.Request) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if g.origins[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return false // "null", file:, or not an origin at all
	}
	if u.Host == strings.ToLower(r.Host) {
		return true // the request's own origin
	}
	name, port := splitHost(u.Host)
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if loopback, arrived := localAddr(r); loopback && port == arrived {
		for _, n := range loopbackNames {
			if name == n {
				return true // a page of this server under another loopback name
			}
		}
	}
	return false
}

// localAddr reports whether the request arrived on a loopback address, and
// on which port.
func localAddr(r *http.Request) (loopback bool, port string) {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || a == nil {
		return false, ""
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return false, ""
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), port
}

var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// LimitBody returns middleware that reads the whole body, at most max
// bytes, before the next handler runs: a larger body is answered 413 and
// never reaches it.
func LimitBody(max int64, log *slog.Logger) func(http.Handler) http.Handler {
	log = orDiscard(log)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := readBody(w, r, max)
			if err != nil {
				WriteError(w, r, log, err)
				return
			}
			r.Body = &bufferedBody{Reader: bytes.NewReader(body), b: body}
			r.ContentLength = int64(len(body))
			next.ServeHTTP(w, r)
		})
	}
}

// bufferedBody is a body LimitBody has read whole: Bytes gives it to a
// handler that wants all of it without copying it again.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

// Bytes returns the whole body (not only what is left to read).
func (b *bufferedBody) Bytes() []byte { return b.b }

// Close does nothing: the body is in memory.
func (b *bufferedBody) Close() error { return nil }

// readBody reads r's body up to max bytes; a larger body is a KindTooLarge
// error. A body read before (bufferedBody) is not copied again; one with a
// Content-Length is read into a buffer of that size, once, and a declared
// length over max is refused before anything is read.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if b, ok := r.Body.(*bufferedBody); ok {
		return b.b, nil
	}
	if r.ContentLength > max {
		return nil, bot.Errorf(bot.KindTooLarge, "request body too large: the limit is %d bytes", max)
	}
	lr := http.MaxBytesReader(w, r.Body, max)
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 {
		body = make([]byte, n)
		_, err = io.ReadFull(lr, body)
	} else {
		body, err = io.ReadAll(lr)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bot.Errorf(bot.KindTooLarge, "request body too large: the limit is %d bytes", mbe.Limit)
		}
		return nil, bot.Invalid("", "could not read the request body")
	}
	return body, nil
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
