package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	countersign "github.com/countersign/countersign"
	"github.com/countersign/countersign/adapters/bolt"
	slackadapter "github.com/countersign/countersign/adapters/slack"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
	"github.com/robfig/cron/v3"
)

// Config is config.yaml. A file given with --config (or ./config.yaml) is
// read on its own, not layered over the embedded default: what the file says
// is what runs (docs/configuration.md says why, and `countersign init` writes
// the default as a starting point). Unknown keys are errors; secrets are
// never in the file, only the names of the environment variables that hold
// them.
//
// Loading has four steps, each in its own function: decode (decode.go:
// every unknown key and wrong type named by its key path), defaults (each
// section's defaults method), validation (each section's validate method:
// pure, it reads no file) and loading the files the config names
// (loadFiles). Every problem of every step is reported at once.
type Config struct {
	// One field per section, each on its own paragraph, so that a new
	// section is one added paragraph (gofmt aligns nothing across them).

	Listen string `yaml:"listen"`

	Store StoreConfig `yaml:"store"`

	Audit AuditConfig `yaml:"audit"`

	AuthRequired bool `yaml:"auth_required"`

	HTTP HTTPConfig `yaml:"http"`

	Memory MemoryConfig `yaml:"memory"`

	Groups map[string][]string `yaml:"groups"` // policy.go

	OnCall map[string]RotationDecl `yaml:"oncall"` // policy.go

	Tools []ToolConfig `yaml:"tools"`

	ToolPolicy ToolPolicy `yaml:"tool_policy"`

	StepUp StepUpConfig `yaml:"step_up"` // stepup.go

	BreakGlass BreakGlassConfig `yaml:"break_glass"` // breakglass.go

	Approvals ApprovalsConfig `yaml:"approvals"`

	Callbacks CallbackConfig `yaml:"callbacks"`

	SoftApproval SoftApprovalConfig `yaml:"soft_approval"`

	Slack *SlackConfig `yaml:"slack"`

	Discord *DiscordConfig `yaml:"discord"`

	Teams *TeamsConfig `yaml:"teams"` // teams.go

	Email *EmailConfig `yaml:"email"` // email.go

	SCIM *SCIMConfig `yaml:"scim"` // scim.go

	Principals []PrincipalDecl `yaml:"principals"`

	Web WebConfig `yaml:"web"` // web.go

	Sweep SweepConfig `yaml:"sweep"`

	Retention RetentionConfig `yaml:"retention"` // retention.go

	Log LogConfig `yaml:"log"`

	Limits LimitsConfig `yaml:"limits"` // limits.go

	MCP MCPConfig `yaml:"mcp"` // hooks.go

	Hooks HooksConfig `yaml:"hooks"` // hooks.go

	Gateway GatewayConfig `yaml:"gateway"` // gateway.go

	// source names where the config came from: the file's path, or
	// "embedded default". Logged at start.
	source string
	// dir is the directory relative paths in the file resolve against.
	dir string
	// schema is the parsed slot schema (from slot_schema or slots), set by
	// loadFiles.
	schema *memory.Schema
}

// embeddedSource is Config.source for the embedded default.
const embeddedSource = "embedded default"

// Load reads path, or the embedded default when path is empty.
// Every problem is reported at once as "key: problem".
func Load(path string) (*Config, error) {
	data, dir, source := countersign.DefaultConfig, ".", embeddedSource
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		data, dir, source = b, filepath.Dir(path), path
	}
	cfg, err := Parse(data, dir)
	if err != nil {
		return nil, fmt.Errorf("config %s:\n%w", source, err)
	}
	cfg.source = source
	return cfg, nil
}

