package actiontools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// itemSource renders action, consent and question requests for chat, and
// maps a chat decision to the tool call that makes it.
type itemSource struct{ s *Service }

var (
	_ bot.ItemSource  = itemSource{}
	_ bot.ItemEditor  = itemSource{}
	_ bot.SeenTaker   = itemSource{}
	_ bot.ItemDecider = itemSource{}
	_ bot.VoteVoider  = itemSource{}
)

// VoidVotes makes the approvals of the principal named name on the
// pending action or consent request behind rec stop counting: they were
// suspended from approving (bot.Tx.Suspend). A request signed off in
// stages goes back to the stage that lost an approval (restageNote). A
// decided request is not changed.
func (itemSource) VoidVotes(tx kv.Tx, rec bot.ItemRecord, name, why string) (bool, string, error) {
	if rec.Kind != bot.KindAction && rec.Kind != bot.KindConsent {
		return false, "", nil
	}
	r, err := approvals.LoadRequest(tx, rec.Key)
	if err != nil || r == nil {
		return false, "", err
	}
	changed, later := r.VoidApprovals(name, why)
	if !changed {
		return false, "", nil
	}
	return true, restageNote(r, name, later), approvals.PutRequest(tx, r, r.DueAt)
}

// TakesSeen reports that approve_action and deny_action record what the
// decider was shown: action and consent requests, not questions.
func (itemSource) TakesSeen(k bot.ItemKind) bool { return k == bot.KindAction || k == bot.KindConsent }

// View renders the request behind rec.
func (src itemSource) View(tx kv.Tx, rec bot.ItemRecord) (bot.Item, error) {
	r, err := approvals.LoadRequest(tx, rec.Key)
	if err != nil {
		return bot.Item{}, err
	}
	if r == nil {
		return bot.Item{}, fmt.Errorf("item %d: request %s is missing", rec.ID, rec.Key)
	}
	it := bot.Item{
		Requester:  r.Requester.Display,
		CreatedAt:  r.CreatedAt,
		ExpiresAt:  r.ExpiresAt,
		Status:     string(r.Status),
		DecidedBy:  r.DecidedBy,
		DecidedAt:  r.DecidedAt,
		Reason:     r.Reason,
		DecidedVia: decidedVia(r),
	}
	field := func(label, value string) {
		if strings.TrimSpace(value) != "" {
			it.Fields = append(it.Fields, bot.Field{Label: label, Value: value})
		}
	}
	if r.Status == approvals.StatusPending {
		d := r.Decidable() // the open stage's, when staged
		it.Decidable = &d
		if err := src.s.emptyGroups(tx, &it, d); err != nil { // eligible.go
			return bot.Item{}, err
		}
	}
	switch {
	case r.Action != nil:
		a := r.Action
		facts, views, err := contextFacts(tx, r.Space, r.Context, src.s.b.Now())
		if err != nil {
			return bot.Item{}, err
		}
		src.s.actionCard(&it, r, facts, views)
		field("Dry-run plan", a.DryRun)
		field("Effects the agent expects", strings.Join(a.RequestedEffects, "; "))
		it.Changes = actionChanges(a)
		_, it.Version = a.Version()
		it.Revised = r.Revised()
		if r.Status == approvals.StatusPending && a.Mechanics != string(policy.MechanicsDryRunConfirm) {
			cur, _ := a.Version()
			it.Editable = &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(cur)}
		}
		it.Sensitive = a.Sensitive
		if su := r.Decidable().StepUp; su > 0 { // the open stage's, when staged
			it.StepUp = su
		}
		it.MinAssurance = r.Decidable().MinAssurance
		it.Grants = src.s.grantOptions(r)
		it.Batch = batchKey(r)
		it.BreakGlass = src.s.breakGlassOffer(r)
		if r.BreakGlass != nil {
			field("Break-glass", breakGlassLine(r))
		}
	case r.Consent != nil:
		c := r.Consent
		name := bot.NameOf(r.Requester.Display)
		it.Title = bot.OneLine(c.Question, maxTitle)
		if it.Title == "" {
			it.Title = fmt.Sprintf("%s asks for your approval: %s", name, bot.OneLine(c.Action, maxTitle))
		}
		switch r.Status {
		case approvals.StatusPending:
			it.Effect = fmt.Sprintf("%s is told you approved %q, for this one action; Countersign itself runs nothing.", name, bot.OneLine(c.Action, 200))
			it.Asked = fmt.Sprintf("%s asks before it acts (soft approval): it goes on only with a person's yes.", name)
		case approvals.StatusApproved:
			it.Effect = fmt.Sprintf("%s was told you approved %q, for this one action.", name, bot.OneLine(c.Action, 200))
		case approvals.StatusDenied, approvals.StatusExpired:
			it.Effect = fmt.Sprintf("%s was told not to do it.", name)
		}
		if r.Status == approvals.StatusRecorded {
			it.Title = "Approval recorded: " + c.Action
			field("Recorded by", r.Requester.Display+" (as the agent reports it; not an authenticated decision)")
		}
		field("Action", c.Action)
		field("Detail", c.Detail)
		it.Details = append(it.Details, bot.Field{Label: "Request", Value: r.ID}, bot.Field{Label: "Requested by", Value: r.Requester.Display})
		if c.Turn != "" {
			it.Details = append(it.Details, bot.Field{Label: "Turn", Value: c.Turn})
		}
		if c.MessageID != "" {
			it.Details = append(it.Details, bot.Field{Label: "Message", Value: c.MessageID})
		}
		if len(r.DecidedBy) > 0 {
			it.Details = append(it.Details, bot.Field{Label: "Decided by", Value: strings.Join(r.DecidedBy, ", ")})
		}
		it.Votes = voteViews(r)
	case r.Question != nil:
		q := r.Question
		it.Title = q.Question
		if r.Status == approvals.StatusPending {
			it.Effect = fmt.Sprintf("Your answer goes to %s as a preference; it approves nothing.", bot.NameOf(r.Requester.Display))
		}
		field("Context", q.Context)
		if len(q.Answers) > 0 {
			field("Answer", strings.Join(q.Answers, ", "))
		}
		if r.Status == approvals.StatusAnswered {
			field("Note", q.Text)
		}
		it.Details = append(it.Details, bot.Field{Label: "Request", Value: r.ID}, bot.Field{Label: "Requested by", Value: r.Requester.Display})
		if len(r.DecidedBy) > 0 {
			it.Details = append(it.Details, bot.Field{Label: "Decided by", Value: strings.Join(r.DecidedBy, ", ")})
		}
		it.Options = q.Options
		it.Multi = q.Multi
	}
	return it, nil
}

