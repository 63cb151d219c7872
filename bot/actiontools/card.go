package actiontools

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// This file computes what an action, consent or question card says to
// the person clicking (issue 23): the first line, what happens if they
// approve, why they are asked, the arguments as a list, the danger of a
// call that cannot be undone, the facts it rests on, and the detail folded
// away. Everything but the agent's summary is computed from the request
// and the configuration, never from the agent's words.

// maxTitle is the most runes of a card's first line.
const maxTitle = 200

// actionCard fills the card lines of action request r into it. facts and
// views are the request's context facts as they stand (contextFacts).
func (s *Service) actionCard(it *bot.Item, r *approvals.Request, facts []approvals.Fact, views []bot.FactView) {
	a := r.Action
	def := s.def(a.Tool)
	name := r.Requester.Name
	if name == "" {
		name = bot.NameOf(r.Requester.Display)
	}
	call := callName(a.Tool, a.Command)
	version, sum := a.Version()

	it.Title = bot.OneLine(a.Summary, maxTitle)
	if it.Title == "" {
		it.Title = fmt.Sprintf("%s asks to run %s", name, call)
	}
	it.Effect = s.actionEffect(r, name, call, facts)
	it.Asked = askedFor(r, def)
	it.Args = bot.ArgList(version)
	if dangerous(a) {
		it.Danger = dangerOf(r, def, call, version)
	}
	it.Facts = factViews(r, views, facts)
	if r.Status == approvals.StatusPending && r.Reopened != "" {
		it.Reopened = r.Reopened
	}
	if q := max(r.Quorum, 1); q > 1 || len(r.Stages) > 0 {
		it.Tally = r.Tally()
	}

	detail := func(label, value string) {
		if strings.TrimSpace(value) != "" {
			it.Details = append(it.Details, bot.Field{Label: label, Value: value})
		}
	}
	detail("Request", r.ID)
	detail("Tool", call)
	if a.Edited {
		detail("Proposed arguments (JSON)", bot.EscapeInvisible(string(a.Arguments)))
		detail("Proposed arguments SHA-256", a.ArgsSHA256)
		detail("Edited arguments (JSON)", bot.EscapeInvisible(string(version)))
		detail("Edited arguments SHA-256", sum)
	} else {
		detail("Arguments (JSON)", bot.EscapeInvisible(string(version)))
		detail("Arguments SHA-256", sum)
	}
	detail("Configured", fmt.Sprintf("category %s, mechanics %s", a.Category, a.Mechanics))
	detail("Category stated by the agent", a.StatedCategory)
	detail("Approvals", fmt.Sprintf("%s (quorum %d)", r.Tally(), max(r.Quorum, 1)))
	if len(r.Stages) > 0 {
		detail("Stages", stagesText(r))
	} else {
		detail("Approvers", approversText(r.Approvers))
	}
	if r.Rule != nil {
		detail("Rule", r.Rule.String())
	}
	detail("Requested by", r.Requester.Display)
	if len(r.DecidedBy) > 0 {
		detail("Decided by", strings.Join(r.DecidedBy, ", "))
	}
	detail("Channel", r.Channel)
	if !r.EscalatedAt.IsZero() {
		detail("Escalated", "at "+stamp(r.EscalatedAt))
	}
	if su := r.Decidable().StepUp; su > 0 && r.Status == approvals.StatusPending || r.StepUp > 0 {
		detail("Step-up", stepUpField(max(su, r.StepUp), r.Decidable().MinAssurance))
	}
	if r.Round > 0 {
		detail("Round", fmt.Sprintf("%d (back for a new decision %d time(s): %s)", r.Round, r.Round, r.Reopened))
	}
	if !r.ExecutedAt.IsZero() {
		detail("Executed", stamp(r.ExecutedAt)+" by "+r.ExecutedBy)
	}
	it.Votes = voteViews(r)
}

