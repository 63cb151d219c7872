package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/policy"
)

// This file holds the configuration of policy that reads the request
// (docs/policy.md): approver groups (groups:), a tool's CEL rules
// (tools[].rules) and ordered stages (tools[].stages, or a rule's).

// RuleDecl is one tools[].rules entry: a CEL condition and the policy
// keys it sets for a call it matches (a key left out keeps the tool's).
type RuleDecl struct {
	When      string         `yaml:"when"`
	Category  string         `yaml:"category"`
	Approvers *ApproversDecl `yaml:"approvers"`
	Quorum    int            `yaml:"quorum"`
	Stages    []StageDecl    `yaml:"stages"`
	StepUp    bool           `yaml:"step_up"`
	Timeout   time.Duration  `yaml:"timeout"`
	Channels  []string       `yaml:"channels"`
}

// StageDecl is one stage of an ordered sign-off.
type StageDecl struct {
	Name      string        `yaml:"name"`
	Approvers ApproversDecl `yaml:"approvers"`
	Quorum    int           `yaml:"quorum"`
	StepUp    bool          `yaml:"step_up"`
	Channels  []string      `yaml:"channels"` // console.go
	Notify    []string      `yaml:"notify"`   // stage_notify.go
}

// validatePolicy checks groups:, and every tool's rules and stages: each
// condition compiles and type-checks against the tool's schema (the
// problem names the rule and gives CEL's line and column), each group
// named is declared, each channel is defined, and step-up has the web
// console's OIDC to ask.
func (c *Config) validatePolicy(p *problems) {
	for name, members := range c.Groups {
		if strings.TrimSpace(name) == "" {
			p.add("groups", "a group has an empty name")
		}
		for i, m := range members {
			if strings.TrimSpace(m) == "" {
				p.add(fmt.Sprintf("groups.%s[%d]", name, i), "empty: list principals by name")
			}
		}
	}
	for name, r := range c.OnCall {
		key := "oncall." + name
		if policy.Groups(c.Groups).Has(name) {
			p.add(key, "%q is also a group under groups:; give the rotation another name", name)
		}
		if len(r.People) == 0 {
			p.add(key+".people", "required: who takes turns, by principal name")
		}
		if _, err := time.Parse(time.RFC3339, r.Start); err != nil {
			p.add(key+".start", "%q is not a time; write the first hand-over as 2026-12-01T09:00:00Z", r.Start)
		}
		if r.Length <= 0 {
			p.add(key+".length", "required: how long each turn lasts, for example 24h or 168h")
		}
	}
	stepUp := false
	for i, t := range c.Tools {
		key := fmt.Sprintf("tools[%d]", i)
		c.checkGroups(key+".approvers", t.Approvers, p)
		t.Grants.Budget.validate(key+".grants.budget", t, p)
		stepUp = c.checkStages(key+".stages", t.Stages, p) || stepUp
		if len(t.Stages) > 0 && t.Quorum > 1 {
			p.add(key+".quorum", "set quorum on each stage, not beside stages")
		}
		if len(t.Rules) > actiontools.MaxRules {
			p.add(key+".rules", "%d rules; at most %d", len(t.Rules), actiontools.MaxRules)
		}
		for j, r := range t.Rules {
			rk := fmt.Sprintf("%s.rules[%d]", key, j)
			if _, err := policy.CompileCondition(r.When, t.Schema); err != nil {
				p.add(rk+".when", "%v", err)
			}
			if r.Category != "" {
				if _, err := policy.ParseCategory(r.Category); err != nil {
					p.add(rk+".category", "%v", err)
				}
			}
			if r.Approvers != nil {
				c.checkGroups(rk+".approvers", *r.Approvers, p)
			}
			if r.Quorum < 0 {
				p.add(rk+".quorum", "must be at least 1")
			}
			if r.Timeout < 0 {
				p.add(rk+".timeout", "must not be negative")
			}
			stepUp = c.checkStages(rk+".stages", r.Stages, p) || r.StepUp || stepUp
			for k, ch := range r.Channels {
				if !c.channelKnown(ch) {
					p.add(fmt.Sprintf("%s.channels[%d]", rk, k), "channel %q is not defined under slack.channels, discord.channels or teams.channels", ch)
				}
			}
		}
	}
	for i, u := range c.Gateway.Upstreams {
		for j, r := range u.Tools {
			c.checkGroups(fmt.Sprintf("gateway.upstreams[%d].tools[%d].approvers", i, j), r.Approvers, p)
			r.Grants.Budget.validate(fmt.Sprintf("gateway.upstreams[%d].tools[%d].grants.budget", i, j), r.tool(r.Match), p)
		}
		if u.Default != nil {
			c.checkGroups(fmt.Sprintf("gateway.upstreams[%d].default.approvers", i), u.Default.Approvers, p)
			u.Default.Grants.Budget.validate(fmt.Sprintf("gateway.upstreams[%d].default.grants.budget", i), u.Default.tool("default"), p)
		}
	}
	if stepUp && (!c.Web.Served() || c.Web.OIDC == nil) {
		p.add("tools", "a rule or stage sets step_up, a fresh sign-in at your identity provider in the web console, so it needs web.enabled: true and web.oidc (issuer, client_id, client_secret_env); enable them, or remove step_up")
	}
}

