// Package gateway puts Countersign in front of other MCP servers (its
// upstreams): it connects to each as an MCP client (the official Go SDK),
// lists its tools and offers them under Countersign's own names,
// <upstream>__<tool>, for the MCP server (adapters/mcp) to serve beside
// Countersign's tools; it forwards the calls the server lets through, and
// keeps each upstream running (a stdio upstream that exits is restarted
// with backoff).
//
// What a tool needs (its category, and so whether a person approves a
// call) comes only from configuration (Classify): an upstream's
// descriptions and annotations are its claims, shown as such and never
// trusted to lower a category.
package gateway

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Separator joins an upstream's name and its tool's name.
const Separator = "__"

// upstreamName is what an upstream may be called: no underscore, so that
// the first Separator of a served name always ends the upstream's name and
// two upstreams can never serve the same name.
var upstreamName = regexp.MustCompile(`^[A-Za-z0-9-]{1,32}$`)

// toolName is what MCP hosts accept as a tool name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckName reports what is wrong with an upstream's name, or nil.
func CheckName(name string) error {
	if !upstreamName.MatchString(name) {
		return fmt.Errorf("%q: use 1 to 32 letters, digits or '-' (no '_': its tools are served as %s%s<tool>)", name, name, Separator)
	}
	return nil
}

// Name is the name Countersign serves tool of upstream under.
func Name(upstream, tool string) string { return upstream + Separator + tool }

// Split is the upstream and tool of a served name; ok is false for a name
// that is not an upstream tool's.
func Split(name string) (upstream, tool string, ok bool) {
	upstream, tool, ok = strings.Cut(name, Separator)
	if !ok || !upstreamName.MatchString(upstream) || tool == "" {
		return "", "", false
	}
	return upstream, tool, true
}

// Rule classifies the tools whose name matches Match (a glob of
// path.Match: *, ?, [a-z]) as Category (read-only, mutating, destructive;
// empty: unclassified, a confirmation). The rest of a rule's policy is the
// configuration's, found by the rule's index (Classify).
type Rule struct {
	Match    string
	Category string
	// DryRun, when set, names a read-only companion tool of the same
	// upstream whose answer is the plan shown to the approver.
	DryRun *DryRun
}

// DryRun is a companion call made before a person is asked: Tool with
// Arguments, or with the call's own arguments when Arguments is nil.
type DryRun struct {
	Tool      string
	Arguments map[string]any
}

// CheckRule reports what is wrong with a rule's match, or nil.
func CheckRule(match string) error {
	if strings.TrimSpace(match) == "" {
		return errors.New("required: a tool name or a glob such as read_*")
	}
	if _, err := path.Match(match, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob (%v); use * ? and [a-z]", match, err)
	}
	return nil
}

// Classify is the rule tool takes: the index of the first rule whose
// match it matches, or -1 for none (the upstream's default applies).
// Nothing the upstream says of the tool enters into it.
func Classify(rules []Rule, tool string) int {
	for i, r := range rules {
		if ok, err := path.Match(r.Match, tool); err == nil && ok {
			return i
		}
	}
	return -1
}