// actionEffect is what approving r does (pending), or what happens now
// (decided): computed from the request, never from the agent's words.
func (s *Service) actionEffect(r *approvals.Request, name, call string, facts []approvals.Fact) string {
	a := r.Action
	switch r.Status {
	case approvals.StatusPending:
		runs := fmt.Sprintf("%s runs %s once with these arguments", name, call)
		if a.Mechanics == string(policy.MechanicsDryRunConfirm) {
			runs += ", as the dry run describes"
		}
		runs += ", within " + ttlText(DefaultReceiptTTL) + " of the approval"
		if q := max(r.Quorum, 1); q > 1 {
			runs = fmt.Sprintf("once %d different people have approved (%d so far), %s", q, len(r.Approvals()), runs)
			runs = strings.ToUpper(runs[:1]) + runs[1:]
		}
		runs += "."
		if len(r.Context) > 0 {
			runs += fmt.Sprintf(" If %s changes first, it does not run and comes back for a new decision.", orList(r.Context))
		}
		return runs
	case approvals.StatusApproved:
		if a.Mechanics == string(policy.MechanicsAuto) {
			return fmt.Sprintf("%s may run %s: it is read-only, approved automatically.", name, call)
		}
		if !r.ExecutedAt.IsZero() {
			return fmt.Sprintf("%s ran %s once, at %s.", name, call, bot.Clock(r.ExecutedAt, r.DecidedAt))
		}
		until := r.DecidedAt.Add(DefaultReceiptTTL)
		out := fmt.Sprintf("%s may run %s once with these arguments, before %s.", name, call, bot.Clock(until, r.DecidedAt))
		if ch := approvals.JoinChanges(r.Changes(facts)); ch != "" {
			out += fmt.Sprintf(" The facts changed since the approval (%s): it will not run, and comes back for a new decision.", ch)
		}
		return out
	case approvals.StatusDenied, approvals.StatusExpired:
		return fmt.Sprintf("Nothing runs: %s was told not to run %s.", name, call)
	}
	return ""
}

// askedFor is why a person is asked about r: the rule that matched.
func askedFor(r *approvals.Request, def *toolDef) string {
	a := r.Action
	var why string
	switch {
	case a.Command != "":
		why = fmt.Sprintf("The command %s is on %s's allowlist as %s, so a person approves every call", a.Command, a.Tool, a.Category)
	case a.Mechanics == string(policy.MechanicsDryRunConfirm):
		why = fmt.Sprintf("%s is configured as %s, so a person reviews its dry run and approves every call", a.Tool, a.Category)
	case def == nil || a.Category == string(policy.CategoryUnclassified) || a.Category == "":
		why = fmt.Sprintf("%s has no configured category, so a person approves every call (the safe default)", a.Tool)
	case a.Mechanics == string(policy.MechanicsAuto):
		why = fmt.Sprintf("%s is configured as %s: nobody is asked", a.Tool, a.Category)
	default:
		why = fmt.Sprintf("%s is configured as %s, so a person approves every call", a.Tool, a.Category)
	}
	if len(r.Stages) > 0 {
		why += fmt.Sprintf(", in %d stages, in order, each by a different person: %s", len(r.Stages), stagesText(r))
	} else {
		if q := max(r.Quorum, 1); q > 1 {
			why += fmt.Sprintf(", %d different people", q)
		}
		if who := approversText(r.Approvers); who != "" {
			why += "; only " + who + " may approve"
		}
	}
	if r.Rule != nil {
		why += "; asked by " + r.Rule.String()
	}
	if r.StepUp > 0 && r.MinAssurance == policy.AssurancePasskey {
		why += fmt.Sprintf("; approving needs a passkey step-up (within %s)", ttlText(r.StepUp))
	} else if r.StepUp > 0 {
		why += fmt.Sprintf("; approving needs a fresh sign-in (within %s)", ttlText(r.StepUp))
	}
	if len(r.Context) > 0 {
		why += "; the approval rests on " + andList(r.Context) + " as they are when you approve"
	}
	return why + "."
}

