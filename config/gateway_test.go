package config

import (
	"os"
	"strings"
	"testing"
)

// TestGatewayConfigProblemsNameTheirKeys: every problem of gateway: is
// reported at once, each under its key path, and an unknown key is one.
func TestGatewayConfigProblemsNameTheirKeys(t *testing.T) {
	t.Parallel()
	bad := `gateway:
  upstreams:
    - name: fs_files
      command: npx
      url: https://example.test/mcp
    - name: web
      url: ftp://example.test
      headers_env: {Authorization: "not a var"}
    - name: web
      command: srv
      env: {TOKEN: "$X"}
      headers_env: {X-Token: TOKEN}
      default: {match: "*", category: read-only}
      tools:
        - {match: "read_[", category: read-only}
        - {match: "write_*", category: sideways}
        - {match: "drop_*", category: destructive, grants: {allow: [once]}}
        - {match: "x", categroy: read-only}
        - {category: mutating, quorum: -1}
tools:
  - name: web__delete
`
	_, err := Parse([]byte(bad), t.TempDir())
	if err == nil {
		t.Fatal("a bad gateway config was accepted")
	}
	for _, want := range []string{
		"gateway.upstreams[0].name: ",
		"gateway.upstreams[0]: give command or url, not both",
		"gateway.upstreams[1].url: ",
		"gateway.upstreams[1].headers_env.Authorization: ",
		"gateway.upstreams[2].name: \"web\" is declared twice",
		"gateway.upstreams[2].env.TOKEN: ",
		"gateway.upstreams[2].headers_env: is for a url upstream",
		"gateway.upstreams[2].default.match: ",
		"gateway.upstreams[2].tools[0].match: ",
		"gateway.upstreams[2].tools[1].category: ",
		"gateway.upstreams[2].tools[2].grants: ",
		"gateway.upstreams[2].tools[3].categroy: not a known key; did you mean gateway.upstreams[2].tools[3].category?",
		"gateway.upstreams[2].tools[4].match: required",
		"gateway.upstreams[2].tools[4].quorum: ",
		"tools[0].name: web__delete is served by the gateway upstream web",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

// TestGatewayLookupFollowsTheRulesOnly: a served name takes its upstream's
// first matching rule's policy, else the default, else nothing
// (unclassified: a confirmation); a name of no upstream is not declared.
func TestGatewayLookupFollowsTheRulesOnly(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`gateway:
  upstreams:
    - name: fs
      command: srv
      tools:
        - {match: "read_*", category: read-only}
        - {match: "read_secret", category: destructive}
        - {match: write_file, category: mutating, quorum: 2, approvers: {roles: [admin]}}
    - name: db
      command: srv
      default: {category: mutating}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lookup := cfg.Gateway.Lookup()
	for _, c := range []struct {
		name, category string
		quorum         int
		declared       bool
	}{
		{"fs__read_file", "read-only", 1, true},
		{"fs__read_secret", "read-only", 1, true}, // first match wins
		{"fs__write_file", "mutating", 2, true},
		{"fs__rm", "", 0, true}, // no rule, no default: unclassified
		{"db__drop", "mutating", 1, true},
		{"other__x", "", 0, false},
		{"confirm_action", "", 0, false},
	} {
		spec, ok := lookup(c.name)
		if ok != c.declared || spec.Category != c.category || spec.Quorum != c.quorum {
			t.Errorf("lookup(%s) = %q quorum %d declared %v, want %q quorum %d declared %v", c.name, spec.Category, spec.Quorum, ok, c.category, c.quorum, c.declared)
		}
	}
	if spec, _ := lookup("fs__write_file"); len(spec.Approvers.Roles) != 1 || spec.Approvers.Roles[0] != "admin" {
		t.Errorf("fs__write_file approvers %v, want [admin]", spec.Approvers)
	}
}

// TestConfigYAMLGatewayExampleLoads: the commented gateway: example of
// config.yaml loads once uncommented.
func TestConfigYAMLGatewayExampleLoads(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n# gateway:\n")
	if !ok {
		t.Fatal("config.yaml has no commented gateway: example")
	}
	block := "gateway:\n"
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "#   ") {
			break
		}
		block += strings.TrimPrefix(line, "# ") + "\n"
	}
	cfg, err := Parse([]byte(block), t.TempDir())
	if err != nil {
		t.Fatalf("the example does not load: %v\n%s", err, block)
	}
	if len(cfg.Gateway.Upstreams) != 2 || cfg.Gateway.Upstreams[0].Name != "fs" || cfg.Gateway.Upstreams[1].URL == "" {
		t.Fatalf("the example loaded as %+v, want 2 upstreams, the first fs, the second with a URL", cfg.Gateway)
	}
}
