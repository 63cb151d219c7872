package main

import (
	"errors"
	"fmt"
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
}

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
}

func (m MCPConfig) validate(p *problems) {
	if m.MaxCallWait < time.Second || m.MaxCallWait >= mcpHostCallLimit {
		p.add("mcp.max_call_wait", "must be at least 1s and below 60s (MCP hosts give up on a call after about 60 seconds), not %s", m.MaxCallWait)
	}
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
