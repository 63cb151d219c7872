package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Decider is who attempts a decision: the principal behind the call, with
// the chat identity it was mapped from already folded in (a chat user acts
// with the mapped principal's role and scopes).
type Decider struct {
	ID      string   // principal id ("prin_…", or "chat:<name>" for a chat mapping)
	Name    string   // principal name
	Display string   // "name [id]", as the decider is shown
	Kind    string   // person, agent or service
	Role    Role     // the principal's role
	Scopes  []string // the user_ids it may touch; empty = all
}

// Approvers says who may decide an item: any principal holding one of
// Roles, or named in Principals. Both empty: anyone holding approve.
type Approvers struct {
	Roles      []string `json:"roles,omitempty"`
	Principals []string `json:"principals,omitempty"`
}

// String renders the approvers for a refusal.
func (a Approvers) String() string {
	var parts []string
	if len(a.Roles) > 0 {
		parts = append(parts, "roles "+strings.Join(a.Roles, ", "))
	}
	if len(a.Principals) > 0 {
		parts = append(parts, "principals "+strings.Join(a.Principals, ", "))
	}
	if len(parts) == 0 {
		return "anyone holding the approve capability"
	}
	return strings.Join(parts, " or ")
}

// Allows reports whether a principal with role and name is among the
// approvers (roles and names compare case-insensitively).
func (a Approvers) Allows(role Role, name string) bool {
	if len(a.Roles) == 0 && len(a.Principals) == 0 {
		return true
	}
	if slices.ContainsFunc(a.Roles, func(r string) bool { return strings.EqualFold(r, string(role)) }) {
		return true
	}
	return slices.ContainsFunc(a.Principals, func(p string) bool { return strings.EqualFold(p, name) })
}

// Decidable is what a decision is taken on, as the decision rule needs it.
type Decidable struct {
	// Ref names the item in a refusal: "req_…", "#2".
	Ref string
	// RequesterID, RequesterName and RequesterDisplay identify who asked
	// (the agent that proposed the change or requested the action). All
	// empty when nobody but the decider asked (a write as a trusted
	// source): the requester check is then skipped.
	RequesterID, RequesterName, RequesterDisplay string
	// SpaceUserID is the user_id of the memory space the item belongs to.
	SpaceUserID string
	// Approvers are the item's eligible approvers; zero means anyone
	// holding approve.
	Approvers Approvers
	// ApproversOf names what the approvers decide in a refusal
	// ("delete_database requests"); empty: Ref.
	ApproversOf string
}

// SamePrincipal reports whether two principals are the same: the same id,
// or the same name (case-insensitive), since a person may hold an API key
// and a chat identity under one name.
func SamePrincipal(aID, aName, bID, bName string) bool {
	return (aID != "" && aID == bID) || (strings.TrimSpace(aName) != "" && strings.EqualFold(aName, bName))
}

// DecisionRefusal is the one rule for who may decide anything Countersign
// holds for a person (an action request, a consent request, a question, a
// memory proposal, a write as a trusted source): the decider must be an
// identified person (never an agent or a service principal), hold the
// approve capability, not be the item's requester (by id or name), have the
// item's memory space in scope, and be among the item's eligible approvers.
// It returns the refusal ("Access denied: …"), or "" when d may decide. The
// order of the checks is part of the contract: identity, person,
// capability, requester, scope, approvers.
func DecisionRefusal(d Decider, it Decidable) string {
	display := d.Display
	if display == "" {
		display = fmt.Sprintf("%s [%s]", d.Name, d.ID)
	}
	switch {
	case strings.TrimSpace(d.ID) == "" || strings.TrimSpace(d.Name) == "":
		return "Access denied: a decision needs an authenticated identity, and this caller has none. Decide with your own API key or from a mapped chat account."
	case d.Kind != "person":
		kind := d.Kind
		if kind == "" {
			kind = "unclassified"
		}
		return fmt.Sprintf("Access denied: %s is a%s %s principal. A confirmation is a person's decision from an authenticated session, never an agent's or a service account's; a person with the approve capability decides %s.", display, anOrA(kind), kind, it.Ref)
	case !Grants(d.Role, CapApprove):
		return fmt.Sprintf("Access denied: deciding %s requires the 'approve' capability; your role(s) ['%s'] do not grant it.", it.Ref, d.Role)
	case SamePrincipal(it.RequesterID, it.RequesterName, d.ID, d.Name):
		return fmt.Sprintf("Access denied: %s was requested by %s, and a request is never decided by its own requester. Another approver decides it.", it.Ref, it.RequesterDisplay)
	case !InScope(d.Role, d.Scopes, it.SpaceUserID):
		return fmt.Sprintf("Access denied: %s belongs to a memory space outside your assigned scope.", it.Ref)
	case !it.Approvers.Allows(d.Role, d.Name):
		what := it.ApproversOf
		if what == "" {
			what = it.Ref
		}
		return fmt.Sprintf("Access denied: %s are decided by %s; %s is not among them. That is configured per tool under tools[].approvers in config.yaml.", what, it.Approvers, display)
	}
	return ""
}

func anOrA(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "n"
	}
	return ""
}