// checkGroups reports groups an approvers list names that neither
// groups: nor oncall: declares. With scim: on, a group config.yaml does
// not declare is the directory's (its members come from /scim/v2/Groups,
// read at every decision), so any name is accepted: the card says when
// it has no members yet.
func (c *Config) checkGroups(key string, a ApproversDecl, p *problems) {
	for i, g := range a.Groups {
		if strings.TrimSpace(g) == "" {
			p.add(fmt.Sprintf("%s.groups[%d]", key, i), "an empty group name; name the group")
			continue
		}
		if !policy.Groups(c.Groups).Has(g) && !c.hasRotation(g) && c.SCIM == nil {
			p.add(fmt.Sprintf("%s.groups[%d]", key, i), "group %q is not declared under groups: (declare it, with its members, or with [] when its members come only from the identity provider's groups claim; or configure scim: so the directory provides it)", g)
		}
	}
}

// checkStages checks a sign-off's stages at key and reports whether one
// needs step-up.
func (c *Config) checkStages(key string, stages []StageDecl, p *problems) bool {
	stepUp := false
	if len(stages) > actiontools.MaxStages {
		p.add(key, "%d stages; at most %d", len(stages), actiontools.MaxStages)
	}
	seen := map[string]bool{}
	for i, st := range stages {
		sk := fmt.Sprintf("%s[%d]", key, i)
		n := strings.ToLower(strings.TrimSpace(st.Name))
		switch {
		case n == "":
			p.add(sk+".name", "required (it is shown on the card: prescriber, pharmacist)")
		case seen[n]:
			p.add(sk+".name", "%q is used twice", st.Name)
		}
		seen[n] = true
		if st.Quorum < 0 {
			p.add(sk+".quorum", "must be at least 1")
		}
		for j, r := range st.Approvers.Roles {
			if role, err := policy.ParseRole(r); err != nil {
				p.add(fmt.Sprintf("%s.approvers.roles[%d]", sk, j), "%v", err)
			} else if !policy.Grants(role, policy.CapApprove) {
				p.add(fmt.Sprintf("%s.approvers.roles[%d]", sk, j), "role %q cannot approve; only admin and member hold the approve capability", r)
			}
		}
		c.checkGroups(sk+".approvers", st.Approvers, p)
		c.checkStageChannels(sk, st, p)
		c.checkStageNotify(sk, st, p)
		stepUp = stepUp || st.StepUp
	}
	return stepUp
}

// approvers is the declaration as actiontools takes it.
func (a ApproversDecl) approvers() approvals.Approvers {
	return approvals.Approvers{Roles: a.Roles, Principals: a.Principals, Groups: a.Groups}
}

// policySpec adds t's rules and stages to spec.
func (t ToolConfig) policySpec(spec *actiontools.ToolSpec) {
	stages := func(ds []StageDecl) []actiontools.StageSpec {
		var out []actiontools.StageSpec
		for _, d := range ds {
			out = append(out, actiontools.StageSpec{Name: d.Name, Approvers: d.Approvers.approvers(), Quorum: d.Quorum, StepUp: d.StepUp, Channels: d.Channels, Notify: d.Notify})
		}
		return out
	}
	spec.Stages = stages(t.Stages)
	for _, r := range t.Rules {
		rs := actiontools.RuleSpec{When: r.When, Category: r.Category, Quorum: r.Quorum, Stages: stages(r.Stages),
			StepUp: r.StepUp, Timeout: r.Timeout, Channels: r.Channels}
		if r.Approvers != nil {
			a := r.Approvers.approvers()
			rs.Approvers = &a
		}
		spec.Rules = append(spec.Rules, rs)
	}
}

// BudgetDecl is tools[].grants.budget: what each standing grant of the
// tool may approve.
type BudgetDecl struct {
	Uses   int           `yaml:"uses"` // at most this many calls…
	Per    time.Duration `yaml:"per"`  // …per this window (0: the grant's life)
	Sum    *SumDecl      `yaml:"sum"`
	Within *WithinDecl   `yaml:"within"`
}

