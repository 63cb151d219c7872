package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/claudecode"
	"github.com/countersign/countersign/policy"
)

// ---- mcp and hooks (adapters for the hosts agents run in) ----

// MCPConfig tunes the MCP surface (docs/integrations.md).
type MCPConfig struct {
	// MaxCallWait bounds how long one MCP tool call may wait for a decision
	// (action_status's wait_seconds is cut to it). MCP hosts give up on a
	// call after about 60 seconds, so it must stay below that; the agent
	// gets the pending answer and polls again.
	MaxCallWait time.Duration `yaml:"max_call_wait"`
	// OAuth makes the HTTP API and MCP over HTTP an OAuth 2.1 resource
	// server beside the API keys (cmd/countersign/wire_oauth.go, docs/mcp.md). Nil: keys
	// only.
	OAuth *MCPOAuthConfig `yaml:"oauth"`
}

// MCPOAuthConfig names the authorization server whose access tokens are
// accepted, and how their subject maps to a principal.
type MCPOAuthConfig struct {
	// Issuer is the authorization server's issuer identifier; its OpenID
	// Connect discovery (or RFC 8414 metadata) names its keys.
	Issuer string `yaml:"issuer"`
	// Audience is this resource's identifier, the public URL of /mcp: a
	// token is accepted only when its aud holds it.
	Audience string `yaml:"audience"`
	// Claim names the claim that holds the subject (default email).
	Claim string `yaml:"claim"`
}

// defaultOAuthClaim is the claim mcp.oauth maps to a principal by default.
const defaultOAuthClaim = "email"

// HooksConfig configures `countersign hook` (docs/integrations.md).
type HooksConfig struct {
	ClaudeCode ClaudeCodeHookConfig `yaml:"claude_code"`
}

// ClaudeCodeHookConfig maps Claude Code's tools onto confirm_action: the
// starter policy for coding agents (client/claudecode).
type ClaudeCodeHookConfig struct {
	// ReadOnly lists the Claude Code tools allowed without asking.
	ReadOnly []string `yaml:"read_only"`
	// BashTool is the declared tool a shell command (Bash, PowerShell) is
	// confirmed as, with arguments {"command": …}.
	BashTool string `yaml:"bash_tool"`
	// DestructiveTool is the declared tool a command matching one of
	// DestructivePatterns is confirmed as.
	DestructiveTool string `yaml:"destructive_tool"`
	// ReadOnlyCommands pass without asking when a shell call is plainly
	// one of them (one simple command, no shell syntax).
	ReadOnlyCommands []string `yaml:"read_only_commands"`
	// DestructivePatterns are RE2 regular expressions matched anywhere in
	// a shell command.
	DestructivePatterns []string `yaml:"destructive_patterns"`
	// Wait bounds how long the hook waits for a decision before it hands
	// the call to the person at the terminal ("ask").
	Wait time.Duration `yaml:"wait"`
	// UserID and AgentID name the memory space of the hook's requests (a
	// key with scopes needs UserID among them); the session is the run.
	UserID  string `yaml:"user_id"`
	AgentID string `yaml:"agent_id"`
	// PublicKey is the deployment's receipt key the hook pins (hex, as
	// `countersign audit pubkey` prints it).
	PublicKey string `yaml:"public_key"`
	// StateDir keeps an allowed call's receipt until its PostToolUse.
	StateDir string `yaml:"state_dir"`
}

// Defaults of the mcp and hooks sections.
const (
	defaultMCPMaxCallWait      = 45 * time.Second
	mcpHostCallLimit           = 60 * time.Second
	defaultHookWait            = 50 * time.Second
	defaultHookBashTool        = "bash"
	defaultHookDestructiveTool = "bash_destructive"
	defaultHookAgentID         = "claude-code"
)

func (m *MCPConfig) defaults() {
	if m.MaxCallWait == 0 {
		m.MaxCallWait = defaultMCPMaxCallWait
	}
	if m.OAuth != nil && m.OAuth.Claim == "" {
		m.OAuth.Claim = defaultOAuthClaim
	}
}

func (m MCPConfig) validate(p *problems) {
	if m.MaxCallWait < time.Second || m.MaxCallWait >= mcpHostCallLimit {
		p.add("mcp.max_call_wait", "must be at least 1s and below 60s (MCP hosts give up on a call after about 60 seconds), not %s", m.MaxCallWait)
	}
	if o := m.OAuth; o != nil {
		if why := oauthURLProblem(o.Issuer); why != "" {
			p.add("mcp.oauth.issuer", "%s: the authorization server's issuer identifier, for example https://login.hospital.example", why)
		}
		if why := oauthURLProblem(o.Audience); why != "" {
			p.add("mcp.oauth.audience", "%s: this resource's public URL, as clients name it, for example https://countersign.hospital.example/mcp", why)
		}
		if strings.TrimSpace(o.Claim) == "" || strings.ContainsAny(o.Claim, " \t\n") {
			p.add("mcp.oauth.claim", "%q: name the token claim that holds the subject (email, sub, preferred_username)", o.Claim)
		}
	}
}

