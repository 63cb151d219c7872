package config

import (
	"slices"
	"strings"
	"testing"

	countersign "github.com/countersign/countersign"
	"github.com/countersign/countersign/client/claudecode"
)

// The shipped config.yaml spells out the coding-agent starter policy, and
// it is the hook library's own default: a config without a hooks section
// gets the same.
func TestShippedConfigCarriesTheCodingAgentPolicy(t *testing.T) {
	t.Parallel()
	shipped, err := Parse(countersign.DefaultConfig, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Parse([]byte("{}"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []ClaudeCodeHookConfig{shipped.Hooks.ClaudeCode, bare.Hooks.ClaudeCode} {
		if !slices.Equal(c.ReadOnly, claudecode.DefaultReadOnlyTools()) || !slices.Equal(c.ReadOnlyCommands, claudecode.DefaultReadOnlyCommands()) ||
			!slices.Equal(c.DestructivePatterns, claudecode.DefaultDestructivePatterns()) || c.BashTool != "bash" || c.DestructiveTool != "bash_destructive" || c.AgentID != "claude-code" {
			t.Errorf("hooks.claude_code: %+v, want the library's defaults", c)
		}
	}
	cats := map[string]string{}
	granted := 0
	for _, tool := range shipped.Tools {
		cats[tool.Name] = tool.Category
		if len(tool.Grants.Allow) > 0 {
			granted++
		}
	}
	if cats["bash"] != "mutating" || cats["bash_destructive"] != "destructive" {
		t.Errorf("the shipped tools bash %q, bash_destructive %q: want mutating and destructive", cats["bash"], cats["bash_destructive"])
	}
	if granted < 2 {
		t.Errorf("%d shipped tools take standing grants, want at least 2: the README's headline feature needs one to try (restart_service, bash)", granted)
	}
}

func TestHookConfigProblems(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`
hooks:
  claude_code:
    wait: 2h
    read_only: ["Bash Tool"]
    bash_tool: "my bash"
    read_only_commands: ["ls; rm"]
    destructive_patterns: ["rm -rf", "(("]
    user_id: "a\u0001b"
    public_key: "xyz"
`), t.TempDir())
	for _, want := range []string{
		"hooks.claude_code.wait: must be between 1s and 1h",
		`hooks.claude_code.read_only[0]: "Bash Tool" is not a tool name`,
		`hooks.claude_code.bash_tool: "my bash" is not a tool name`,
		`hooks.claude_code.read_only_commands[0]: "ls; rm" holds the shell character ';'`,
		`hooks.claude_code.destructive_patterns: [1] "((" is not a regular expression`,
		"hooks.claude_code.user_id: must not contain control characters",
		"hooks.claude_code.public_key: the public key is not hex",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config problems %v: missing %q", err, want)
		}
	}
}

// TestClaudeCodeSpec: the hook gets the section as its policy, with the
// destructive patterns compiled (rm -rf matches, a plain ls does not), and
// its state directory from state_dir, else $XDG_STATE_HOME, else $HOME.
func TestClaudeCodeSpec(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("{}"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Hooks.ClaudeCode
	env := map[string]string{"XDG_STATE_HOME": "/xdg", "HOME": "/home/lee"}
	spec := c.Spec(func(k string) string { return env[k] })
	if spec.BashTool != "bash" || spec.AgentID != "claude-code" || spec.Wait != c.Wait || !slices.Equal(spec.ReadOnly, c.ReadOnly) {
		t.Errorf("the spec %+v does not carry the section %+v", spec, c)
	}
	matches := func(cmd string) bool {
		for _, re := range spec.DestructivePatterns {
			if re.MatchString(cmd) {
				return true
			}
		}
		return false
	}
	if len(spec.DestructivePatterns) != len(c.DestructivePatterns) || !matches("rm -rf /var/lib/app") || matches("ls -la") {
		t.Errorf("the compiled patterns (%d of %d) do not tell rm -rf from ls", len(spec.DestructivePatterns), len(c.DestructivePatterns))
	}
	for _, tt := range []struct {
		stateDir string
		env      map[string]string
		want     string
	}{
		{"/srv/hook", env, "/srv/hook"},
		{"", env, "/xdg/countersign/claude-code"},
		{"", map[string]string{"HOME": "/home/lee"}, "/home/lee/.local/state/countersign/claude-code"},
		{"", nil, ""},
	} {
		c.StateDir = tt.stateDir
		if got := c.Spec(func(k string) string { return tt.env[k] }).StateDir; got != tt.want {
			t.Errorf("state_dir %q with %v: %q, want %q", tt.stateDir, tt.env, got, tt.want)
		}
	}
}