// stagesText lists a request's stages with who decides each: "prescriber
// (roles member), then pharmacist (groups pharmacists, fresh sign-in)".
func stagesText(r *approvals.Request) string {
	parts := make([]string, len(r.Stages))
	for i, st := range r.Stages {
		who := approversText(st.Approvers)
		if who == "" {
			who = "anyone who may approve"
		}
		p := st.Name + " (" + who
		if st.Need() > 1 {
			p += fmt.Sprintf(", %d people", st.Need())
		}
		if st.StepUp > 0 {
			p += ", fresh sign-in"
		}
		parts[i] = p + ")"
	}
	return strings.Join(parts, ", then ")
}

// dangerOf is the warning and the confirmation of a call that cannot be
// undone. The target an approver types is the value of the tool's first
// required string argument (delete_database's db_name), else of its first
// string argument, else the tool's name.
func dangerOf(r *approvals.Request, def *toolDef, call string, args json.RawMessage) *bot.Danger {
	var m map[string]any
	_ = json.Unmarshal(args, &m)
	target, label := "", ""
	pick := func(names []string) {
		for _, n := range names {
			if v, ok := m[n].(string); ok && strings.TrimSpace(v) != "" && target == "" {
				target, label = bot.OneLine(v, 100), n
			}
		}
	}
	if def != nil {
		pick(def.required)
	}
	if target == "" {
		pick(sortedKeys(m))
	}
	if target == "" {
		target, label = r.Action.Tool, "tool"
	}
	what := "is destructive"
	if r.Action.Mechanics == string(policy.MechanicsDryRunConfirm) && r.Action.Category != string(policy.CategoryDestructive) {
		what = "is reviewed by its dry run first"
	}
	on := ""
	if label != "tool" {
		on = fmt.Sprintf(" on %s %s", label, target)
	}
	return &bot.Danger{
		Warning:     fmt.Sprintf("⚠ %s %s: approving it cannot be undone. Read the dry run before you approve.", call, what),
		Target:      target,
		TargetLabel: label,
		Confirm:     fmt.Sprintf("%s runs once%s and cannot be undone.", call, on),
	}
}

// voteViews are r's votes as the console lists them.
func voteViews(r *approvals.Request) []bot.VoteView {
	if len(r.Votes) == 0 || r.Kind == approvals.KindQuestionRequest {
		return nil
	}
	out := make([]bot.VoteView, len(r.Votes))
	for i, v := range r.Votes {
		counts := r.Counts(v) || (!v.Approve && r.Status == approvals.StatusDenied && v.Round == r.Round)
		out[i] = bot.VoteView{By: v.By.Display, Approve: v.Approve, At: v.At, Counts: counts, Void: v.Void, Assurance: v.Assurance}
		if v.Seen != nil {
			out[i].Seen = &bot.Seen{SHA256: v.Seen.SHA256, Surface: v.Seen.Surface, Truncated: v.Seen.Truncated}
		}
	}
	return out
}

// sortedKeys are m's keys in order.
func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// approversText names who may approve, "" when anyone holding approve may.
func approversText(a approvals.Approvers) string {
	var parts []string
	if len(a.Roles) > 0 {
		parts = append(parts, "role "+strings.Join(a.Roles, " or "))
	}
	if len(a.Principals) > 0 {
		parts = append(parts, strings.Join(a.Principals, ", "))
	}
	if len(a.Groups) > 0 {
		parts = append(parts, "group "+strings.Join(a.Groups, " or "))
	}
	return strings.Join(parts, ", or ")
}

// ttlText is a duration in words: "1 hour", "30 minutes", "5m0s" beyond.
func ttlText(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "1 hour"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	}
	return d.String()
}

// andList joins names as "a, b and c"; orList as "a, b or c".
func andList(ss []string) string { return joinList(ss, "and") }
func orList(ss []string) string  { return joinList(ss, "or") }

func joinList(ss []string, conj string) string {
	switch len(ss) {
	case 0:
		return ""
	case 1:
		return ss[0]
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " " + conj + " " + ss[len(ss)-1]
}
