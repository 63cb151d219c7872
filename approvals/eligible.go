package approvals

import (
	"slices"
	"strings"
)

// VoidIneligible makes the approvals of pending request r that the
// person named name cast in their own right, or that were cast for them
// under a delegation, stop counting (saying why) where they count for
// approvers that name group (the stage they count for, or the request's)
// and that no longer include the person (includes: the one rule's
// approvers check with the person as they stand now). It runs when the
// directory removed name from group: an approval keeps counting only
// while its voter still has its place. A request signed off in stages
// goes back to the stage that lost an approval, as in VoidApprovals. A
// decided request is never changed.
func (r *Request) VoidIneligible(name, group string, includes func(Approvers) bool, why string) (changed bool, later []string) {
	if r.Status != StatusPending || strings.TrimSpace(name) == "" || strings.TrimSpace(group) == "" {
		return false, nil
	}
	for i := range r.Votes {
		v := &r.Votes[i]
		if !v.Approve || v.Void != "" || !v.By.holds(name) {
			continue
		}
		a, ok := r.approversOf(*v)
		if !ok || !NamesGroup(a, group) || includes(a) {
			continue
		}
		v.Void, changed = why, true
	}
	if !changed {
		return false, nil
	}
	return true, r.restage(name, why)
}

// approversOf are the approvers vote v counts for: its stage's on a
// request signed off in stages (none for an edit, which counts for no
// stage), else the request's.
func (r *Request) approversOf(v Vote) (Approvers, bool) {
	if len(r.Stages) == 0 {
		return r.Approvers, true
	}
	if v.Stage < 1 || v.Stage > len(r.Stages) {
		return Approvers{}, false
	}
	return r.Stages[v.Stage-1].Approvers, true
}

// holds reports whether the place of the person named name is what the
// vote of p fills: their own vote, or one cast for them under their
// delegation (a vote name cast for someone else fills that person's).
func (p Party) holds(name string) bool {
	if strings.TrimSpace(p.For) != "" {
		return p.castFor(name)
	}
	return strings.EqualFold(strings.TrimSpace(p.Name), strings.TrimSpace(name))
}

// NamesGroup reports whether approvers a name group (case-insensitively).
func NamesGroup(a Approvers, group string) bool {
	return slices.ContainsFunc(a.Groups, func(g string) bool { return strings.EqualFold(strings.TrimSpace(g), strings.TrimSpace(group)) })
}