// oauthURLProblem says what is wrong with an issuer or audience URL: it
// must be absolute, https (http only on a loopback address, for tests),
// without a query or fragment; "" when it is fine.
func oauthURLProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return "required"
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "not an absolute URL"
	case u.RawQuery != "" || u.Fragment != "" || strings.Contains(s, "#"):
		return "must have no query or fragment"
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return "must be https (http only on a loopback address)"
	}
	return ""
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (h *HooksConfig) defaults(resolve func(string) string) {
	c := &h.ClaudeCode
	if c.ReadOnly == nil {
		c.ReadOnly = claudecode.DefaultReadOnlyTools()
	}
	if c.BashTool == "" {
		c.BashTool = defaultHookBashTool
	}
	if c.DestructiveTool == "" {
		c.DestructiveTool = defaultHookDestructiveTool
	}
	if c.ReadOnlyCommands == nil {
		c.ReadOnlyCommands = claudecode.DefaultReadOnlyCommands()
	}
	if c.DestructivePatterns == nil {
		c.DestructivePatterns = claudecode.DefaultDestructivePatterns()
	}
	if c.Wait == 0 {
		c.Wait = defaultHookWait
	}
	if c.AgentID == "" {
		c.AgentID = defaultHookAgentID
	}
	if c.StateDir != "" {
		c.StateDir = resolve(c.StateDir)
	}
}

func (h HooksConfig) validate(p *problems) {
	c := h.ClaudeCode
	const k = "hooks.claude_code."
	if w := c.Wait; w < time.Second || w > time.Hour {
		p.add(k+"wait", "must be between 1s and 1h, not %s (set the hook's timeout in settings.json above it)", w)
	}
	for i, name := range c.ReadOnly {
		if strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
			p.add(fmt.Sprintf(k+"read_only[%d]", i), "%q is not a tool name (Read, Grep, mcp__server__tool)", name)
		}
	}
	for _, f := range []struct{ key, v string }{{"bash_tool", c.BashTool}, {"destructive_tool", c.DestructiveTool}} {
		if strings.ContainsFunc(f.v, func(r rune) bool { return r <= 0x20 || r == 0x7f }) || len(f.v) > 128 {
			p.add(k+f.key, "%q is not a tool name: a declared tool's name, without spaces", f.v)
		}
	}
	for i, e := range c.ReadOnlyCommands {
		if err := claudecode.CheckCommandEntry(e); err != nil {
			p.add(fmt.Sprintf(k+"read_only_commands[%d]", i), "%v", err)
		}
	}
	if _, err := claudecode.CompilePatterns(c.DestructivePatterns); err != nil {
		p.add(k+"destructive_patterns", "%v", err)
	}
	if err := (policy.Space{UserID: orDefaultUser(c.UserID), AgentID: c.AgentID}).Check(); err != nil {
		var se *policy.SpaceError
		if errors.As(err, &se) {
			p.add(k+se.Field, "%s", se.Problem)
		}
	}
	if c.PublicKey != "" {
		if _, err := client.ParsePublicKey(c.PublicKey); err != nil {
			p.add(k+"public_key", "%v", strings.TrimPrefix(err.Error(), "countersign: "))
		}
	}
}

func orDefaultUser(u string) string {
	if u == "" {
		return policy.DefaultUserID
	}
	return u
}

// Spec is the hook's policy as client/claudecode takes it. The state
// directory is state_dir, else $XDG_STATE_HOME/countersign/claude-code,
// else ~/.local/state/countersign/claude-code (getenv reads the
// environment; "" when none of them is known).
func (c ClaudeCodeHookConfig) Spec(getenv func(string) string) claudecode.Config {
	patterns, _ := claudecode.CompilePatterns(c.DestructivePatterns) // validated by Load
	dir := c.StateDir
	switch {
	case dir != "":
	case getenv("XDG_STATE_HOME") != "":
		dir = filepath.Join(getenv("XDG_STATE_HOME"), "countersign", "claude-code")
	case getenv("HOME") != "":
		dir = filepath.Join(getenv("HOME"), ".local", "state", "countersign", "claude-code")
	}
	return claudecode.Config{
		ReadOnly: c.ReadOnly, BashTool: c.BashTool, DestructiveTool: c.DestructiveTool,
		ReadOnlyCommands: c.ReadOnlyCommands, DestructivePatterns: patterns, Wait: c.Wait,
		UserID: c.UserID, AgentID: c.AgentID, StateDir: dir,
	}
}
