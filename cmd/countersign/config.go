package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	countersign "github.com/countersign/countersign"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"
)

// Config is config.yaml. Unknown keys are errors; secrets are never in the
// file, only the names of the environment variables that hold them.
type Config struct {
	Listen       string          `yaml:"listen"`
	Store        StoreConfig     `yaml:"store"`
	Audit        AuditConfig     `yaml:"audit"`
	AuthRequired bool            `yaml:"auth_required"`
	HTTP         HTTPConfig      `yaml:"http"`
	Memory       MemoryConfig    `yaml:"memory"`
	Tools        []ToolConfig    `yaml:"tools"`
	ToolPolicy   ToolPolicy      `yaml:"tool_policy"`
	Approvals    ApprovalsConfig `yaml:"approvals"`
	Callbacks    CallbackConfig  `yaml:"callbacks"`
	Slack        *SlackConfig    `yaml:"slack"`
	Discord      *DiscordConfig  `yaml:"discord"`
	Principals   []PrincipalDecl `yaml:"principals"`
	Sweep        SweepConfig     `yaml:"sweep"`
	Log          LogConfig       `yaml:"log"`

	// dir is the directory relative paths in the file resolve against.
	dir string
	// schema is the parsed slot schema (from slot_schema or slots).
	schema *memory.Schema
}

// StoreConfig is the store section.
type StoreConfig struct {
	Path string `yaml:"path"`
	// GroupCommit merges concurrent writes into one durable commit (one
	// fsync for many callers; a lone writer still pays one commit). Each
	// write is still acknowledged only once it is on disk. Default true.
	GroupCommit *bool `yaml:"group_commit"`
	// SyncFreelist writes the store's freelist with every commit, so that
	// start-up reads it instead of scanning the whole file (about 0.6 s per
	// GiB). Turn it off only for a heavily fragmented file (a large part
	// deleted) whose writes slow down: each commit then writes one page
	// less, and start-up scans. Default true.
	SyncFreelist *bool `yaml:"sync_freelist"`
}

// groupCommit reports whether group commit is on (the default).
func (s StoreConfig) groupCommit() bool { return s.GroupCommit == nil || *s.GroupCommit }

// syncFreelist reports whether the freelist is written with every commit
// (the default).
func (s StoreConfig) syncFreelist() bool { return s.SyncFreelist == nil || *s.SyncFreelist }

// AuditConfig is the audit section.
type AuditConfig struct {
	// SigningKey is the Ed25519 key file; created on first start (mode 0600)
	// when missing. Default: the store path plus ".sign.key".
	SigningKey string `yaml:"signing_key"`
	// ReadVerdicts is how the audit entries of read-only answers
	// (check_before_act, safe_recall, recall) are recorded: "queued" (the
	// default: answered after a read transaction, the entry committed by a
	// background appender within milliseconds; a crash may lose the entries
	// still queued, and the next start records unclean_restart) or
	// "durable" (each answer waits for its own durable commit). Writes and
	// decisions are always audited in their own durable transaction.
	ReadVerdicts string `yaml:"read_verdicts"`
	// ReadQueueSize bounds the read entries waiting to be committed (what a
	// crash can lose). Default 1024.
	ReadQueueSize int `yaml:"read_queue_size"`
	// ReadQueueWait is how long a read answer waits for room in a full
	// queue before it is refused (BLOCKED / WITHHELD: "audit backlog").
	// Default 50ms.
	ReadQueueWait time.Duration `yaml:"read_queue_wait"`
}

// readAudit is the audit section's read-audit options.
func (a AuditConfig) readAudit() bot.ReadAuditOptions {
	return bot.ReadAuditOptions{Mode: a.ReadVerdicts, Size: a.ReadQueueSize, Wait: a.ReadQueueWait}
}

// HTTPConfig hardens the HTTP listener.
type HTTPConfig struct {
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	RatePerMinute     int           `yaml:"rate_per_minute"`
	RateBurst         int           `yaml:"rate_burst"`
	AllowedHosts      []string      `yaml:"allowed_hosts"`
	AllowedOrigins    []string      `yaml:"allowed_origins"`
	MetricsTokenEnv   string        `yaml:"metrics_token_env"`
}

// MemoryConfig is the memory section.
type MemoryConfig struct {
	SlotSchema         string        `yaml:"slot_schema"`
	Slots              []memory.Slot `yaml:"slots"`
	CriticalCategories []string      `yaml:"critical_categories"`
	CriticalBudget     int           `yaml:"critical_budget"`
	RecallContext      int           `yaml:"recall_context"`
	TrustedSources     []string      `yaml:"trusted_sources"`
	// ProposalMaxAge closes a memory proposal left undecided this long (0: never).
	ProposalMaxAge time.Duration `yaml:"proposal_max_age"`
}