// Parse decodes, completes, validates and loads a config whose
// relative paths resolve against dir.
func Parse(data []byte, dir string) (*Config, error) {
	cfg := &Config{dir: dir, source: embeddedSource}
	p := &problems{}
	if err := decodeConfig(data, cfg, p); err != nil {
		return nil, err // not YAML at all: nothing else can be checked
	}
	cfg.applyDefaults()
	cfg.validate(p)
	cfg.loadFiles(p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// problems collects "key: problem" lines, so that every problem of a config
// is reported at once.
type problems struct{ errs []error }

// add records one problem under a key path.
func (p *problems) add(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// err is every problem joined, or nil.
func (p *problems) err() error { return errors.Join(p.errs...) }

// applyDefaults fills every unset key with its default, section by section.
func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	c.Store.defaults(c.resolve)
	c.Audit.defaults(c.Store.Path, c.resolve)
	c.HTTP.defaults()
	c.Memory.defaults()
	c.Approvals.defaults()
	for i := range c.Tools {
		c.Tools[i].defaults(c.Approvals.DefaultTimeout)
	}
	c.StepUp.defaults()
	c.BreakGlass.defaults()
	c.Sweep.defaults()
	c.Retention.defaults()
	c.Log.defaults()
	c.Limits.defaults()
	c.MCP.defaults()
	c.Hooks.defaults(c.resolve)
	c.Gateway.defaults(c.Approvals.DefaultTimeout)
	if c.Slack != nil {
		c.Slack.defaults()
	}
	if c.Discord != nil {
		c.Discord.defaults()
	}
	if c.Teams != nil {
		c.Teams.defaults()
	}
	if c.SCIM != nil {
		c.SCIM.defaults()
	}
	if c.Email != nil {
		c.Email.defaults()
	}
}

// validate reports every problem of the decoded config, section by
// section. It reads no file (loadFiles does).
func (c *Config) validate(p *problems) {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		p.add("listen", "%q is not host:port (for example 127.0.0.1:8080)", c.Listen)
	}
	c.Store.validate(p)
	c.Audit.validate(p)
	c.Audit.Anchor.validate(p, c.Store)
	c.HTTP.validate(p)
	c.Memory.validate(p)
	names := map[string]bool{}
	for i, t := range c.Tools {
		key := fmt.Sprintf("tools[%d]", i)
		if t.Name != "" && names[t.Name] {
			p.add(key+".name", "%q is declared twice", t.Name)
		}
		names[t.Name] = true
		t.validate(key, c.channelKnown, p)
	}
	if c.Slack != nil {
		c.Slack.validate(p)
		for i, pr := range c.Principals {
			if strings.TrimSpace(pr.Slack) == "" {
				continue
			}
			if _, err := slackadapter.QualifiedUser(pr.Slack, strings.TrimSpace(c.Slack.TeamID)); err != nil {
				p.add(fmt.Sprintf("principals[%d].slack", i), "%v", err)
			}
		}
	}
	if c.Discord != nil {
		c.Discord.validate(p)
	}
	if c.Teams != nil {
		c.Teams.validate(p)
	}
	if c.SCIM != nil {
		c.SCIM.validate(p)
	}
	if c.Email != nil {
		c.Email.validate(c, p)
	}
	seen := map[string]bool{}
	for i, pr := range c.Principals {
		key := fmt.Sprintf("principals[%d]", i)
		if pr.Name != "" && seen[pr.Name] {
			p.add(key+".name", "%q is declared twice", pr.Name)
		}
		seen[pr.Name] = true
		pr.validate(key, p)
	}
	if ps, err := c.People(); err == nil { // else reported above, by key
		if _, err := bot.NewDirectory(ps); err != nil {
			p.add("principals", "%v; map each chat identity to exactly one principal", err)
		}
	}
	c.SoftApproval.validate(p)
	validateLadder(c, p)       // email.go
	validateOnCallLadder(c, p) // delegation.go
	c.Web.validate(c.Principals, p)
	c.StepUp.validate(c.Tools, c.Web, p) // stepup.go
	c.validatePolicy(p)                  // policy.go
	c.BreakGlass.validate(c, p)          // breakglass.go
	c.Sweep.validate(p)
	c.Retention.validate(p)
	c.Log.validate(p)
	c.Limits.validate(p)
	c.Callbacks.validate(p) // callbacks.go
	c.MCP.validate(p)       // hooks.go
	c.Hooks.validate(p)
	c.Gateway.validate(c, p) // gateway.go
}

// loadFiles reads the files the config names (the slot schema) and checks
// what depends on their content. Its problems join the others.
func (c *Config) loadFiles(p *problems) {
	m := c.Memory
	switch {
	case m.SlotSchema != "" && len(m.Slots) > 0:
		// reported by MemoryConfig.validate
	case m.SlotSchema != "":
		path := c.resolve(m.SlotSchema)
		f, err := os.Open(path)
		if err != nil {
			p.add("memory.slot_schema", "cannot read %s: %v", path, errors.Unwrap(err))
			return
		}
		s, err := memory.ParseSchema(f)
		f.Close()
		if err != nil {
			p.add("memory.slot_schema", "%s: %v", path, err)
			return
		}
		c.schema = s
	default:
		s, err := memory.NewSchema(m.Slots)
		if err != nil {
			p.add("memory.slots", "%v", err)
			return
		}
		c.schema = s
	}
	if c.schema == nil {
		return
	}
	for i, s := range c.schema.Slots() {
		if s.Channel != "" && !c.channelKnown(s.Channel) {
			p.add(fmt.Sprintf("memory.slots[%d].channel", i), "channel %q is not defined under slack.channels, discord.channels or teams.channels", s.Channel)
		}
	}
}

// GatedSlots names the declared memory slots whose changes need an
// approval (confirm: true).
func (c *Config) GatedSlots() []string {
	var out []string
	if c.schema == nil {
		return out
	}
	for _, s := range c.schema.Slots() {
		if s.Confirm {
			out = append(out, s.Name)
		}
	}
	return out
}

// Source names where the config came from: the file's path, or
// "embedded default".
func (c *Config) Source() string { return c.source }

// Schema is the parsed slot schema (memory.slot_schema or memory.slots).
func (c *Config) Schema() *memory.Schema { return c.schema }

// Sinks are the outbox consumers the configuration turns on.
func (c *Config) Sinks() []string {
	var s []string
	if c.Slack != nil {
		s = append(s, "slack")
	}
	if c.Discord != nil {
		s = append(s, "discord")
	}
	if c.Teams != nil {
		s = append(s, "teams")
	}
	if c.Email != nil {
		s = append(s, "email")
	}
	return s
}

// resolve makes a relative path relative to the config file's directory.
func (c *Config) resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir, p)
}

