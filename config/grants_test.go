package config

import (
	"strings"
	"testing"
)

// TestConfigGrantsRefused: grants on a destructive tool, on a tool with a
// destructive command or a quorum, without max, of an unknown kind, or
// under a misspelt key stop start-up with the key named.
func TestConfigGrantsRefused(t *testing.T) {
	t.Parallel()
	bad := `
tools:
  - name: drop_table
    category: destructive
    grants: {max: 8h, allow: [once]}
  - name: sh
    category: mutating
    commands: [{command: rm, category: destructive}]
    grants: {max: 1h, allow: [session]}
  - name: rollback
    category: mutating
    quorum: 2
    grants: {max: 1h, allow: [duration]}
  - name: restart
    category: mutating
    grants: {allow: [always]}
`
	_, err := Parse([]byte(bad), t.TempDir())
	if err == nil {
		t.Fatal("a config with grants on a destructive tool loaded")
	}
	for _, want := range []string{
		"tools[0].grants: drop_table is destructive, and a destructive tool never takes standing grants",
		`tools[1].grants: the command "rm" of sh is destructive`,
		"tools[2].grants: rollback needs a quorum of 2",
		"tools[3].grants.max: required when grants are allowed",
		`tools[3].grants.allow[0]: "always" is not a grant kind`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in:\n%v", want, err)
		}
	}
	_, err = Parse([]byte("tools:\n  - name: r\n    grants: {max: 1h, alow: [once]}\n"), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "alow") {
		t.Fatalf("a misspelt grants key: %v, want an error naming %q", err, "alow")
	}
	cfg, err := Parse([]byte("tools:\n  - name: r\n    category: mutating\n    grants: {max: 8h, allow: [once, session, duration]}\n"), t.TempDir())
	if err != nil {
		t.Fatalf("a valid grants config: %v", err)
	}
	if g := cfg.Tools[0].Grants; g.Max.Hours() != 8 || len(g.Allow) != 3 {
		t.Fatalf("decoded grants = %+v, want max 8h and 3 allowed", g)
	}
}