// ToolConfig declares one agent tool that goes through the confirm gate.
type ToolConfig struct {
	Name      string         `yaml:"name"`
	Category  string         `yaml:"category"`
	Schema    map[string]any `yaml:"schema"`
	Approvers ApproversDecl  `yaml:"approvers"`
	Quorum    int            `yaml:"quorum"`
	Timeout   time.Duration  `yaml:"timeout"`
	Channels  []string       `yaml:"channels"`
	Sensitive bool           `yaml:"sensitive"`
	// Commands is the allowlist of an exec-style tool: only these binaries
	// (or binary plus subcommand) may run; anything else is refused.
	Commands []CommandDecl `yaml:"commands"`
}

// ApproversDecl names who may approve a tool's requests.
type ApproversDecl struct {
	Roles      []string `yaml:"roles"`
	Principals []string `yaml:"principals"`
}

// CommandDecl is one allowlisted command of an exec-style tool.
type CommandDecl struct {
	Command  string `yaml:"command"` // "kubectl get"
	Category string `yaml:"category"`
}

// ToolPolicy holds gate-wide rules.
type ToolPolicy struct {
	// ReadOnlyPrefixes treats undeclared tools named get_, find_, list_,
	// search_, read_ or fetch_ as read-only (the MCP heuristic). Off by default.
	ReadOnlyPrefixes bool `yaml:"read_only_prefixes"`
}

// ApprovalsConfig holds the lifecycle defaults of action requests.
type ApprovalsConfig struct {
	DefaultTimeout    time.Duration `yaml:"default_timeout"`
	RemindAfter       time.Duration `yaml:"remind_after"`
	EscalateAfter     time.Duration `yaml:"escalate_after"`
	EscalationChannel string        `yaml:"escalation_channel"`
	EscalationRole    string        `yaml:"escalation_role"`
}

// CallbackConfig governs signed callbacks to agents.
type CallbackConfig struct {
	SecretEnv    string   `yaml:"secret_env"`
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// SlackConfig is the slack section; absent means Slack is off.
type SlackConfig struct {
	Mode             string            `yaml:"mode"`
	BotTokenEnv      string            `yaml:"bot_token_env"`
	SigningSecretEnv string            `yaml:"signing_secret_env"`
	AppTokenEnv      string            `yaml:"app_token_env"`
	APIURL           string            `yaml:"api_url"`
	Channels         map[string]string `yaml:"channels"`
}

// DiscordConfig is the discord section; absent means Discord is off.
type DiscordConfig struct {
	Mode          string            `yaml:"mode"`
	BotTokenEnv   string            `yaml:"bot_token_env"`
	PublicKeyEnv  string            `yaml:"public_key_env"`
	ApplicationID string            `yaml:"application_id"`
	GuildID       string            `yaml:"guild_id"`
	APIURL        string            `yaml:"api_url"`
	Channels      map[string]string `yaml:"channels"`
}

// PrincipalDecl maps chat identities to a principal who decides from chat.
type PrincipalDecl struct {
	Name         string   `yaml:"name"`
	Role         string   `yaml:"role"`
	Slack        string   `yaml:"slack"`
	Discord      string   `yaml:"discord"`
	DiscordRoles []string `yaml:"discord_roles"`
}

// SweepConfig schedules the sweeper.
type SweepConfig struct {
	Schedule string `yaml:"schedule"`
}

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string `yaml:"format"` // text or json
	Level  string `yaml:"level"`  // debug, info, warn, error
}

// loadConfig reads path, or the embedded default when path is empty.
// Every problem is reported at once as "key: problem".
func loadConfig(path string) (*Config, error) {
	data, dir := countersign.DefaultConfig, "."
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		data, dir = b, filepath.Dir(path)
	}
	cfg, err := parseConfig(data, dir)
	if err != nil {
		name := path
		if name == "" {
			name = "embedded default config"
		}
		return nil, fmt.Errorf("config %s:\n%w", name, err)
	}
	return cfg, nil
}

