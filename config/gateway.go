package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/countersign/countersign/adapters/mcp/gateway"
	"github.com/countersign/countersign/bot/actiontools"
)

// ---- gateway (Countersign in front of other MCP servers) ----

// GatewayConfig is the gateway: section: the upstream MCP servers whose
// tools Countersign serves as <upstream>__<tool>, each call of a tool
// that is not read-only by configuration held for a person's approval.
type GatewayConfig struct {
	Upstreams []UpstreamConfig `yaml:"upstreams"`
	// CallTimeout bounds one upstream call (default 60s); MaxResultBytes
	// its answer as JSON (default 1 MiB).
	CallTimeout    time.Duration `yaml:"call_timeout"`
	MaxResultBytes int           `yaml:"max_result_bytes"`
}

// UpstreamConfig is one gateway.upstreams entry: a stdio server
// Countersign starts (command) or a streamable-HTTP one (url).
type UpstreamConfig struct {
	Name    string   `yaml:"name"`
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	// Env maps an upstream variable to the name of one of Countersign's:
	// {API_TOKEN: FS_API_TOKEN}. The upstream gets these and PATH, HOME,
	// LANG and TMPDIR, nothing else of Countersign's environment.
	Env map[string]string `yaml:"env"`
	Dir string            `yaml:"dir"`
	URL string            `yaml:"url"`
	// HeadersEnv maps a header sent to a url upstream to the name of the
	// variable its value comes from: {Authorization: UPSTREAM_AUTH}.
	HeadersEnv map[string]string `yaml:"headers_env"`
	// Default classifies the tools no rule matches; absent: unclassified
	// (a confirmation).
	Default *GatewayRule `yaml:"default"`
	// Tools are the rules, first match wins.
	Tools []GatewayRule `yaml:"tools"`
	// Principals, when set, are the only principals (by name) who may
	// call its tools.
	Principals []string `yaml:"principals"`
}

// GatewayRule classifies the upstream tools whose name matches Match (a
// glob: * ? [a-z]) and gives them the tools[] policy keys.
type GatewayRule struct {
	Match     string         `yaml:"match"`
	Category  string         `yaml:"category"`
	Schema    map[string]any `yaml:"schema"`
	Approvers ApproversDecl  `yaml:"approvers"`
	Quorum    int            `yaml:"quorum"`
	Timeout   time.Duration  `yaml:"timeout"`
	Channels  []string       `yaml:"channels"`
	Sensitive bool           `yaml:"sensitive"`
	Grants    GrantsDecl     `yaml:"grants"`
	Context   []string       `yaml:"context"`
	// DryRun names a read-only companion tool of the same upstream called
	// first: its answer is the plan on the card.
	DryRun *DryRunDecl `yaml:"dry_run"`
}

// DryRunDecl is a rule's dry_run: {tool: plan_changes, arguments: {...}};
// without arguments the companion gets the call's own.
type DryRunDecl struct {
	Tool      string         `yaml:"tool"`
	Arguments map[string]any `yaml:"arguments"`
}

// tool is the rule as a tools[] declaration of tool name.
func (r GatewayRule) tool(name string) ToolConfig {
	return ToolConfig{Name: name, Category: r.Category, Schema: r.Schema, Approvers: r.Approvers, Quorum: r.Quorum,
		Timeout: r.Timeout, Channels: r.Channels, Sensitive: r.Sensitive, Grants: r.Grants, Context: r.Context}
}

func (g *GatewayConfig) defaults(defaultTimeout time.Duration) {
	if g.CallTimeout == 0 {
		g.CallTimeout = time.Minute
	}
	if g.MaxResultBytes == 0 {
		g.MaxResultBytes = 1 << 20
	}
	for i := range g.Upstreams {
		u := &g.Upstreams[i]
		for j := range u.Tools {
			u.Tools[j].defaults(defaultTimeout)
		}
		if u.Default != nil {
			u.Default.defaults(defaultTimeout)
		}
	}
}

func (r *GatewayRule) defaults(defaultTimeout time.Duration) {
	if r.Quorum == 0 {
		r.Quorum = 1
	}
	if r.Timeout == 0 {
		r.Timeout = defaultTimeout
	}
}

