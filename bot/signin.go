package bot

import (
	"fmt"

	"github.com/countersign/countersign/policy"
)

// SignInBar is why a principal may not sign in to the web console. It is
// an error value to compare a refusal with: errors.Is(err, SignInRevoked).
type SignInBar int

// The reasons a principal may not sign in, in the order CheckSignIn looks
// for them.
const (
	SignInRevoked    SignInBar = iota + 1 // the principal was revoked
	SignInNotAPerson                      // an agent or service principal: it uses its API key
	SignInAgentRole                       // a person given the role agent: an agent's identity
)

var signInBarNames = [...]string{SignInRevoked: "revoked", SignInNotAPerson: "not a person", SignInAgentRole: "role agent"}

// Error names the reason ("revoked").
func (b SignInBar) Error() string {
	if b > 0 && int(b) < len(signInBarNames) {
		return signInBarNames[b]
	}
	return fmt.Sprintf("SignInBar(%d)", int(b))
}

// SignInRefusal is CheckSignIn's answer when a principal may not sign in:
// the reason (Bar) and the sentence to show the person.
type SignInRefusal struct {
	Bar     SignInBar
	Message string
}

// Error returns the sentence to show.
func (r *SignInRefusal) Error() string { return r.Message }

// Unwrap returns the reason (errors.Is(err, SignInAgentRole)).
func (r *SignInRefusal) Unwrap() error { return r.Bar }

// CheckSignIn returns nil when p may sign in to the web console, else why
// not. Only people sign in: a principal of kind person whose role is not
// agent. An agent (or service) principal acts with its API key, whatever its
// role, and a person given the role agent is an agent's identity, not a
// decider's. Every way in checks it (sign-in links, OIDC, step-up links,
// and every request of an open session), so a principal that became an
// agent, or was revoked, is signed out on its next request.
func CheckSignIn(p Principal) *SignInRefusal {
	switch {
	case p.Revoked:
		return &SignInRefusal{SignInRevoked, "This principal has been revoked, so it cannot sign in. Ask a Countersign admin."}
	case p.Kind != "person":
		return &SignInRefusal{SignInNotAPerson, fmt.Sprintf("%s is %s %s principal: only people sign in to the console. Agents and services use their API key.", p.Name, article(p.Kind), p.Kind)}
	case p.Role == policy.RoleAgent:
		return &SignInRefusal{SignInAgentRole, fmt.Sprintf("%s has the role agent: only people sign in to the console, and a principal with the role agent is an agent's identity whatever its kind. It uses its API key; an admin can give a person another role.", p.Name)}
	}
	return nil
}

func article(noun string) string {
	if noun != "" && (noun[0] == 'a' || noun[0] == 'e' || noun[0] == 'i' || noun[0] == 'o' || noun[0] == 'u') {
		return "an"
	}
	return "a"
}