// channelKnown reports whether a channel name is defined on any platform.
// With no platform configured every name is accepted (nothing is posted).
func (c *Config) channelKnown(name string) bool {
	if c.Slack == nil && c.Discord == nil && c.Teams == nil {
		return true
	}
	if c.Slack != nil && c.Slack.Channels[name] != "" {
		return true
	}
	if c.Teams != nil && c.Teams.Channels[name] != "" {
		return true
	}
	return c.Discord != nil && c.Discord.Channels[name] != ""
}

// ---- store ----

// StoreConfig is the store section.
type StoreConfig struct {
	// Engine is bbolt (one process on a file, the default) or postgres
	// (any number of replicas on one database: cmd/countersign/store.go).
	Engine   string         `yaml:"engine"`
	Postgres PostgresConfig `yaml:"postgres"`
	Path     string         `yaml:"path"`
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

func (s *StoreConfig) defaults(resolve func(string) string) {
	if s.Path == "" {
		s.Path = "countersign.db"
	}
	s.Path = resolve(s.Path)
	s.engineDefaults()
}

// GroupCommitOn reports whether group commit is on (the default).
func (s StoreConfig) GroupCommitOn() bool { return s.GroupCommit == nil || *s.GroupCommit }

// SyncFreelistOn reports whether the freelist is written with every commit
// (the default).
func (s StoreConfig) SyncFreelistOn() bool { return s.SyncFreelist == nil || *s.SyncFreelist }

// BoltOptions are the bbolt options of serve and of every command that
// writes the store: group commit and the freelist's sync as the section
// says, and the append-only buckets bot and memory name
// (SequentialBuckets), whose pages are filled instead of split in half.
func (s StoreConfig) BoltOptions() bolt.Options {
	return bolt.Options{
		GroupCommit:    s.GroupCommitOn(),
		NoFreelistSync: !s.SyncFreelistOn(),
		Sequential:     append(bot.SequentialBuckets(), memory.SequentialBuckets()...),
	}
}

// ---- audit ----

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
	// Anchor writes the chain's signed head outside the store
	// (anchor.go).
	Anchor AnchorConfig `yaml:"anchor"`
	// NewSigningKey is serve's --new-signing-key, not a key of the file:
	// rotate to a new key when the configured one is missing or is not the
	// chain's.
	NewSigningKey bool `yaml:"-"`
}