// headerName is what a header name may be (an HTTP token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

func (g GatewayConfig) validate(c *Config, p *problems) {
	if g.CallTimeout < 0 {
		p.add("gateway.call_timeout", "must not be negative")
	}
	if g.MaxResultBytes < 0 {
		p.add("gateway.max_result_bytes", "must not be negative")
	}
	seen := map[string]bool{}
	for i, u := range g.Upstreams {
		key := fmt.Sprintf("gateway.upstreams[%d]", i)
		switch err := gateway.CheckName(u.Name); {
		case u.Name == "":
			p.add(key+".name", "required: its tools are served as <name>__<tool>")
		case err != nil:
			p.add(key+".name", "%v", err)
		case seen[u.Name]:
			p.add(key+".name", "%q is declared twice", u.Name)
		}
		seen[u.Name] = true
		switch {
		case u.Command == "" && u.URL == "":
			p.add(key, "give command (a stdio MCP server Countersign starts) or url (a streamable-HTTP MCP server)")
		case u.Command != "" && u.URL != "":
			p.add(key, "give command or url, not both")
		case u.URL != "":
			if pu, err := url.Parse(u.URL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				p.add(key+".url", "%q is not an http:// or https:// URL", u.URL)
			}
			if len(u.Args) > 0 || len(u.Env) > 0 || u.Dir != "" {
				p.add(key, "args, env and dir are for a command upstream; a url upstream takes headers_env")
			}
		case len(u.HeadersEnv) > 0:
			p.add(key+".headers_env", "is for a url upstream; a command upstream takes env")
		}
		for k, v := range u.Env {
			if !envName.MatchString(k) {
				p.add(key+".env."+k, "not a variable name")
			}
			if !envName.MatchString(v) {
				p.add(key+".env."+k, "%q is not a variable name: give the name of one of Countersign's variables, whose value the upstream gets", v)
			}
		}
		for k, v := range u.HeadersEnv {
			if !headerName.MatchString(k) {
				p.add(key+".headers_env."+k, "not a header name")
			}
			if !envName.MatchString(v) {
				p.add(key+".headers_env."+k, "%q is not a variable name: give the name of the variable the header's value comes from", v)
			}
		}
		for j, name := range u.Principals {
			if strings.TrimSpace(name) == "" {
				p.add(fmt.Sprintf("%s.principals[%d]", key, j), "empty: name a principal (as keys create --name or principals[].name)")
			}
		}
		for j, r := range u.Tools {
			rk := fmt.Sprintf("%s.tools[%d]", key, j)
			if err := gateway.CheckRule(r.Match); err != nil {
				p.add(rk+".match", "%v", err)
			}
			r.validate(rk, c, p)
			r.checkDryRun(rk, u, p)
		}
		if u.Default != nil && u.Default.DryRun != nil {
			p.add(key+".default.dry_run", "a dry run is named per rule (tools[].dry_run): the default covers tools nobody listed, whose companion is not known")
		}
		if u.Default != nil {
			if u.Default.Match != "" {
				p.add(key+".default.match", "the default applies to the tools no rule matches: it takes no match")
			}
			u.Default.validate(key+".default", c, p)
		}
	}
	for i, t := range c.Tools {
		if up, _, ok := gateway.Split(t.Name); ok && seen[up] {
			p.add(fmt.Sprintf("tools[%d].name", i), "%s is served by the gateway upstream %s: classify it under gateway.upstreams[].tools instead", t.Name, up)
		}
	}
}

// validate checks a rule's policy keys as a tools[] entry's, and that the
// core compiles them.
func (r GatewayRule) validate(key string, c *Config, p *problems) {
	t := r.tool("rule")
	var sub problems
	t.validate(key, c.channelKnown, &sub)
	for _, e := range sub.errs {
		if !strings.HasPrefix(e.Error(), key+".name:") {
			p.errs = append(p.errs, e)
		}
	}
	if len(sub.errs) == 0 {
		if err := actiontools.CheckSpec(t.Spec(), c.Approvals.DefaultTimeout); err != nil {
			p.add(key, "%v", err)
		}
	}
}

