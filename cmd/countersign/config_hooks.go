package main

import "time"

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

// ClaudeCodeHookConfig maps Claude Code's tools onto confirm_action.
type ClaudeCodeHookConfig struct {
	// ReadOnly lists the Claude Code tools allowed without asking.
	ReadOnly []string `yaml:"read_only"`
	// BashTool is the declared tool a Bash command is confirmed as (its
	// commands allowlist decides the category).
	BashTool string `yaml:"bash_tool"`
	// Wait bounds how long the hook waits for a decision before it hands
	// the call to the person at the terminal ("ask").
	Wait time.Duration `yaml:"wait"`
}

// Defaults of the mcp and hooks sections.
const (
	defaultMCPMaxCallWait = 45 * time.Second
	mcpHostCallLimit      = 60 * time.Second
	defaultHookWait       = 50 * time.Second
	defaultHookBashTool   = "exec"
)

var defaultHookReadOnly = []string{"Read", "Grep", "Glob", "LS", "NotebookRead", "TodoWrite"}

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

func (h *HooksConfig) defaults() {
	c := &h.ClaudeCode
	if c.ReadOnly == nil {
		c.ReadOnly = defaultHookReadOnly
	}
	if c.BashTool == "" {
		c.BashTool = defaultHookBashTool
	}
	if c.Wait == 0 {
		c.Wait = defaultHookWait
	}
}

func (h HooksConfig) validate(p *problems) {
	if w := h.ClaudeCode.Wait; w < time.Second || w > time.Hour {
		p.add("hooks.claude_code.wait", "must be between 1s and 1h, not %s (set the hook's timeout in settings.json above it)", w)
	}
}
