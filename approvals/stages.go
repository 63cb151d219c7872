package approvals

import (
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/policy"
)

// This file is the mechanics of ordered stages (tools[].stages, or a
// rule's): which stage is open, who approved which, the progress a card
// shows. Who may decide the open stage is the one decision rule's
// (policy.Decide), given the stage's approvers and step-up and
// the people who approved an earlier stage (Request.Decidable).

// RuleMatch records the tools[].rules entry that set a request's policy:
// its position (1-based), its condition, why it matched ("dose_mg 50 >
// 10"), or the run-time error it failed closed on.
type RuleMatch struct {
	Index int    `json:"index"`
	When  string `json:"when"`
	Why   string `json:"why,omitempty"`
	Error string `json:"error,omitempty"`
}

// String says which rule asked and why, for a card: `rule 1 (args.dose_mg
// > 10): dose_mg 50 > 10`.
func (m *RuleMatch) String() string {
	if m == nil {
		return ""
	}
	s := fmt.Sprintf("rule %d (%s)", m.Index, m.When)
	if m.Error != "" {
		return s + " could not be evaluated (" + m.Error + "), so it applies: a rule that fails, fails closed"
	}
	return s + ": " + m.Why
}

// StageApprovers lists the distinct people whose approval counts for
// stage i (0-based) of r, in the order they approved.
func (r *Request) StageApprovers(i int) []Party {
	var out []Party
	for _, v := range r.Votes {
		if v.Stage == i+1 && r.counts(v) && !slices.ContainsFunc(out, v.By.Same) {
			out = append(out, v.By)
		}
	}
	return out
}

// OpenStage is the index (0-based) of r's first stage without enough
// approvals of the arguments and round up for approval; len(r.Stages)
// when every stage has them.
func (r *Request) OpenStage() int {
	for i, st := range r.Stages {
		if len(r.StageApprovers(i)) < st.Need() {
			return i
		}
	}
	return len(r.Stages)
}

// StageLabel names stage i for people: "pharmacist, stage 2 of 2".
func (r *Request) StageLabel(i int) string {
	if i < 0 || i >= len(r.Stages) {
		return ""
	}
	return fmt.Sprintf("%s, stage %d of %d", r.Stages[i].Name, i+1, len(r.Stages))
}

// stageDecidable makes it the open stage's: its approvers and step-up,
// and the people who approved an earlier stage.
func (r *Request) stageDecidable(it *policy.Decidable) {
	i := min(r.OpenStage(), len(r.Stages)-1)
	st := r.Stages[i]
	it.Approvers = st.Approvers
	it.StepUp = st.StepUp
	it.Stage = r.StageLabel(i)
	for j := range i {
		for _, p := range r.StageApprovers(j) {
			it.EarlierStages = append(it.EarlierStages, policy.StageApproval{ID: p.ID, Name: p.Name, Stage: r.Stages[j].Name, For: p.For})
		}
	}
}

// stageTally renders the progress of a staged request: "stage 1 of 2
// (prescriber): 1 of 1 approvals: dr_smith; stage 2 of 2 (pharmacist):
// 0 of 1 approvals, open".
func (r *Request) stageTally() string {
	open := r.OpenStage()
	parts := make([]string, len(r.Stages))
	for i, st := range r.Stages {
		names := []string{}
		for _, p := range r.StageApprovers(i) {
			names = append(names, p.Label())
		}
		s := fmt.Sprintf("stage %d of %d (%s): %d of %d approvals", i+1, len(r.Stages), st.Name, len(names), st.Need())
		if len(names) > 0 {
			s += ": " + strings.Join(names, ", ")
		}
		switch {
		case i == open && r.Status == StatusPending:
			s += ", open"
		case i > open && r.Status == StatusPending:
			s += ", waiting"
		}
		parts[i] = s
	}
	return strings.Join(parts, "; ")
}