// checkDryRun checks a rule's dry_run: a tool the upstream's own rules
// classify read-only (a companion that changes things is no dry run).
func (r GatewayRule) checkDryRun(key string, u UpstreamConfig, p *problems) {
	if r.DryRun == nil {
		return
	}
	tool := strings.TrimSpace(r.DryRun.Tool)
	if tool == "" {
		p.add(key+".dry_run.tool", "required: the upstream's read-only tool whose answer is the plan")
		return
	}
	up := gateway.Upstream{Rules: rulesOf(u)}
	if u.Default != nil {
		up.Default = u.Default.Category
	}
	if cat := up.Category(tool); !strings.EqualFold(cat, "read-only") {
		p.add(key+".dry_run.tool", "%s is not classified read-only by this upstream's rules (it is %q): a dry run must change nothing; add a read-only rule for it", tool, cat)
	}
}

// rulesOf is an upstream's rules as the gateway takes them.
func rulesOf(u UpstreamConfig) []gateway.Rule {
	var out []gateway.Rule
	for _, r := range u.Tools {
		gr := gateway.Rule{Match: r.Match, Category: r.Category}
		if r.DryRun != nil {
			gr.DryRun = &gateway.DryRun{Tool: strings.TrimSpace(r.DryRun.Tool), Arguments: r.DryRun.Arguments}
		}
		out = append(out, gr)
	}
	return out
}

// ResolvedUpstreams are the gateway's upstream declarations as the
// gateway takes them (upstreams), or every unset variable as "key:
// problem".
func (g GatewayConfig) ResolvedUpstreams(getenv func(string) string) ([]gateway.Upstream, error) {
	var p problems
	ups := g.upstreams(getenv, &p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return ups, nil
}

// upstreams are the gateway's upstream declarations, with their
// environment and headers read through getenv; an unset variable is a
// problem under its key.
func (g GatewayConfig) upstreams(getenv func(string) string, p *problems) []gateway.Upstream {
	var out []gateway.Upstream
	for i, u := range g.Upstreams {
		key := fmt.Sprintf("gateway.upstreams[%d]", i)
		up := gateway.Upstream{Name: u.Name, Command: u.Command, Args: u.Args, Dir: u.Dir, URL: u.URL, Principals: u.Principals}
		if u.Command != "" {
			for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
				if v := getenv(k); v != "" {
					up.Env = append(up.Env, k+"="+v)
				}
			}
			for k, v := range u.Env {
				val := getenv(v)
				if val == "" {
					p.add(key+".env."+k, "$%s is not set (or empty): set it, or remove the entry", v)
					continue
				}
				up.Env = append(up.Env, k+"="+val)
			}
		}
		for k, v := range u.HeadersEnv {
			val := getenv(v)
			if val == "" {
				p.add(key+".headers_env."+k, "$%s is not set (or empty): set it, or remove the entry", v)
				continue
			}
			if up.Header == nil {
				up.Header = map[string][]string{}
			}
			up.Header.Set(k, val)
		}
		up.Rules = rulesOf(u)
		if u.Default != nil {
			up.Default = u.Default.Category
		}
		out = append(out, up)
	}
	return out
}

// Lookup declares the gateway's upstream tools to the confirm gate: a
// served name takes its upstream's first matching rule, else the
// default, else nothing (unclassified: a confirmation). Nothing the
// upstream says enters into it.
func (g GatewayConfig) Lookup() func(string) (actiontools.ToolSpec, bool) {
	byName := map[string]UpstreamConfig{}
	for _, u := range g.Upstreams {
		byName[u.Name] = u
	}
	return func(name string) (actiontools.ToolSpec, bool) {
		up, tool, ok := gateway.Split(name)
		u, known := byName[up]
		if !ok || !known {
			return actiontools.ToolSpec{}, false
		}
		if i := gateway.Classify(rulesOf(u), tool); i >= 0 {
			return u.Tools[i].tool(name).Spec(), true
		}
		if u.Default != nil {
			return u.Default.tool(name).Spec(), true
		}
		return actiontools.ToolSpec{Name: name}, true
	}
}
