package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/policy"
)

// StepUpConfig is the step_up section: the action requests whose approval
// needs a fresh sign-in at the identity provider (the web console's OIDC)
// within Within. Empty lists: off (the default).
type StepUpConfig struct {
	// Within is how fresh the sign-in must be (default 5m).
	Within time.Duration `yaml:"within"`
	// Tools are declared tools (tools[].name) whose requests need it.
	Tools []string `yaml:"tools"`
	// Categories are categories (mutating, destructive, unclassified) whose
	// requests need it, by the configured category (an exec command's own).
	Categories []string `yaml:"categories"`
}

// On reports whether anything requires step-up.
func (s StepUpConfig) On() bool { return len(s.Tools) > 0 || len(s.Categories) > 0 }

func (s *StepUpConfig) defaults() {
	if s.Within == 0 {
		s.Within = actiontools.DefaultStepUpWithin
	}
}

// validate checks the section against the declared tools and the web
// console: step-up is a sign-in at the identity provider, so it needs the
// console with OIDC.
func (s StepUpConfig) validate(tools []ToolConfig, w WebConfig, p *problems) {
	if s.Within <= 0 {
		p.add("step_up.within", "must be positive, for example 5m")
	}
	declared := map[string]ToolConfig{}
	for _, t := range tools {
		declared[t.Name] = t
	}
	for i, name := range s.Tools {
		key := fmt.Sprintf("step_up.tools[%d]", i)
		t, ok := declared[name]
		if !ok {
			p.add(key, "%q is not a declared tool; name one under tools[].name", name)
			continue
		}
		if cat, err := policy.ParseCategory(t.Category); err == nil && cat == policy.CategoryReadOnly && len(t.Commands) == 0 {
			p.add(key, "%q is read-only, approved automatically, so step-up would never apply", name)
		}
	}
	for i, c := range s.Categories {
		key := fmt.Sprintf("step_up.categories[%d]", i)
		cat, err := policy.ParseCategory(c)
		switch {
		case err != nil || strings.TrimSpace(c) == "":
			p.add(key, "%q is not a category; use mutating, destructive or unclassified", c)
		case cat == policy.CategoryReadOnly:
			p.add(key, "read-only calls are approved automatically, so step-up would never apply; use mutating, destructive or unclassified")
		}
	}
	for i, t := range tools {
		t.StepUp.validate(fmt.Sprintf("tools[%d].step_up", i), t, w, p)
	}
	if s.On() && (!w.Served() || w.OIDC == nil) {
		p.add("step_up", "step-up is a fresh sign-in at your identity provider in the web console, so it needs web.enabled: true and web.oidc (issuer, client_id, client_secret_env); enable them, or remove step_up")
	}
}

// ToolStepUpDecl is tools[].step_up: the least authentication an
// approval of the tool needs, recorded on every decision
// (docs/identity.md, "Assurance").
type ToolStepUpDecl struct {
	// Method is oidc (a console session opened at the identity
	// provider), oidc_step_up (a fresh sign-in there, within
	// step_up.within) or passkey (a fresh passkey in the console).
	Method string `yaml:"method"`
}

func (d *ToolStepUpDecl) validate(key string, t ToolConfig, w WebConfig, p *problems) {
	if d == nil {
		return
	}
	a, err := policy.ParseAssurance(d.Method)
	if err != nil {
		p.add(key+".method", "%v", err)
		return
	}
	if len(t.Grants.Allow) > 0 {
		p.add(key+".method", "every approval of %s needs %s, and a standing grant (grants.allow) would approve later calls without one; remove one of them", t.Name, a.Label())
	}
	switch {
	case !w.Served() || w.OIDC == nil:
		p.add(key, "%s is an authentication in the web console, so it needs web.enabled: true and web.oidc (issuer, client_id, client_secret_env); enable them, or remove it", a.Label())
	case a == policy.AssurancePasskey && w.Passkeys == nil:
		p.add(key+".method", "passkey step-up needs passkeys in the console: set web.passkeys (rp_id; docs/identity.md, Passkeys), or use oidc_step_up (a fresh sign-in at the identity provider)")
	}
}

// Spec is the section as actiontools takes it.
func (s StepUpConfig) Spec() actiontools.StepUpSpec {
	return actiontools.StepUpSpec{Within: s.Within, Tools: s.Tools, Categories: s.Categories}
}
