package webhook

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/countersign/countersign/bot"
)

// GuardHosts returns middleware against DNS rebinding: a page on another
// site that resolves its own name to 127.0.0.1 reaches a local server with
// its own Host and Origin. allowedHosts lists the Host values accepted
// ("name" for any port, "name:port" for one); allowedOrigins the Origin
// values accepted ("http://localhost:8080"). When a list is empty and the
// request arrived on a loopback address, the default is localhost,
// 127.0.0.1 and [::1] on the port it arrived on; on other addresses an empty
// list accepts anything. A request without Origin (not from a browser)
// passes the origin check.
func GuardHosts(allowedHosts, allowedOrigins []string, log *slog.Logger) func(http.Handler) http.Handler {
	log = orDiscard(log)
	hosts := lower(allowedHosts)
	origins := lower(allowedOrigins)
	for i, o := range origins {
		origins[i] = strings.TrimSuffix(o, "/")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			loopback, port := localAddr(r)
			if !hostAllowed(strings.ToLower(r.Host), hosts, loopback, port) {
				writeForbidden(w, r, log, "the Host header is not allowed here; add it to http.allowed_hosts")
				return
			}
			if o := r.Header.Get("Origin"); o != "" && !originAllowed(strings.ToLower(strings.TrimSuffix(o, "/")), origins, loopback, port) {
				writeForbidden(w, r, log, "the Origin header is not allowed here; add it to http.allowed_origins")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
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

func hostAllowed(host string, allowed []string, loopback bool, port string) bool {
	name, p, err := net.SplitHostPort(host)
	if err != nil {
		name, p = strings.Trim(host, "[]"), ""
	}
	if len(allowed) > 0 {
		for _, a := range allowed {
			if a == host {
				return true
			}
			if _, _, err := net.SplitHostPort(a); err != nil && strings.Trim(a, "[]") == name {
				return true // a bare name allows any port
			}
		}
		return false
	}
	if !loopback {
		return true
	}
	for _, n := range loopbackNames {
		if name == n && (p == "" || p == port) {
			return true
		}
	}
	return false
}

func originAllowed(origin string, allowed []string, loopback bool, port string) bool {
	if len(allowed) > 0 {
		for _, a := range allowed {
			if a == origin {
				return true
			}
		}
		return false
	}
	if !loopback {
		return true
	}
	for _, scheme := range []string{"http://", "https://"} {
		for _, n := range []string{"localhost", "127.0.0.1", "[::1]"} {
			if origin == scheme+n+":"+port {
				return true
			}
		}
	}
	return false
}

func writeForbidden(w http.ResponseWriter, r *http.Request, log *slog.Logger, msg string) {
	log.Warn("request refused", "request_id", RequestID(r.Context()), "path", r.URL.Path, "reason", msg)
	writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden: " + msg, "text": "forbidden: " + msg})
}

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
