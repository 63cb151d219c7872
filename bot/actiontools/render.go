package actiontools

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/policy"
)

// seesDetails is the one rule (policy.SeesDetails) applied to request r
// and viewer: whether viewer sees r's arguments (and an edit's changes),
// summary and dry run. Every answer about a request asks it.
func seesDetails(viewer policy.Decider, r *approvals.Request) bool {
	return policy.SeesDetails(viewer, r.Decidable(), r.Action != nil && r.Action.Sensitive)
}

// requesterView is the requester of r as a viewer: who a callback of r
// reaches.
func requesterView(r *approvals.Request) policy.Decider {
	return policy.Decider{ID: r.Requester.ID, Name: r.Requester.Name, Display: r.Requester.Display, Kind: r.Requester.Kind, Role: policy.Role(r.Requester.Role)}
}

// withheldNote is what a viewer who may not see a sensitive request's
// details is told instead.
const withheldNote = "sensitive: the arguments, summary and dry run are shown only to the requester and to people who may decide in this space"

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// requestData is a request as structured fields. Every kind carries
// request_id, kind, status, confirmed_by and reason; an action adds
// mechanics, args_sha256, the tally and the approvals, and, when details
// is set, its arguments (and an edit's); without details, a sensitive
// action says details_withheld instead.
func requestData(r *approvals.Request, details bool) map[string]any {
	d := map[string]any{
		"request_id":   r.ID,
		"kind":         string(r.Kind),
		"status":       string(r.Status),
		"confirmed_by": r.ConfirmedBy,
		"reason":       r.Reason,
		"requester":    r.Requester.Display,
		"decided_by":   nonNil(r.DecidedBy),
		"created_at":   stamp(r.CreatedAt),
	}
	if !r.ExpiresAt.IsZero() {
		d["expires_at"] = stamp(r.ExpiresAt)
	}
	if !r.DecidedAt.IsZero() {
		d["decided_at"] = stamp(r.DecidedAt)
	}
	if r.ItemID != 0 {
		d["item_id"] = r.ItemID
	}
	switch {
	case r.Action != nil:
		a := r.Action
		d["tool"] = a.Tool
		d["mechanics"] = a.Mechanics
		d["category"] = a.Category
		d["stated_category"] = a.StatedCategory
		d["args_sha256"] = a.ArgsSHA256
		d["arguments"] = json.RawMessage(a.Arguments)
		version, sum := a.Version()
		if r.Status == approvals.StatusApproved {
			d["approved_arguments"] = json.RawMessage(version)
			d["approved_args_sha256"] = sum
		}
		d["edited"] = a.Edited
		if a.Edited {
			// The version an approver edited the proposal to: the one
			// approvals count for, and the one that runs once approved.
			d["edited_arguments"] = json.RawMessage(version)
			d["edited_args_sha256"] = sum
			d["edited_by"] = a.EditedBy
			d["changes"] = changesText(a)
		}
		if !details {
			for _, k := range []string{"arguments", "approved_arguments", "edited_arguments", "changes"} {
				delete(d, k)
			}
			d["details_withheld"] = withheldNote
		}
		if r.GrantID != 0 {
			d["grant_id"] = r.GrantID
		}
		if bg := breakGlassData(r); bg != nil {
			d["break_glass"] = bg
		}
		if !r.ExecutedAt.IsZero() {
			d["executed_at"] = stamp(r.ExecutedAt)
		}
		d["quorum"] = max(r.Quorum, 1)
		d["tally"] = r.Tally()
		if r.Rule != nil {
			d["rule"] = map[string]any{"index": r.Rule.Index, "when": r.Rule.When, "why": r.Rule.Why, "error": r.Rule.Error}
		}
		if len(r.Stages) > 0 {
			d["stages"] = stagesData(r)
		}
		d["approvals"] = nonNil(r.Approvals())
		d["votes"] = votesData(r)
		if len(r.Context) > 0 {
			// The facts the approval rests on (tools[].context), and, once
			// approved, their versions as approved.
			d["context"] = r.Context
			if r.Facts != nil {
				d["approved_on_facts"] = r.Facts
			}
		}
		if r.Round > 0 {
			d["round"] = r.Round
			d["reopened"] = r.Reopened
		}
		d["headless"] = a.Headless
		if r.Decidable().StepUp > 0 {
			// Approved only after a fresh sign-in, in the console: a
			// surface that can send the person there (MCP's URL-mode
			// elicitation) reads it.
			d["step_up"] = true
		}
		if a.Command != "" {
			d["command"] = a.Command
		}
		if a.ActionID != "" {
			d["action_id"] = a.ActionID
		}
	case r.Consent != nil:
		c := r.Consent
		d["awaiting_approval"] = r.Status == approvals.StatusPending
		d["recorded"] = r.Status == approvals.StatusRecorded
		d["action"] = c.Action
		d["question"] = c.Question
		d["detail"] = c.Detail
		d["turn"] = c.Turn
		d["message_id"] = c.MessageID
	case r.Question != nil:
		q := r.Question
		d["question"] = q.Question
		d["options"] = nonNil(q.Options)
		d["multi"] = q.Multi
		d["answers"] = nonNil(q.Answers)
		d["text"] = q.Text
	}
	return d
}