func (a *AuditConfig) defaults(storePath string, resolve func(string) string) {
	if a.SigningKey == "" {
		a.SigningKey = storePath + ".sign.key"
	} else {
		a.SigningKey = resolve(a.SigningKey)
	}
	if a.ReadVerdicts == "" {
		a.ReadVerdicts = bot.ReadAuditQueued
	}
	if a.ReadQueueSize == 0 {
		a.ReadQueueSize = bot.DefaultReadQueueSize
	}
	if a.ReadQueueWait == 0 {
		a.ReadQueueWait = bot.DefaultReadQueueWait
	}
	a.Anchor.defaults(resolve)
}

func (a AuditConfig) validate(p *problems) {
	if v := a.ReadVerdicts; v != bot.ReadAuditQueued && v != bot.ReadAuditDurable {
		p.add("audit.read_verdicts", "%q is not queued or durable", v)
	}
	if a.ReadQueueSize < 1 {
		p.add("audit.read_queue_size", "must be at least 1")
	}
	if a.ReadQueueWait < 0 {
		p.add("audit.read_queue_wait", "must not be negative")
	}
}

// ReadAudit is the audit section's read-audit options.
func (a AuditConfig) ReadAudit() bot.ReadAuditOptions {
	return bot.ReadAuditOptions{Mode: a.ReadVerdicts, Size: a.ReadQueueSize, Wait: a.ReadQueueWait}
}

// ---- http ----

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

// MetricsToken is the bearer token GET /metrics asks for, read from the
// variable metrics_token_env names; empty when the key is not set (the
// metrics are served without a token). A key that names an empty or unset
// variable is an error: it never falls open to serving them to anyone.
func (h HTTPConfig) MetricsToken(getenv func(string) string) (bot.Secret, error) {
	if h.MetricsTokenEnv == "" {
		return "", nil
	}
	token := bot.Secret(getenv(h.MetricsTokenEnv))
	if token == "" {
		return "", fmt.Errorf("http.metrics_token_env: the environment variable %s is empty or unset; set it, or remove the key to serve /metrics without a token", h.MetricsTokenEnv)
	}
	return token, nil
}

func (h *HTTPConfig) defaults() {
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
}

func (h HTTPConfig) validate(p *problems) {
	if h.MaxBodyBytes < 1024 {
		p.add("http.max_body_bytes", "must be at least 1024")
	}
	if h.RatePerMinute < 0 {
		p.add("http.rate_per_minute", "must not be negative")
	}
	if h.RateBurst < 0 {
		p.add("http.rate_burst", "must not be negative")
	}
	h.validateHosts(p)
}

// ---- memory ----

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

func (m *MemoryConfig) defaults() {
	if m.CriticalBudget == 0 {
		m.CriticalBudget = 200
	}
	if m.RecallContext == 0 {
		m.RecallContext = 40
	}
}

func (m MemoryConfig) validate(p *problems) {
	if m.CriticalBudget < 1 {
		p.add("memory.critical_budget", "must be at least 1")
	}
	if m.RecallContext < 1 {
		p.add("memory.recall_context", "must be at least 1")
	}
	if m.ProposalMaxAge < 0 {
		p.add("memory.proposal_max_age", "must not be negative (0 keeps proposals open until decided)")
	}
	if m.SlotSchema != "" && len(m.Slots) > 0 {
		p.add("memory.slot_schema", "set either slot_schema (a file) or slots (inline), not both")
	}
}

// ---- tools ----

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
	// Grants are the standing grants an approver may make with an
	// approval of this tool; default none. Never on a destructive tool,
	// nor on one whose approvals need a quorum.
	Grants GrantsDecl `yaml:"grants"`
	// Context are memory subjects (in the request's space) the tool's
	// approvals rest on: each card shows their values and verdicts, and a
	// receipt is not redeemed once one of them changed since the approval
	// (the request goes back for a new decision).
	Context []string `yaml:"context"`
	// Rules are CEL conditions on the call, in order; the first that
	// matches sets policy keys for the request (policy.go).
	Rules []RuleDecl `yaml:"rules"`
	// Stages are the ordered sign-off every request of the tool needs.
	Stages []StageDecl `yaml:"stages"`
	// StepUp is the least authentication an approval of the tool needs
	// (stepup.go); absent: none beyond step_up:'s.
	StepUp *ToolStepUpDecl `yaml:"step_up"`
}

