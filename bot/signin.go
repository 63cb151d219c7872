package bot

import (
	"fmt"

	"github.com/countersign/countersign/policy"
)

// SignInRefusal says why p may not sign in to the web console, or "" when
// it may. Only people sign in: a principal of kind person whose role is not
// agent. An agent (or service) principal acts with its API key, whatever its
// role, and a person given the role agent is an agent's identity, not a
// decider's. Every way in checks it (sign-in links, OIDC, step-up links,
// and every request of an open session), so a principal that became an
// agent, or was revoked, is signed out on its next request.
func SignInRefusal(p Principal) string {
	switch {
	case p.Revoked:
		return "This principal has been revoked, so it cannot sign in. Ask a Countersign admin."
	case p.Kind != "person":
		return fmt.Sprintf("%s is %s %s principal: only people sign in to the console. Agents and services use their API key.", p.Name, article(p.Kind), p.Kind)
	case p.Role == policy.RoleAgent:
		return fmt.Sprintf("%s has the role agent: only people sign in to the console, and a principal with the role agent is an agent's identity whatever its kind. It uses its API key; an admin can give a person another role.", p.Name)
	}
	return ""
}

func article(noun string) string {
	if noun != "" && (noun[0] == 'a' || noun[0] == 'e' || noun[0] == 'i' || noun[0] == 'o' || noun[0] == 'u') {
		return "an"
	}
	return "a"
}
