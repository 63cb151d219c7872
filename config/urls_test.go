package config

import (
	"strings"
	"testing"
)

// TestLocalURLs: one rule for the URL of the local server: a wildcard or
// empty host is 127.0.0.1 (IPv4 and IPv6 alike), a name or address stays;
// web.public_url wins for links and the console, without a trailing slash
// doubled.
func TestLocalURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"[::]:8080", "http://127.0.0.1:8080"},
		{":8080", "http://127.0.0.1:8080"},
		{"countersign.internal:9000", "http://countersign.internal:9000"},
		{"[::1]:8080", "http://[::1]:8080"},
	} {
		if got := LocalURL(tc.addr); got != tc.want {
			t.Errorf("LocalURL(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	c := &Config{Listen: "0.0.0.0:8080"}
	if got, want := c.LinkBase(), "http://127.0.0.1:8080"; got != want {
		t.Errorf("LinkBase without public_url = %q, want %q", got, want)
	}
	if got, want := c.ConsoleURL("[::]:41234"), "http://127.0.0.1:41234/ui/"; got != want {
		t.Errorf("ConsoleURL = %q, want %q (the address listened at, not listen)", got, want)
	}
	c.Web.PublicURL = "https://countersign.example/"
	if got, want := c.LinkBase(), "https://countersign.example"; got != want {
		t.Errorf("LinkBase = %q, want %q", got, want)
	}
	if got, want := c.ConsoleURL("127.0.0.1:1"), "https://countersign.example/ui/"; got != want {
		t.Errorf("ConsoleURL = %q, want %q", got, want)
	}
}

// TestOverrideListen: the flag wins over the environment, which wins over
// the file; each is checked under its own name.
func TestOverrideListen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag, env, want, wantErr string
	}{
		{"", "", "127.0.0.1:0", ""},
		{"", "127.0.0.1:9999", "127.0.0.1:9999", ""},
		{"127.0.0.1:7777", "127.0.0.1:9999", "127.0.0.1:7777", ""},
		{"", "nowhere", "127.0.0.1:0", `$COUNTERSIGN_LISTEN: "nowhere" is not host:port`},
		{"nope", "127.0.0.1:9999", "127.0.0.1:0", `--listen: "nope" is not host:port`},
	} {
		c := &Config{Listen: "127.0.0.1:0"}
		err := c.OverrideListen(tc.flag, tc.env)
		if c.Listen != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("OverrideListen(%q, %q): listen %q, %v; want %q and %q", tc.flag, tc.env, c.Listen, err, tc.want, tc.wantErr)
		}
	}
}