// votesData are a request's votes as structured fields: who, which way,
// when, whether it counts now (and, when its voter was suspended since,
// why it is void), how the voter was authenticated, and what they were
// shown.
func votesData(r *approvals.Request) []map[string]any {
	out := []map[string]any{}
	for _, v := range r.Votes {
		m := map[string]any{"by": v.By.Display, "approve": v.Approve, "at": stamp(v.At), "counts": r.Counts(v)}
		if v.Seen != nil {
			m["seen"] = map[string]any{"sha256": v.Seen.SHA256, "surface": v.Seen.Surface, "truncated": v.Seen.Truncated}
		}
		if v.Void != "" {
			m["void"] = v.Void
		}
		if v.Assurance != "" {
			m["assurance"] = string(v.Assurance)
		}
		out = append(out, m)
	}
	return out
}

// describe is a request in one or two sentences for the agent; an edit's
// changes are named only with details.
func describe(r *approvals.Request, details bool) string {
	switch {
	case r.Action != nil:
		return describeAction(r, details)
	case r.Consent != nil:
		return describeConsent(r)
	case r.Question != nil:
		return describeQuestion(r)
	}
	return fmt.Sprintf("%s is %s.", r.ID, r.Status)
}

func describeAction(r *approvals.Request, details bool) string {
	a := r.Action
	name := callName(a.Tool, a.Command)
	changes := changesText(a)
	if !details {
		changes = "the changes are withheld: " + withheldNote
	}
	switch r.Status {
	case approvals.StatusPending:
		what := "a person must confirm it"
		if a.Mechanics == string(policy.MechanicsDryRunConfirm) {
			what = "a person must review the dry-run plan and confirm it"
		}
		edit := ""
		if a.Edited {
			edit = fmt.Sprintf(" %s edited the arguments (%s): if approved, run edited_arguments.", a.EditedBy, changes)
		}
		return fmt.Sprintf("⏳ %s is pending: %s is %s, so %s (%s).%s Poll action_status with request_id %s and wait_seconds (up to 60), or wait for the callback. Unanswered by %s, it is denied by automatic policy.",
			r.ID, name, a.Category, what, r.Tally(), edit, r.ID, stamp(r.ExpiresAt))
	case approvals.StatusApproved:
		if a.Mechanics == string(policy.MechanicsAuto) {
			return fmt.Sprintf("✅ %s approved automatically: %s is read-only, so no confirmation is needed.", r.ID, name)
		}
		if a.Edited {
			return fmt.Sprintf("✅ %s approved with changes by %s: %s. %s is confirmed by %s. Call it with exactly approved_arguments (approved_args_sha256 %s), not the arguments you proposed, and confirmed_by %q.",
				r.ID, a.EditedBy, changes, name, r.ConfirmedBy, a.ApprovedArgsSHA256, r.ConfirmedBy)
		}
		return fmt.Sprintf("✅ %s approved: %s is confirmed by %s. Call it with exactly the approved arguments (args_sha256 %s) and confirmed_by %q.",
			r.ID, name, r.ConfirmedBy, a.ArgsSHA256, r.ConfirmedBy)
	case approvals.StatusDenied:
		if len(r.DecidedBy) == 0 {
			return fmt.Sprintf("⛔ %s: %s. No person is on the line, so %s does not run; change the plan, or report the plan and its dry run for a person to confirm later.", r.ID, r.Reason, name)
		}
		reason := r.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Sprintf("⛔ %s denied by %s: %s. Do not run %s, and do not work around the refusal another way; change the plan.", r.ID, strings.Join(r.DecidedBy, ", "), reason, name)
	case approvals.StatusExpired:
		return fmt.Sprintf("⛔ %s expired unanswered: %s. Do not run %s; change the plan, or report it for a person to confirm later.", r.ID, r.Reason, name)
	}
	return fmt.Sprintf("%s is %s.", r.ID, r.Status)
}

