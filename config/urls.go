package config

import (
	"fmt"
	"net"
	"strings"
)

// ListenEnv names the environment variable that overrides listen: (the
// serve command's --listen flag overrides both).
const ListenEnv = "COUNTERSIGN_LISTEN"

// OverrideListen applies --listen (flagValue) or $COUNTERSIGN_LISTEN
// (envValue) to c, the flag first; each is checked as host:port under its
// own name, so a typo is refused rather than ignored.
func (c *Config) OverrideListen(flagValue, envValue string) error {
	for _, o := range []struct{ name, v string }{{"--listen", flagValue}, {"$" + ListenEnv, envValue}} {
		if o.v == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(o.v); err != nil {
			return fmt.Errorf("%s: %q is not host:port (for example 127.0.0.1:8080)", o.name, o.v)
		}
		c.Listen = o.v
		return nil
	}
	return nil
}

// LocalURL is the base URL of a server listening at addr (host:port) as a
// client on the same machine reaches it: http:// and addr, with an empty
// or wildcard host (0.0.0.0, ::) read as 127.0.0.1. It is the one rule for
// every command that talks to the local server and every link printed
// without web.public_url.
func LocalURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// LinkBase is the base URL the console's links start with: web.public_url,
// else the local URL of listen.
func (c *Config) LinkBase() string {
	if c.Web.PublicURL != "" {
		return strings.TrimRight(c.Web.PublicURL, "/")
	}
	return LocalURL(c.Listen)
}

// ConsoleURL is where serve says the console is once it listens at addr
// (the address it got, which may differ from listen: port 0).
func (c *Config) ConsoleURL(addr string) string {
	if c.Web.PublicURL != "" {
		return strings.TrimRight(c.Web.PublicURL, "/") + "/ui/"
	}
	return LocalURL(addr) + "/ui/"
}