// DecisionCall maps a chat decision to approve_action, deny_action or
// answer_question, so chat and API decisions share one code path.
func (itemSource) DecisionCall(rec bot.ItemRecord, approve bool, reason string, answers []string) (string, map[string]any, error) {
	args := map[string]any{"request_id": rec.Key}
	switch rec.Kind {
	case bot.KindQuestion:
		if approve {
			if len(answers) > 0 {
				args["answers"] = answers
			}
			if reason != "" {
				args["text"] = reason
			}
		} else {
			args["decline"] = true
			if reason != "" {
				args["text"] = reason
			}
		}
		return "answer_question", args, nil
	case bot.KindAction, bot.KindConsent:
		if reason != "" {
			args["reason"] = reason
		}
		if approve {
			return "approve_action", args, nil
		}
		return "deny_action", args, nil
	}
	return "", nil, fmt.Errorf("item %d: kind %s is not an action, consent or question", rec.ID, rec.Kind)
}

// EditCall maps an approval with edited arguments (a JSON object) to
// approve_action with arguments, the call an API client makes. Only an
// action request takes an edit: a consent or a question is approved or
// answered as asked.
func (s itemSource) EditCall(rec bot.ItemRecord, edit json.RawMessage, reason string) (string, map[string]any, error) {
	if rec.Kind != bot.KindAction {
		return "", nil, bot.Errorf(bot.KindInvalid, "#%d is a %s; it cannot be edited, only approved or rejected as asked.", rec.ID, strings.ReplaceAll(string(rec.Kind), "_", " "))
	}
	tool, args, err := s.DecisionCall(rec, true, reason, nil)
	if err != nil {
		return "", nil, err
	}
	args["arguments"] = edit
	return tool, args, nil
}

// DecisionArgs maps a typed decision to approve_action, deny_action or
// answer_question with their typed arguments (bot.ItemDecider): the
// handler an API client's call reaches, with no JSON in between. Only an
// action request takes an edit (its whole arguments, a JSON object).
func (itemSource) DecisionArgs(rec bot.ItemRecord, d bot.Decision) (string, any, error) {
	if d.Edit != nil && rec.Kind != bot.KindAction {
		return "", nil, bot.Errorf(bot.KindInvalid, "#%d is a %s; it cannot be edited, only approved or rejected as asked.", rec.ID, strings.ReplaceAll(string(rec.Kind), "_", " "))
	}
	switch rec.Kind {
	case bot.KindQuestion:
		a := &AnswerArgs{RequestID: rec.Key, Text: d.Reason}
		if d.Approve {
			a.Answers = d.Answers
		} else {
			a.Decline = true
		}
		return "answer_question", a, nil
	case bot.KindAction, bot.KindConsent:
		a := &DecideArgs{RequestID: rec.Key, Reason: d.Reason, ArgsSHA256: d.ArgsSHA256, BreakGlass: d.BreakGlass}
		if d.Seen != nil {
			a.Seen = &SeenArgs{SHA256: d.Seen.SHA256, Surface: d.Seen.Surface, Truncated: d.Seen.Truncated, Facts: d.Facts}
		}
		if d.Grant != nil {
			a.Grant = &GrantArgs{Kind: d.Grant.Kind, For: d.Grant.For, Match: Object(d.Grant.Match)}
		}
		if d.Edit != nil {
			if err := bot.CheckJSON("arguments", d.Edit); err != nil {
				return "", nil, err
			}
			if err := a.Arguments.UnmarshalJSON(d.Edit); err != nil || a.Arguments == nil {
				return "", nil, bot.Invalid("arguments", "the edited arguments must be a JSON object (the whole arguments to approve), not %s", jsonKind(d.Edit))
			}
		}
		if d.Approve {
			return "approve_action", a, nil
		}
		return "deny_action", a, nil
	}
	return "", nil, fmt.Errorf("item %d: kind %s is not an action, consent or question", rec.ID, rec.Kind)
}

// decidedVia is how each of r's deciders (DecidedBy, in order) was
// authenticated, as people read it ("chat click", "OIDC step-up"); nil
// when no decision recorded one (a grant, automatic policy, votes from
// before assurances were recorded).
func decidedVia(r *approvals.Request) []string {
	var out []string
	found := false
	for _, by := range r.DecidedBy {
		label := ""
		for _, v := range r.Votes {
			if v.By.Display == by && v.Assurance != "" && (v.Approve == (r.Status == approvals.StatusApproved)) && v.Round == r.Round {
				label = v.Assurance.Label()
			}
		}
		found = found || label != ""
		out = append(out, label)
	}
	if !found {
		return nil
	}
	return out
}