// GrantsDecl is a tool's grants: section: `{max: 8h, allow: [once,
// session, duration]}`.
type GrantsDecl struct {
	Max   time.Duration `yaml:"max"`
	Allow []string      `yaml:"allow"`
	// Budget bounds each grant (policy.go): uses per window, a sum
	// of a numeric argument, a range around the approved value.
	Budget *BudgetDecl `yaml:"budget"`
}

// validate checks a tool's grants: at key (tools[i].grants).
func (g GrantsDecl) validate(key string, t ToolConfig, p *problems) {
	if len(g.Allow) == 0 {
		if g.Max != 0 {
			p.add(key+".allow", "list the kinds allowed (once, session, duration); max alone allows nothing")
		}
		return
	}
	if cat, err := policy.ParseCategory(t.Category); err == nil && cat == policy.CategoryDestructive {
		p.add(key, "%s is destructive, and a destructive tool never takes standing grants: every call is reviewed with its dry run. Remove grants from this tool", t.Name)
	}
	for _, c := range t.Commands {
		if cat, err := policy.ParseCategory(c.Category); err == nil && cat == policy.CategoryDestructive {
			p.add(key, "the command %q of %s is destructive, and a destructive call never takes standing grants. Put the destructive commands in a tool without grants", c.Command, t.Name)
		}
	}
	if t.Quorum > 1 {
		p.add(key, "%s needs a quorum of %d, and a standing grant would approve later calls on one person's word, a path around the quorum. Remove grants or set quorum 1", t.Name, t.Quorum)
	}
	if g.Max <= 0 {
		p.add(key+".max", "required when grants are allowed: the longest a grant lasts, for example 8h")
	}
	for i, k := range g.Allow {
		switch k {
		case "once", "session", "duration":
		default:
			p.add(fmt.Sprintf("%s.allow[%d]", key, i), "%q is not a grant kind; use once, session or duration", k)
		}
	}
}

// ApproversDecl names who may approve a tool's requests.
type ApproversDecl struct {
	Roles      []string `yaml:"roles"`
	Principals []string `yaml:"principals"`
	// Groups are approver groups (groups:, or the identity provider's
	// groups claim).
	Groups []string `yaml:"groups"`
}

// CommandDecl is one allowlisted command of an exec-style tool.
type CommandDecl struct {
	Command  string `yaml:"command"` // "kubectl get"
	Category string `yaml:"category"`
	// Flags are the only flags a read-only command accepts ("-n",
	// "--namespace", "--output=json"); a flag that loads code or
	// configuration is refused here.
	Flags []string `yaml:"flags"`
}

func (t *ToolConfig) defaults(defaultTimeout time.Duration) {
	if t.Quorum == 0 {
		t.Quorum = 1
	}
	if t.Timeout == 0 {
		t.Timeout = defaultTimeout
	}
}

