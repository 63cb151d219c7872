package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// AllowedHosts are the names the HTTP surfaces answer to besides localhost
// and IP addresses, which are always accepted (webhook.HostGuard): the
// listen address's host when it is a name, web.public_url's host, and
// http.allowed_hosts.
func (c *Config) AllowedHosts() []string {
	var out []string
	if host, _, err := net.SplitHostPort(c.Listen); err == nil && host != "" && net.ParseIP(host) == nil {
		out = append(out, host)
	}
	if u, err := url.Parse(c.Web.PublicURL); c.Web.PublicURL != "" && err == nil && u.Hostname() != "" {
		out = append(out, u.Hostname()) // any port: a proxy may or may not forward it
	}
	return append(out, c.HTTP.AllowedHosts...)
}

// AllowedOrigins are the browser origins the HTTP surfaces accept besides
// a request's own origin and the loopback ones: web.public_url's, and
// http.allowed_origins.
func (c *Config) AllowedOrigins() []string {
	var out []string
	if u, err := url.Parse(c.Web.PublicURL); c.Web.PublicURL != "" && err == nil && u.Host != "" {
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return append(out, c.HTTP.AllowedOrigins...)
}

// validateHosts refuses an http.allowed_hosts entry that is not a host or
// host:port, and an http.allowed_origins entry that is not an origin.
func (h HTTPConfig) validateHosts(p *problems) {
	for i, e := range h.AllowedHosts {
		e = strings.TrimSpace(e)
		name, port, err := net.SplitHostPort(e)
		if err != nil {
			name, port = strings.Trim(e, "[]"), ""
		}
		if name == "" || strings.ContainsAny(e, "/@?#* ") || strings.Contains(name, ":") && net.ParseIP(name) == nil || port != "" && strings.Trim(port, "0123456789") != "" {
			p.add(fmt.Sprintf("http.allowed_hosts[%d]", i), "%q is not a host name or host:port; write a name such as countersign.example or countersign.example:8443 (an origin with its scheme goes in http.allowed_origins)", e)
		}
	}
	for i, e := range h.AllowedOrigins {
		u, err := url.Parse(strings.TrimSuffix(strings.TrimSpace(e), "/"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			p.add(fmt.Sprintf("http.allowed_origins[%d]", i), "%q is not an origin; write scheme, host and port only, for example https://console.example or http://localhost:3000", e)
		}
	}
}
