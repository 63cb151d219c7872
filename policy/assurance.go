package policy

import (
	"fmt"
	"strings"
	"time"
)

// Assurance is how a decider was authenticated for one decision, from the
// weakest to the strongest. Each decision records it (approvals.Vote),
// cards and receipts show it, and a tool may require a minimum
// (Decidable.MinAssurance).
type Assurance string

// The assurances, weakest first.
const (
	// AssuranceKey: an API key or an OAuth access token (http, mcp, cli).
	AssuranceKey Assurance = "api_key"
	// AssuranceChat: a click or a command in a chat platform, as the
	// platform's signed-in user.
	AssuranceChat Assurance = "chat"
	// AssuranceLink: a console session opened with a one-time sign-in
	// link (from chat, an email or an admin).
	AssuranceLink Assurance = "link"
	// AssuranceOIDC: a console session opened at the identity provider.
	AssuranceOIDC Assurance = "oidc"
	// AssuranceStepUp: a sign-in at the identity provider fresh at the
	// decision (within the step-up window).
	AssuranceStepUp Assurance = "oidc_step_up"
	// AssurancePasskey: a passkey verified with user verification, fresh
	// at the decision (within the step-up window).
	AssurancePasskey Assurance = "passkey"
)

// assuranceRanks orders the assurances: a higher rank satisfies a lower
// minimum. An API key, a chat click and a sign-in link are one rank: each
// is something the person holds, checked by nobody at the moment.
var assuranceRanks = map[Assurance]int{
	AssuranceKey: 1, AssuranceChat: 1, AssuranceLink: 1,
	AssuranceOIDC: 2, AssuranceStepUp: 3, AssurancePasskey: 4,
}

// ParseAssurance reads a configured minimum (tools[].step_up.method): oidc,
// oidc_step_up or passkey. The weaker assurances are no minimum at all, and
// are refused as one.
func ParseAssurance(s string) (Assurance, error) {
	a := Assurance(strings.ToLower(strings.TrimSpace(s)))
	switch a {
	case AssuranceOIDC, AssuranceStepUp, AssurancePasskey:
		return a, nil
	case AssuranceKey, AssuranceChat, AssuranceLink:
		return "", fmt.Errorf("%q is what every decider has at least; a minimum is oidc, oidc_step_up or passkey", s)
	}
	return "", fmt.Errorf("unknown method %q; use oidc (a console session opened at the identity provider), oidc_step_up (a fresh sign-in there) or passkey (a fresh passkey)", s)
}

// Label is the assurance as people read it on a card or a page: "chat
// click", "sign-in link", "OIDC", "OIDC step-up", "passkey", "API key".
func (a Assurance) Label() string {
	switch a {
	case AssuranceKey:
		return "API key"
	case AssuranceChat:
		return "chat click"
	case AssuranceLink:
		return "sign-in link"
	case AssuranceOIDC:
		return "OIDC"
	case AssuranceStepUp:
		return "OIDC step-up"
	case AssurancePasskey:
		return "passkey"
	}
	return string(a)
}

// AtLeast reports whether a satisfies the minimum min ("" requires
// nothing). An unknown assurance satisfies no minimum.
func (a Assurance) AtLeast(min Assurance) bool {
	if min == "" {
		return true
	}
	r, ok := assuranceRanks[a]
	return ok && r >= assuranceRanks[min]
}

// Weakest is the weakest of as (for a decision several approvers made: a
// receipt states the least any of them had); "" when as is empty or one of
// them is unknown (recorded before assurances were).
func Weakest(as []Assurance) Assurance {
	var out Assurance
	for _, a := range as {
		r, ok := assuranceRanks[a]
		if !ok {
			return ""
		}
		if out == "" || r < assuranceRanks[out] {
			out = a
		}
	}
	return out
}

// DefaultFreshness is how recent a strong sign-in must be to count as a
// step-up (AssuranceStepUp, AssurancePasskey) for an item that sets no
// step-up window of its own.
const DefaultFreshness = 5 * time.Minute

// AssuranceOf is how d is authenticated for a decision at time at, where a
// strong sign-in counts as fresh within within (DefaultFreshness when 0):
// a web session by how it was opened and how fresh its last strong
// sign-in is (Decider.SignIn, AuthAt, AuthMethod), a chat surface a chat
// click, anything else (http, mcp, cli) an API key.
func AssuranceOf(d Decider, within time.Duration, at time.Time) Assurance {
	if within <= 0 {
		within = DefaultFreshness
	}
	switch d.Surface {
	case "slack", "discord", "teams":
		return AssuranceChat
	case "web":
		fresh := SteppedUp(d.AuthAt, within, at)
		switch {
		case fresh && d.AuthMethod == string(AssurancePasskey):
			return AssurancePasskey
		case fresh && d.AuthMethod == string(AssuranceOIDC):
			return AssuranceStepUp
		case d.SignIn == string(AssuranceOIDC) || !d.AuthAt.IsZero():
			return AssuranceOIDC
		}
		return AssuranceLink
	}
	return AssuranceKey
}
