package actiontools

import (
	"net/url"
	"testing"
)

func TestCallbackAllowMatchesSchemeHostAndPort(t *testing.T) {
	cases := []struct {
		entry string
		ok    []string
		no    []string
	}{
		{"agent.example", []string{"http://agent.example/cb", "https://AGENT.example/x", "https://agent.example:443/"}, []string{"http://agent.example:8080/cb", "https://agent.example:8443/", "http://agent.example.evil/"}},
		{"agent.example:8443", []string{"https://agent.example:8443/cb", "http://agent.example:8443/"}, []string{"https://agent.example/cb", "https://agent.example:8444/"}},
		{"https://agent.example/callbacks", []string{"https://agent.example/callbacks", "https://agent.example/callbacks/1", "https://agent.example:443/callbacks/x"}, []string{"http://agent.example/callbacks/1", "https://agent.example/callbacksX", "https://agent.example/other", "https://agent.example/callbacks/../admin", "https://agent.example/callbacks/%2e%2e/admin"}},
		{"http://127.0.0.1:9000/", []string{"http://127.0.0.1:9000/anything"}, []string{"http://127.0.0.1:9001/", "https://127.0.0.1:9000/"}},
		{"[::1]:9000", []string{"http://[::1]:9000/cb"}, []string{"http://[::1]:9001/cb"}},
		{"::1", []string{"http://[::1]/cb"}, []string{"http://[::1]:9000/cb"}},
	}
	for _, c := range cases {
		r, err := ParseCallbackAllow(c.entry)
		if err != nil {
			t.Fatalf("%s: %v", c.entry, err)
		}
		for _, raw := range c.ok {
			if u, _ := url.Parse(raw); !r.matches(u) {
				t.Errorf("%s should allow %s", c.entry, raw)
			}
		}
		for _, raw := range c.no {
			if u, _ := url.Parse(raw); r.matches(u) {
				t.Errorf("%s should refuse %s", c.entry, raw)
			}
		}
	}
	for _, bad := range []string{"", "*", "*.example", "agent.example/cb", "ftp://agent.example", "https://u:p@agent.example/", "https://agent.example/?q=1", "agent.example:0", "agent.example:99999", "agent.example:http", "https://", ":8080"} {
		if _, err := ParseCallbackAllow(bad); err == nil {
			t.Errorf("%q can never match and must be refused", bad)
		}
	}
}