// validate checks one tool declared at key (tools[i]); channelKnown says
// whether a channel name is defined.
func (t ToolConfig) validate(key string, channelKnown func(string) bool, p *problems) {
	if t.Name == "" {
		p.add(key+".name", "required")
	}
	// An unset category is unclassified: a confirmation, the safe default
	// the docs state. Case is folded, as the tool registry folds it.
	if _, err := policy.ParseCategory(t.Category); err != nil {
		p.add(key+".category", "%v", err)
	}
	if t.Quorum < 1 {
		p.add(key+".quorum", "must be at least 1")
	}
	if t.Timeout < 0 {
		p.add(key+".timeout", "must not be negative")
	}
	for j, r := range t.Approvers.Roles {
		rk := fmt.Sprintf("%s.approvers.roles[%d]", key, j)
		if role, err := policy.ParseRole(r); err != nil {
			p.add(rk, "%v", err)
		} else if !policy.Grants(role, policy.CapApprove) {
			p.add(rk, "role %q cannot approve; only admin and member hold the approve capability", r)
		}
	}
	for j, cmd := range t.Commands {
		ck := fmt.Sprintf("%s.commands[%d]", key, j)
		if strings.TrimSpace(cmd.Command) == "" {
			p.add(ck+".command", "required")
			continue
		}
		if _, err := policy.ParseCategory(cmd.Category); err != nil {
			p.add(ck+".category", "%v", err)
		} else if _, err := policy.ParseCommandRule(cmd.Command, cmd.Category, cmd.Flags); err != nil {
			p.add(ck, "%v", err)
		}
	}
	t.Grants.validate(key+".grants", t, p)
	if len(t.Context) > actiontools.MaxContext {
		p.add(key+".context", "%d subjects; at most %d (each is read on every card and approval)", len(t.Context), actiontools.MaxContext)
	}
	seenContext := map[string]bool{}
	for j, c := range t.Context {
		ck := fmt.Sprintf("%s.context[%d]", key, j)
		switch f := memory.Fold(strings.TrimSpace(c)); {
		case f == "":
			p.add(ck, "empty: name a memory subject the approval rests on, such as allergy")
		case seenContext[f]:
			p.add(ck, "%q is listed twice", c)
		default:
			seenContext[f] = true
		}
	}
	for j, ch := range t.Channels {
		if !channelKnown(ch) {
			p.add(fmt.Sprintf("%s.channels[%d]", key, j), "channel %q is not defined under slack.channels, discord.channels or teams.channels", ch)
		}
	}
}

// ToolPolicy holds gate-wide rules.
type ToolPolicy struct {
	// ReadOnlyPrefixes treats undeclared tools named get_, find_, list_,
	// search_, read_ or fetch_ as read-only (the MCP heuristic). Off by default.
	ReadOnlyPrefixes bool `yaml:"read_only_prefixes"`
}

// ---- approvals ----

// ApprovalsConfig holds the lifecycle defaults of action requests.
type ApprovalsConfig struct {
	DefaultTimeout time.Duration `yaml:"default_timeout"`
	RemindAfter    time.Duration `yaml:"remind_after"`
	// ReminderChannel, when "email", also emails the reminder to the
	// people who may decide the item (email.go); reminders always
	// go in the item's threads on the chat surfaces.
	ReminderChannel   string        `yaml:"reminder_channel"`
	EscalateAfter     time.Duration `yaml:"escalate_after"`
	EscalationChannel string        `yaml:"escalation_channel"`
	EscalationRole    string        `yaml:"escalation_role"`
	EscalationOnCall  string        `yaml:"escalation_oncall"` // delegation.go
}

func (a *ApprovalsConfig) defaults() {
	if a.DefaultTimeout == 0 {
		a.DefaultTimeout = 30 * time.Minute
	}
}

// ---- callbacks ----