// SumDecl bounds the sum of a numeric argument over a window.
type SumDecl struct {
	Argument string        `yaml:"argument"`
	Max      float64       `yaml:"max"`
	Per      time.Duration `yaml:"per"`
}

// WithinDecl holds a numeric argument within a percentage of the value
// approved when the grant was made.
type WithinDecl struct {
	Argument string  `yaml:"argument"`
	Percent  float64 `yaml:"percent"`
}

// budget is the declaration as actiontools takes it (nil: none).
func (b *BudgetDecl) budget() approvals.GrantBudget {
	if b == nil {
		return approvals.GrantBudget{}
	}
	out := approvals.GrantBudget{Uses: b.Uses, Per: b.Per}
	if b.Sum != nil {
		out.SumArgument, out.SumMax, out.SumPer = b.Sum.Argument, b.Sum.Max, b.Sum.Per
	}
	if b.Within != nil {
		out.WithinArgument, out.WithinPercent = b.Within.Argument, b.Within.Percent
	}
	return out
}

// validate checks a tool's grant budget at key (tools[i].grants.budget):
// the arguments it names must be numbers in the tool's schema when the
// schema declares them.
func (b *BudgetDecl) validate(key string, t ToolConfig, p *problems) {
	if b == nil {
		return
	}
	if len(t.Grants.Allow) == 0 {
		p.add(key, "a budget bounds standing grants, and %s allows none (grants.allow)", t.Name)
	}
	if b.Uses < 0 {
		p.add(key+".uses", "must not be negative")
	}
	if b.Per < 0 {
		p.add(key+".per", "must not be negative")
	}
	if b.Per > 0 && b.Uses == 0 {
		p.add(key+".per", "set uses too: at most uses calls per this window")
	}
	props, _ := t.Schema["properties"].(map[string]any)
	numeric := func(k, arg string) {
		if strings.TrimSpace(arg) == "" {
			p.add(k, "required: the numeric argument it bounds")
			return
		}
		if props == nil {
			return
		}
		sch, _ := props[arg].(map[string]any)
		if ty, _ := sch["type"].(string); ty != "number" && ty != "integer" {
			p.add(k, "%q is not a number or integer property of %s's schema", arg, t.Name)
		}
	}
	if s := b.Sum; s != nil {
		numeric(key+".sum.argument", s.Argument)
		if s.Max <= 0 {
			p.add(key+".sum.max", "required: the most the calls add up to, above 0")
		}
		if s.Per < 0 {
			p.add(key+".sum.per", "must not be negative")
		}
	}
	if w := b.Within; w != nil {
		numeric(key+".within.argument", w.Argument)
		if w.Percent < 0 || w.Percent > 100 {
			p.add(key+".within.percent", "between 0 and 100")
		}
	}
}

// RotationDecl is one oncall: rotation: people take turns of length each,
// the first from start (its time of day is the hand-over). A rotation is
// named in approvers like a group: its member is whoever is on call when
// the decision is made.
type RotationDecl struct {
	People []string      `yaml:"people"`
	Start  string        `yaml:"start"` // RFC 3339, the first hand-over
	Length time.Duration `yaml:"length"`
}

// hasRotation reports whether oncall: declares name (case-insensitively).
func (c *Config) hasRotation(name string) bool {
	for n := range c.OnCall {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// Rotations are the on-call rotations as the bot takes them (validate
// has checked them).
func (c *Config) Rotations() map[string]policy.Rotation {
	if len(c.OnCall) == 0 {
		return nil
	}
	out := map[string]policy.Rotation{}
	for name, r := range c.OnCall {
		start, _ := time.Parse(time.RFC3339, r.Start)
		out[name] = policy.Rotation{People: r.People, Start: start, Length: r.Length}
	}
	return out
}

// Spec is a tools[] declaration (or a gateway rule's, as one) for the
// confirm gate.
func (t ToolConfig) Spec() actiontools.ToolSpec {
	spec := actiontools.ToolSpec{
		Name:      t.Name,
		Category:  t.Category,
		Schema:    t.Schema,
		Approvers: t.Approvers.approvers(),
		Quorum:    t.Quorum,
		Timeout:   t.Timeout,
		Channels:  t.Channels,
		Sensitive: t.Sensitive,
		Grants:    actiontools.GrantPolicy{Max: t.Grants.Max, Allow: t.Grants.Allow, Budget: t.Grants.Budget.budget()},
		Context:   t.Context,
	}
	if t.StepUp != nil {
		spec.StepUpMethod = t.StepUp.Method
	}
	for _, c := range t.Commands {
		spec.Commands = append(spec.Commands, actiontools.CommandSpec{Command: c.Command, Category: c.Category, Flags: c.Flags})
	}
	t.policySpec(&spec) // policy.go: rules and stages
	return spec
}
