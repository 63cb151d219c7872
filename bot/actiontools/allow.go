package actiontools

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// allowRule is one entry of callbacks.allowed_hosts, parsed. A callback URL
// matches when its scheme, host and port all match, and (for a URL prefix)
// its path starts with the prefix's path.
type allowRule struct {
	entry   string
	schemes []string // "http", "https"
	host    string   // lower case, no brackets
	port    string   // "" for a bare host: the scheme's default port
	path    string   // "" or a prefix ending in "/"
}

// ParseCallbackAllow parses one callbacks.allowed_hosts entry:
//
//   - a host ("agent.example", "127.0.0.1", "::1"): http or https on the
//     scheme's default port (80, 443) only;
//   - host:port ("agent.example:8443", "[::1]:9000"): http or https on that
//     port;
//   - a URL prefix ("https://agent.example:8443/callbacks/"): that scheme,
//     host and port (the default port when none is written), and paths
//     under that one.
//
// An entry that can never match (a path without a scheme, another scheme,
// credentials, a query or fragment, a bad port, a wildcard) is an error.
func ParseCallbackAllow(entry string) (allowRule, error) {
	e := strings.TrimSpace(entry)
	r := allowRule{entry: e}
	if e == "" {
		return r, fmt.Errorf("empty entry")
	}
	if strings.Contains(e, "*") {
		return r, fmt.Errorf("%q: wildcards are not supported; list each host", e)
	}
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil {
			return r, fmt.Errorf("%q is not a URL: %v", e, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return r, fmt.Errorf("%q: only http and https callbacks are made", e)
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return r, fmt.Errorf("%q: a URL prefix is scheme://host[:port][/path] only (no credentials, query or fragment)", e)
		}
		if u.Hostname() == "" {
			return r, fmt.Errorf("%q has no host", e)
		}
		r.schemes, r.host = []string{u.Scheme}, strings.ToLower(u.Hostname())
		r.port = u.Port()
		if r.port == "" {
			r.port = defaultPort(u.Scheme)
		}
		if u.Path != "" && u.Path != "/" {
			r.path = u.Path
			if !strings.HasSuffix(r.path, "/") {
				r.path += "/" // a whole segment: /cb allows /cb/x, not /cbx
			}
		}
		return r, checkPort(e, r.port)
	}
	if strings.ContainsAny(e, "/?#@") {
		return r, fmt.Errorf("%q: a path needs a scheme (write https://%s)", e, e)
	}
	r.schemes = []string{"http", "https"}
	if ip := net.ParseIP(strings.Trim(e, "[]")); ip != nil {
		r.host = strings.ToLower(ip.String())
		return r, nil
	}
	if h, p, err := net.SplitHostPort(e); err == nil {
		if h == "" {
			return r, fmt.Errorf("%q has no host", e)
		}
		r.host, r.port = strings.ToLower(strings.Trim(h, "[]")), p
		if ip := net.ParseIP(r.host); ip != nil {
			r.host = ip.String()
		}
		return r, checkPort(e, p)
	}
	if strings.Contains(e, ":") {
		return r, fmt.Errorf("%q is neither a host nor host:port", e)
	}
	r.host = strings.ToLower(e)
	return r, nil
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func checkPort(entry, p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from 1 to 65535", entry)
	}
	return nil
}

// matches reports whether u (an absolute http(s) URL) is allowed by r.
func (r allowRule) matches(u *url.URL) bool {
	scheme := strings.ToLower(u.Scheme)
	ok := false
	for _, s := range r.schemes {
		ok = ok || s == scheme
	}
	if !ok {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	if host != r.host {
		return false
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(scheme)
	}
	want := r.port
	if want == "" {
		want = defaultPort(scheme)
	}
	if port != want {
		return false
	}
	if r.path == "" {
		return true
	}
	if seg := "/" + u.Path + "/"; strings.Contains(seg, "/../") || strings.Contains(seg, "/./") {
		return false // a receiver that cleans the path would leave the prefix
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	return strings.HasPrefix(p, r.path) || p+"/" == r.path
}