// CallbackConfig governs signed callbacks to agents.
type CallbackConfig struct {
	SecretEnv    string   `yaml:"secret_env"`
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// ---- soft_approval ----

// SoftApprovalConfig is the soft_approval section (seed 002): the level at
// which agents ask for consent. set_approval_mode overrides it for a space
// from the next call on.
type SoftApprovalConfig struct {
	// Mode is the deployment's level: off, normal or protective, or a
	// synonym set_approval_mode accepts. Default normal.
	Mode string `yaml:"mode"`
	// Spaces are per-space defaults, by user_id: they win over Mode.
	Spaces map[string]string `yaml:"spaces"`
}

func (s SoftApprovalConfig) validate(p *problems) {
	// Seed 002: "mode accepts off, normal, or protective, and the synonyms
	// listed under set_approval_mode. Any other value fails validation."
	if s.Mode != "" {
		if _, err := policy.ParseApprovalMode(s.Mode); err != nil {
			p.add("soft_approval.mode", "%v", err)
		}
	}
	for user, m := range s.Spaces {
		if _, err := policy.ParseApprovalMode(m); err != nil {
			p.add("soft_approval.spaces."+user, "%v", err)
		}
	}
}

// Modes are the parsed modes for actiontools (validate has checked them).
func (s SoftApprovalConfig) Modes() (policy.ApprovalMode, map[string]policy.ApprovalMode) {
	def := policy.DefaultApprovalMode
	if m, err := policy.ParseApprovalMode(s.Mode); err == nil {
		def = m
	}
	spaces := map[string]policy.ApprovalMode{}
	for user, v := range s.Spaces {
		if m, err := policy.ParseApprovalMode(v); err == nil {
			spaces[user] = m
		}
	}
	return def, spaces
}

// ---- slack ----

// SlackConfig is the slack section; absent means Slack is off.
type SlackConfig struct {
	Mode string `yaml:"mode"`
	// TeamID is the workspace (T…) or Enterprise Grid org (E…) of the
	// principals whose slack is a bare user id: clicks and commands count
	// only from users Slack reports in it (principals may also name theirs,
	// T…/U…). Required when a principal's slack is a bare user id.
	TeamID           string            `yaml:"team_id"`
	BotTokenEnv      string            `yaml:"bot_token_env"`
	SigningSecretEnv string            `yaml:"signing_secret_env"`
	AppTokenEnv      string            `yaml:"app_token_env"`
	APIURL           string            `yaml:"api_url"`
	Channels         map[string]string `yaml:"channels"`
}

func (s *SlackConfig) defaults() {
	if s.APIURL == "" {
		s.APIURL = "https://slack.com/api/"
	}
}

func (s SlackConfig) validate(p *problems) {
	switch s.Mode {
	case "http":
		if s.SigningSecretEnv == "" {
			p.add("slack.signing_secret_env", "required in http mode")
		}
	case "socket":
		if s.AppTokenEnv == "" {
			p.add("slack.app_token_env", "required in socket mode")
		}
	default:
		p.add("slack.mode", "%q is not a mode; use http or socket", s.Mode)
	}
	if s.BotTokenEnv == "" {
		p.add("slack.bot_token_env", "required")
	}
	if !strings.HasSuffix(s.APIURL, "/") {
		p.add("slack.api_url", "must end with '/'")
	}
	if s.Channels["default"] == "" {
		p.add("slack.channels.default", "required: memory proposals and consent requests go there")
	}
	if t := strings.TrimSpace(s.TeamID); t != "" && !slackadapter.ValidTeamID(t) {
		p.add("slack.team_id", "%q is not a Slack workspace id; use your workspace's id (T…, shown in the workspace's settings and in every interaction Slack sends), or an Enterprise Grid org's E… id", s.TeamID)
	}
}

// ---- discord ----

// DiscordConfig is the discord section; absent means Discord is off.
type DiscordConfig struct {
	Mode          string            `yaml:"mode"`
	BotTokenEnv   string            `yaml:"bot_token_env"`
	PublicKeyEnv  string            `yaml:"public_key_env"`
	ApplicationID string            `yaml:"application_id"`
	GuildID       string            `yaml:"guild_id"`
	APIURL        string            `yaml:"api_url"`
	Channels      map[string]string `yaml:"channels"`
	// MemberEvents (gateway mode) follows the server's members: a mapped
	// member who leaves is suspended from approving (docs/discord.md).
	MemberEvents bool `yaml:"member_events"`
}

func (d *DiscordConfig) defaults() {
	if d.APIURL == "" {
		d.APIURL = "https://discord.com/api/v10/"
	}
}

func (d DiscordConfig) validate(p *problems) {
	switch d.Mode {
	case "http":
		if d.PublicKeyEnv == "" {
			p.add("discord.public_key_env", "required in http mode")
		}
	case "gateway":
	default:
		p.add("discord.mode", "%q is not a mode; use http or gateway", d.Mode)
	}
	if d.MemberEvents && d.Mode != "gateway" {
		p.add("discord.member_events", "needs mode: gateway (HTTP interactions receive no member events); in http mode an admin suspends a departed member with suspend_principal")
	}
	if d.BotTokenEnv == "" {
		p.add("discord.bot_token_env", "required")
	}
	if !strings.HasSuffix(d.APIURL, "/") {
		p.add("discord.api_url", "must end with '/'")
	}
	if d.Channels["default"] == "" {
		p.add("discord.channels.default", "required: memory proposals and consent requests go there")
	}
}

// ---- principals ----

// PrincipalDecl maps chat identities to a principal who decides from chat.
type PrincipalDecl struct {
	Name         string   `yaml:"name"`
	Role         string   `yaml:"role"`
	Slack        string   `yaml:"slack"`
	Discord      string   `yaml:"discord"`
	DiscordRoles []string `yaml:"discord_roles"`
	// Scopes are the memory spaces (user_ids) this person may see and
	// decide from chat, as a key's --scopes. Absent: every space.
	Scopes []string `yaml:"scopes"`
	// Web is the OIDC claim value (an email by default) that signs in to
	// the web console as this principal.
	Web string `yaml:"web"`
	// Teams is the person's Entra object id: their clicks in Microsoft
	// Teams are decided as this principal (teams.go).
	Teams string `yaml:"teams"`
	// Email is where an escalation or a reminder by email reaches the
	// person (email.go).
	Email string `yaml:"email"`
}

// validate checks one principal declared at key (principals[i]).
func (pr PrincipalDecl) validate(key string, p *problems) {
	if pr.Name == "" {
		p.add(key+".name", "required")
	}
	if _, err := policy.ParseRole(pr.Role); err != nil {
		p.add(key+".role", "%v", err)
	}
	if pr.Slack == "" && pr.Discord == "" && len(pr.DiscordRoles) == 0 && pr.Web == "" && pr.Teams == "" && pr.Email == "" {
		p.add(key, "maps no chat identity; set slack, discord, discord_roles, teams, web or email")
	}
	validateTeamsID(key+".teams", pr.Teams, p)
	validateEmailAddress(key+".email", pr.Email, p)
	if sc, err := ParseScopes(pr.Scopes); err != nil {
		p.add(key+".scopes", "%v", err)
	} else if len(sc) > 0 && strings.EqualFold(strings.TrimSpace(pr.Role), string(policy.RoleAdmin)) {
		p.add(key+".scopes", "the admin role is never limited by scopes, so they would do nothing; remove them, or give this person the member role")
	}
}

// ---- sweep ----

// SweepConfig schedules the sweeper.
type SweepConfig struct {
	Schedule string `yaml:"schedule"`
}

func (s *SweepConfig) defaults() {
	if s.Schedule == "" {
		s.Schedule = "@every 1m"
	}
}

func (s SweepConfig) validate(p *problems) {
	if _, err := cron.ParseStandard(s.Schedule); err != nil {
		p.add("sweep.schedule", "%q: %v (for example \"@every 1m\" or \"*/5 * * * *\")", s.Schedule, err)
	}
}

// ---- log ----

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string `yaml:"format"` // text or json
	Level  string `yaml:"level"`  // debug, info, warn, error
}