func describeConsent(r *approvals.Request) string {
	c := r.Consent
	switch r.Status {
	case approvals.StatusPending:
		return fmt.Sprintf("⏸ Awaiting approval: %s. %s\nEnd your turn now: the user's answer comes in the next turn (or in chat, on request %s).", c.Action, c.Question, r.ID)
	case approvals.StatusApproved:
		return fmt.Sprintf("✅ %s: %s approved %q in chat. One approval covers this one action.", r.ID, r.ConfirmedBy, c.Action)
	case approvals.StatusDenied:
		reason := r.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Sprintf("⛔ %s: %s declined %q: %s. Do not carry it out.", r.ID, strings.Join(r.DecidedBy, ", "), c.Action, reason)
	case approvals.StatusRecorded:
		where := ""
		if c.Turn != "" || c.MessageID != "" {
			where = fmt.Sprintf(" (turn %s, message %s)", orDash(c.Turn), orDash(c.MessageID))
		}
		return fmt.Sprintf("Recorded %s: the user approved %q%s. One approval covers this one action.", r.ID, c.Action, where)
	}
	return fmt.Sprintf("%s is %s.", r.ID, r.Status)
}

func describeQuestion(r *approvals.Request) string {
	q := r.Question
	switch r.Status {
	case approvals.StatusPending:
		return fmt.Sprintf("❓ %s is waiting for the user's answer in chat. Poll action_status with request_id %s and wait_seconds (up to 60), then continue with the answer. An answer is a preference, not an approval.", r.ID, r.ID)
	case approvals.StatusAnswered:
		ans := strings.Join(q.Answers, ", ")
		if ans == "" {
			ans = q.Text
		} else if q.Text != "" {
			ans += " (" + q.Text + ")"
		}
		return fmt.Sprintf("💬 %s answered by %s: %s", r.ID, strings.Join(r.DecidedBy, ", "), ans)
	case approvals.StatusDeclined:
		reason := r.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Sprintf("%s: %s declined to answer: %s", r.ID, strings.Join(r.DecidedBy, ", "), reason)
	case approvals.StatusExpired:
		return fmt.Sprintf("%s expired unanswered: %s Continue without the answer, or ask again later.", r.ID, r.Reason)
	}
	return fmt.Sprintf("%s is %s.", r.ID, r.Status)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stagesData is a staged request's sign-off as action_status gives it:
// each stage's name, approvers, quorum, who approved it, and whether it
// is open (the receipt's approvers are every stage's, in order).
func stagesData(r *approvals.Request) []map[string]any {
	open := r.OpenStage()
	out := make([]map[string]any, len(r.Stages))
	for i, st := range r.Stages {
		by := []string{}
		for _, p := range r.StageApprovers(i) {
			by = append(by, p.Display)
		}
		state := "done"
		switch {
		case r.Status == approvals.StatusPending && i == open:
			state = "open"
		case r.Status == approvals.StatusPending && i > open:
			state = "waiting"
		case r.Status != approvals.StatusApproved && i >= open:
			state = "not reached"
		}
		out[i] = map[string]any{"name": st.Name, "approvers": st.Approvers.String(), "quorum": st.Need(),
			"step_up": st.StepUp > 0, "approved_by": by, "state": state}
	}
	return out
}
