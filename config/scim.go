package config

import (
	"strings"

	"github.com/countersign/countersign/policy"
)

// ---- scim ----

// SCIMConfig is the scim section (docs/identity.md): the SCIM 2.0 service
// provider at /scim/v2/Users and /scim/v2/Groups, for the organisation's
// identity provider (Okta, Microsoft Entra ID). Absent: off.
type SCIMConfig struct {
	// TokenEnv names the environment variable holding the bearer token
	// the identity provider sends. Required.
	TokenEnv string `yaml:"token_env"`
	// Role is the role of a person the directory provisions that
	// principals: does not declare (default member; never agent).
	Role string `yaml:"role"`
}

func (s *SCIMConfig) defaults() {
	if s.Role == "" {
		s.Role = string(policy.RoleMember)
	}
}

func (s SCIMConfig) validate(p *problems) {
	if strings.TrimSpace(s.TokenEnv) == "" {
		p.add("scim.token_env", "required: the name of the environment variable holding the bearer token the identity provider sends, such as COUNTERSIGN_SCIM_TOKEN")
	}
	role, err := policy.ParseRole(s.Role)
	switch {
	case err != nil:
		p.add("scim.role", "%v", err)
	case role == policy.RoleAgent:
		p.add("scim.role", "the directory provisions people, and the role agent is an agent's identity; use member (or viewer, auditor, admin)")
	}
}