func parseConfig(data []byte, dir string) (*Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlProblems(err)
	}
	cfg.dir = dir
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// yamlProblems turns yaml.v3's multi-line TypeError into one problem a line.
func yamlProblems(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		errs := make([]error, len(te.Errors))
		for i, e := range te.Errors {
			errs[i] = errors.New(strings.Replace(e, "not found in type main.", "is not a known key of ", 1))
		}
		return errors.Join(errs...)
	}
	return fmt.Errorf("not valid YAML: %v", strings.TrimPrefix(err.Error(), "yaml: "))
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.Store.Path == "" {
		c.Store.Path = "countersign.db"
	}
	c.Store.Path = c.resolve(c.Store.Path)
	if c.Audit.SigningKey == "" {
		c.Audit.SigningKey = c.Store.Path + ".sign.key"
	} else {
		c.Audit.SigningKey = c.resolve(c.Audit.SigningKey)
	}
	if c.Audit.ReadVerdicts == "" {
		c.Audit.ReadVerdicts = bot.ReadAuditQueued
	}
	if c.Audit.ReadQueueSize == 0 {
		c.Audit.ReadQueueSize = bot.DefaultReadQueueSize
	}
	if c.Audit.ReadQueueWait == 0 {
		c.Audit.ReadQueueWait = bot.DefaultReadQueueWait
	}
	h := &c.HTTP
	if h.MaxBodyBytes == 0 {
		h.MaxBodyBytes = 1 << 20
	}
	if h.ReadHeaderTimeout == 0 {
		h.ReadHeaderTimeout = 5 * time.Second
	}
	if h.ReadTimeout == 0 {
		h.ReadTimeout = 30 * time.Second
	}
	if h.IdleTimeout == 0 {
		h.IdleTimeout = 120 * time.Second
	}
	if h.RatePerMinute == 0 {
		h.RatePerMinute = 600
	}
	if h.RateBurst == 0 {
		h.RateBurst = 60
	}
	m := &c.Memory
	if m.CriticalBudget == 0 {
		m.CriticalBudget = 200
	}
	if m.RecallContext == 0 {
		m.RecallContext = 40
	}
	if c.Approvals.DefaultTimeout == 0 {
		c.Approvals.DefaultTimeout = 30 * time.Minute
	}
	for i := range c.Tools {
		if c.Tools[i].Quorum == 0 {
			c.Tools[i].Quorum = 1
		}
		if c.Tools[i].Timeout == 0 {
			c.Tools[i].Timeout = c.Approvals.DefaultTimeout
		}
	}
	if c.Sweep.Schedule == "" {
		c.Sweep.Schedule = "@every 1m"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Slack != nil && c.Slack.APIURL == "" {
		c.Slack.APIURL = "https://slack.com/api/"
	}
	if c.Discord != nil && c.Discord.APIURL == "" {
		c.Discord.APIURL = "https://discord.com/api/v10/"
	}
}

func (c *Config) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

