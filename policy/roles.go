package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Capability is what a tool requires of its caller.
type Capability string

// The capabilities, one per tool.
const (
	CapRead    Capability = "read"
	CapWrite   Capability = "write"
	CapDelete  Capability = "delete"
	CapVerify  Capability = "verify"
	CapApprove Capability = "approve"
	CapAdmin   Capability = "admin"
)

// Role is a principal's role.
type Role string

// The roles. Only admin and member hold approve, so an agent key can never
// approve its own proposal.
const (
	RoleAdmin   Role = "admin"
	RoleMember  Role = "member"
	RoleAgent   Role = "agent"
	RoleViewer  Role = "viewer"
	RoleAuditor Role = "auditor"
)

// Roles lists every role in the order the documentation gives them.
var roleCaps = []struct {
	role Role
	caps []Capability
}{
	{RoleAdmin, []Capability{CapRead, CapWrite, CapDelete, CapVerify, CapApprove, CapAdmin}},
	{RoleMember, []Capability{CapRead, CapWrite, CapDelete, CapVerify, CapApprove}},
	{RoleAgent, []Capability{CapRead, CapWrite, CapVerify}},
	{RoleViewer, []Capability{CapRead, CapVerify}},
	{RoleAuditor, []Capability{CapVerify}},
}

// ParseRole validates a role name (case-insensitive).
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	for _, rc := range roleCaps {
		if rc.role == r {
			return r, nil
		}
	}
	names := make([]string, len(roleCaps))
	for i, rc := range roleCaps {
		names[i] = string(rc.role)
	}
	//lint:ignore ST1005 the message is shown as it stands, a sentence like the seeds' refusals
	return "", fmt.Errorf("Unknown role '%s'. Use: %s.", s, strings.Join(names, ", "))
}

// Grants reports whether role holds capability c. An unknown role holds nothing.
func Grants(role Role, c Capability) bool {
	for _, rc := range roleCaps {
		if rc.role == role {
			return slices.Contains(rc.caps, c)
		}
	}
	return false
}

// InScope reports whether a principal with the given scopes may touch the
// memory space of userID. Empty scopes, or "*" alone, mean unrestricted; the
// admin role ignores scopes.
func InScope(role Role, scopes []string, userID string) bool {
	return Unscoped(role, scopes) || slices.Contains(scopes, userID)
}

// Unscoped reports whether a principal with the given scopes may touch
// every memory space (InScope of any user): empty scopes, "*" alone, or
// the admin role.
func Unscoped(role Role, scopes []string) bool {
	return role == RoleAdmin || len(scopes) == 0 || (len(scopes) == 1 && scopes[0] == "*")
}

// DenyCapability is the seeds' refusal for a missing capability.
func DenyCapability(tool string, c Capability, role Role) string {
	return fmt.Sprintf("Access denied: '%s' requires the '%s' capability; your role(s) ['%s'] do not grant it.", tool, c, role)
}

// DenyScope is the refusal for a memory space outside the caller's scope.
// The requested id is never echoed.
func DenyScope(tool string) string {
	return fmt.Sprintf("Access denied: '%s' targets a memory space outside your assigned scope.", tool)
}
