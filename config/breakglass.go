package config

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/policy"
)

// BreakGlassConfig is the break_glass section (docs/policy.md,
// "Break-glass"): the tools whose requests a person may approve
// themselves, alone, when nobody else can be reached, and the review of
// every such approval. Absent or with no tools: nobody may.
type BreakGlassConfig struct {
	// Tools are declared tools (tools[].name).
	Tools []string `yaml:"tools"`
	// StepUp is how fresh the breaker's sign-in at the identity provider
	// must be (default 5m; the tool's own step-up window when stricter).
	StepUp time.Duration `yaml:"step_up"`
	// Review is who countersigns a break-glass, how many, and by when.
	Review BreakGlassReviewDecl `yaml:"review"`
}

// BreakGlassReviewDecl is break_glass.review.
type BreakGlassReviewDecl struct {
	// Approvers countersign the review (the breaker never does); none:
	// anyone holding approve.
	Approvers ApproversDecl `yaml:"approvers"`
	// Quorum is how many distinct reviewers (default 2).
	Quorum int `yaml:"quorum"`
	// Within is the review's window (default 24h): past it, the review
	// escalates, shows on /metrics, and blocks the breaker's next
	// break-glass until it is cleared.
	Within time.Duration `yaml:"within"`
	// Channel is where the review is posted (default: the tool's channel).
	Channel string `yaml:"channel"`
}

func (b *BreakGlassConfig) defaults() {
	if b.StepUp == 0 {
		b.StepUp = policy.DefaultFreshness
	}
	if b.Review.Quorum == 0 {
		b.Review.Quorum = actiontools.DefaultReviewQuorum
	}
	if b.Review.Within == 0 {
		b.Review.Within = actiontools.DefaultReviewWithin
	}
}

// validate checks the section against the declared tools, groups,
// channels and the console: a break-glass needs a fresh sign-in at the
// identity provider, which is the console's OIDC.
func (b BreakGlassConfig) validate(c *Config, p *problems) {
	if len(b.Tools) == 0 {
		return
	}
	declared := map[string]ToolConfig{}
	for _, t := range c.Tools {
		declared[t.Name] = t
	}
	seen := map[string]bool{}
	for i, name := range b.Tools {
		key := fmt.Sprintf("break_glass.tools[%d]", i)
		t, ok := declared[name]
		switch {
		case !ok:
			p.add(key, "%q is not a declared tool; name one under tools[].name", name)
		case seen[name]:
			p.add(key, "%q is listed twice", name)
		default:
			if cat, err := policy.ParseCategory(t.Category); err == nil && cat == policy.CategoryReadOnly && len(t.Commands) == 0 {
				p.add(key, "%q is read-only, approved automatically, so break-glass would never apply", name)
			}
		}
		seen[name] = true
	}
	if b.StepUp < 0 {
		p.add("break_glass.step_up", "must be positive, for example 5m")
	}
	r := b.Review
	if r.Quorum < 1 {
		p.add("break_glass.review.quorum", "must be at least 1 (default 2)")
	}
	if r.Within <= 0 {
		p.add("break_glass.review.within", "must be positive, for example 24h")
	}
	for j, role := range r.Approvers.Roles {
		if rl, err := policy.ParseRole(role); err != nil {
			p.add(fmt.Sprintf("break_glass.review.approvers.roles[%d]", j), "%v", err)
		} else if !policy.Grants(rl, policy.CapApprove) {
			p.add(fmt.Sprintf("break_glass.review.approvers.roles[%d]", j), "role %q cannot approve; only admin and member hold the approve capability", role)
		}
	}
	c.checkGroups("break_glass.review.approvers", r.Approvers, p)
	if a := r.Approvers; len(a.Roles) == 0 && len(a.Groups) == 0 && len(a.Principals) > 0 && len(a.Principals) < r.Quorum {
		p.add("break_glass.review.quorum", "%d countersignatures cannot come from the %d principals named in break_glass.review.approvers; name more, or lower the quorum", r.Quorum, len(a.Principals))
	}
	if r.Channel != "" && !c.channelKnown(r.Channel) {
		p.add("break_glass.review.channel", "%q is not a channel defined under slack.channels, discord.channels or teams.channels", r.Channel)
	}
	if !c.Web.Served() || c.Web.OIDC == nil {
		p.add("break_glass", "break-glass needs a fresh sign-in at your identity provider in the web console, so it needs web.enabled: true and web.oidc (issuer, client_id, client_secret_env); enable them, or remove break_glass")
	}
}

// Spec is the section as actiontools takes it.
func (b BreakGlassConfig) Spec() actiontools.BreakGlassSpec {
	return actiontools.BreakGlassSpec{
		Tools: b.Tools, StepUp: b.StepUp,
		ReviewApprovers: b.Review.Approvers.approvers(), ReviewQuorum: b.Review.Quorum,
		ReviewWithin: b.Review.Within, ReviewChannel: b.Review.Channel,
	}
}