// validate reports every problem of the decoded config at once.
func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port (for example 127.0.0.1:8080)", c.Listen)
	}
	if v := c.Audit.ReadVerdicts; v != bot.ReadAuditQueued && v != bot.ReadAuditDurable {
		bad("audit.read_verdicts", "%q is not queued or durable", v)
	}
	if c.Audit.ReadQueueSize < 1 {
		bad("audit.read_queue_size", "must be at least 1")
	}
	if c.Audit.ReadQueueWait < 0 {
		bad("audit.read_queue_wait", "must not be negative")
	}
	if c.HTTP.MaxBodyBytes < 1024 {
		bad("http.max_body_bytes", "must be at least 1024")
	}
	if c.HTTP.RatePerMinute < 0 || c.HTTP.RateBurst < 0 {
		bad("http.rate_per_minute", "must not be negative")
	}
	m := c.Memory
	if m.CriticalBudget < 1 {
		bad("memory.critical_budget", "must be at least 1")
	}
	if m.RecallContext < 1 {
		bad("memory.recall_context", "must be at least 1")
	}
	if m.SlotSchema != "" && len(m.Slots) > 0 {
		bad("memory.slot_schema", "set either slot_schema (a file) or slots (inline), not both")
	}
	switch {
	case m.SlotSchema != "":
		path := c.resolve(m.SlotSchema)
		f, err := os.Open(path)
		if err != nil {
			bad("memory.slot_schema", "cannot read %s: %v", path, errors.Unwrap(err))
			break
		}
		s, err := memory.ParseSchema(f)
		f.Close()
		if err != nil {
			bad("memory.slot_schema", "%s: %v", path, err)
			break
		}
		c.schema = s
	default:
		s, err := memory.NewSchema(m.Slots)
		if err != nil {
			bad("memory.slots", "%v", err)
			break
		}
		c.schema = s
	}
	names := map[string]bool{}
	for i, t := range c.Tools {
		key := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			bad(key+".name", "required")
		} else if names[t.Name] {
			bad(key+".name", "%q is declared twice", t.Name)
		}
		names[t.Name] = true
		switch t.Category {
		case "read-only", "mutating", "destructive":
		case "":
			// an unset category is confirm: the safe default, said in the docs
		default:
			bad(key+".category", "%q is not a category; use read-only, mutating or destructive", t.Category)
		}
		if t.Quorum < 1 {
			bad(key+".quorum", "must be at least 1")
		}
		if t.Timeout < 0 {
			bad(key+".timeout", "must not be negative")
		}
		for j, r := range t.Approvers.Roles {
			if _, err := policy.ParseRole(r); err != nil {
				bad(fmt.Sprintf("%s.approvers.roles[%d]", key, j), "%v", err)
			} else if !policy.Grants(policy.Role(strings.ToLower(r)), policy.CapApprove) {
				bad(fmt.Sprintf("%s.approvers.roles[%d]", key, j), "role %q cannot approve; only admin and member hold the approve capability", r)
			}
		}
		for j, cmd := range t.Commands {
			ck := fmt.Sprintf("%s.commands[%d]", key, j)
			if strings.TrimSpace(cmd.Command) == "" {
				bad(ck+".command", "required")
			}
			switch cmd.Category {
			case "read-only", "mutating", "destructive":
			default:
				bad(ck+".category", "%q is not a category; use read-only, mutating or destructive", cmd.Category)
			}
		}
		for j, ch := range t.Channels {
			if !c.channelKnown(ch) {
				bad(fmt.Sprintf("%s.channels[%d]", key, j), "channel %q is not defined under slack.channels or discord.channels", ch)
			}
		}
	}
	for i, s := range c.schema.Slots() {
		if s.Channel != "" && !c.channelKnown(s.Channel) {
			bad(fmt.Sprintf("memory.slots[%d].channel", i), "channel %q is not defined under slack.channels or discord.channels", s.Channel)
		}
	}
	if c.Slack != nil {
		s := c.Slack
		switch s.Mode {
		case "http":
			if s.SigningSecretEnv == "" {
				bad("slack.signing_secret_env", "required in http mode")
			}
		case "socket":
			if s.AppTokenEnv == "" {
				bad("slack.app_token_env", "required in socket mode")
			}
		default:
			bad("slack.mode", "%q is not a mode; use http or socket", s.Mode)
		}
		if s.BotTokenEnv == "" {
			bad("slack.bot_token_env", "required")
		}
		if !strings.HasSuffix(s.APIURL, "/") {
			bad("slack.api_url", "must end with '/'")
		}
		if s.Channels["default"] == "" {
			bad("slack.channels.default", "required: memory proposals and consent requests go there")
		}
	}
	if c.Discord != nil {
		d := c.Discord
		switch d.Mode {
		case "http":
			if d.PublicKeyEnv == "" {
				bad("discord.public_key_env", "required in http mode")
			}
		case "gateway":
		default:
			bad("discord.mode", "%q is not a mode; use http or gateway", d.Mode)
		}
		if d.BotTokenEnv == "" {
			bad("discord.bot_token_env", "required")
		}
		if !strings.HasSuffix(d.APIURL, "/") {
			bad("discord.api_url", "must end with '/'")
		}
		if d.Channels["default"] == "" {
			bad("discord.channels.default", "required: memory proposals and consent requests go there")
		}
	}
	seen := map[string]bool{}
	for i, p := range c.Principals {
		key := fmt.Sprintf("principals[%d]", i)
		if p.Name == "" {
			bad(key+".name", "required")
		} else if seen[p.Name] {
			bad(key+".name", "%q is declared twice", p.Name)
		}
		seen[p.Name] = true
		if _, err := policy.ParseRole(p.Role); err != nil {
			bad(key+".role", "%v", err)
		}
		if p.Slack == "" && p.Discord == "" && len(p.DiscordRoles) == 0 {
			bad(key, "maps no chat identity; set slack, discord or discord_roles")
		}
	}
	if _, err := cron.ParseStandard(c.Sweep.Schedule); err != nil {
		bad("sweep.schedule", "%q: %v (for example \"@every 1m\" or \"*/5 * * * *\")", c.Sweep.Schedule, err)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "%q: use text or json", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "%q: use debug, info, warn or error", c.Log.Level)
	}
	return errors.Join(errs...)
}

// channelKnown reports whether a channel name is defined on any platform.
// With no platform configured every name is accepted (nothing is posted).
func (c *Config) channelKnown(name string) bool {
	if c.Slack == nil && c.Discord == nil {
		return true
	}
	if c.Slack != nil && c.Slack.Channels[name] != "" {
		return true
	}
	return c.Discord != nil && c.Discord.Channels[name] != ""
}
