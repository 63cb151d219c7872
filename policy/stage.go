package policy

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// Stage is one step of an ordered sign-off: stage n+1 opens when stage n
// has Quorum distinct approvals (of the arguments up for approval); one
// deny at any stage ends the request; one person approves at most one
// stage (CheckStage).
type Stage struct {
	Name      string    `json:"name"`
	Approvers Approvers `json:"approvers,omitzero"`
	Quorum    int       `json:"quorum,omitempty"` // 0 means 1
	// StepUp, when positive, is how fresh an approver's last strong
	// sign-in must be for this stage (Decidable.StepUp).
	StepUp time.Duration `json:"step_up,omitempty"`
	// Channels are where the request's card is posted too when this stage
	// opens (tools[].stages[].channels): configured channel names, each
	// posted on the surfaces that define it. Empty: the request's own
	// channel only.
	Channels []string `json:"channels,omitempty"`
	// Notify names the configured people (principals[].name) sent the
	// card directly when this stage opens (tools[].stages[].notify), each
	// on the surfaces where they have an account.
	Notify []string `json:"notify,omitempty"`
}

// Need is how many distinct approvals the stage needs.
func (s Stage) Need() int { return max(s.Quorum, 1) }

// Groups are the configured approver groups (groups: in config.yaml):
// each name lists principals by name.
type Groups map[string][]string

// Of lists the groups that name principal name (case-insensitively),
// sorted: what Decider.Groups holds from the configuration.
func (g Groups) Of(name string) []string {
	if strings.TrimSpace(name) == "" {
		return nil
	}
	var out []string
	for group, members := range g {
		if slices.ContainsFunc(members, func(m string) bool { return strings.EqualFold(m, name) }) {
			out = append(out, group)
		}
	}
	sort.Strings(out)
	return out
}

// Has reports whether group is configured (case-insensitively).
func (g Groups) Has(group string) bool {
	for name := range g {
		if strings.EqualFold(name, group) {
			return true
		}
	}
	return false
}

// MergeGroups is the union of group lists, without repeats (compared
// case-insensitively, the first spelling kept), sorted.
func MergeGroups(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, g := range l {
			g = strings.TrimSpace(g)
			if g != "" && !slices.ContainsFunc(out, func(h string) bool { return strings.EqualFold(g, h) }) {
				out = append(out, g)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Rotation is an on-call rotation (oncall: in config.yaml): People take
// turns of Length each, the first from Start (whose time of day is the
// hand-over), round and round. It works as an approver group whose one
// member is whoever is on call at the time of the decision.
type Rotation struct {
	People []string
	Start  time.Time
	Length time.Duration
}

// OnCall is who is on call at now: "" before Start, or for a rotation
// without people or length (nobody: fail closed).
func (r Rotation) OnCall(now time.Time) string {
	if len(r.People) == 0 || r.Length <= 0 || now.Before(r.Start) {
		return ""
	}
	turn := int64(now.Sub(r.Start) / r.Length)
	return r.People[turn%int64(len(r.People))]
}