func (l *LogConfig) defaults() {
	if l.Format == "" {
		l.Format = "text"
	}
	if l.Level == "" {
		l.Level = "info"
	}
}

// Handler is the log handler the section asks for, writing to w: text or
// JSON lines at the level given (both checked when the file is read).
func (l LogConfig) Handler(w io.Writer) slog.Handler {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(l.Level)) // validate refused any other word
	opts := &slog.HandlerOptions{Level: lvl}
	if l.Format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

func (l LogConfig) validate(p *problems) {
	switch l.Format {
	case "text", "json":
	default:
		p.add("log.format", "%q: use text or json", l.Format)
	}
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "%q: use debug, info, warn or error", l.Level)
	}
}

// ParseScopes checks a chat principal's scopes: absent means every space; a
// list present must name at least one user_id, with no blank entry, and "*"
// only on its own (it means every space, as for a key).
func ParseScopes(in []string) ([]string, error) {
	if in == nil {
		return nil, nil
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("the list is empty; leave scopes out for every space, or list the user_ids this person may decide for")
	}
	out := make([]string, 0, len(in))
	for i, s := range in {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return nil, fmt.Errorf("entry %d is blank; list user_ids such as patient_42", i)
		case s == "*" && len(in) > 1:
			return nil, fmt.Errorf("\"*\" (every space) cannot be combined with other scopes")
		case s == "*":
			return nil, nil
		}
		if err := bot.ValidateSpace(bot.Space{UserID: s}); err != nil {
			return nil, fmt.Errorf("entry %d: %v", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}
