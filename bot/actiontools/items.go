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
	_ bot.ItemSource = itemSource{}
	_ bot.ItemEditor = itemSource{}
)

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
		Requester: r.Requester.Display,
		CreatedAt: r.CreatedAt,
		ExpiresAt: r.ExpiresAt,
		Status:    string(r.Status),
		DecidedBy: r.DecidedBy,
		DecidedAt: r.DecidedAt,
		Reason:    r.Reason,
	}
	field := func(label, value string) {
		if strings.TrimSpace(value) != "" {
			it.Fields = append(it.Fields, bot.Field{Label: label, Value: value})
		}
	}
	switch {
	case r.Action != nil:
		a := r.Action
		it.Title = "Confirm " + a.Tool
		if a.Mechanics == "dry_run_confirm" {
			it.Title = "Review the dry run and confirm " + a.Tool
		}
		field("Tool", callName(a.Tool, a.Command))
		if a.Edited {
			// Beside the edited version below: which one the agent proposed.
			field("Proposed arguments", bot.EscapeInvisible(string(a.Arguments)))
		} else {
			field("Arguments", bot.EscapeInvisible(string(a.Arguments)))
		}
		field("Summary", a.Summary)
		field("Dry-run plan", a.DryRun)
		field("Requested effects", strings.Join(a.RequestedEffects, "; "))
		field("Category as stated by the agent", a.StatedCategory)
		field("Mechanics", fmt.Sprintf("%s (configured category: %s)", a.Mechanics, a.Category))
		field("Arguments SHA-256", a.ArgsSHA256)
		if a.Edited {
			field("Edited arguments", bot.EscapeInvisible(string(a.ApprovedArguments)))
			field("Edited arguments SHA-256", a.ApprovedArgsSHA256)
		}
		it.Changes = actionChanges(a)
		_, it.Version = a.Version()
		it.Revised = r.Revised()
		if r.Status == approvals.StatusPending && a.Mechanics != string(policy.MechanicsDryRunConfirm) {
			cur, _ := a.Version()
			it.Editable = &bot.Editable{Kind: bot.EditArguments, Current: json.RawMessage(cur)}
		}
		if !r.EscalatedAt.IsZero() {
			field("Escalated", "at "+stamp(r.EscalatedAt))
		}
		it.Tally = r.Tally()
		it.Sensitive = a.Sensitive
		if r.StepUp > 0 {
			it.StepUp = r.StepUp
			field("Step-up", stepUpField(r.StepUp))
		}
		it.Grants = src.s.grantOptions(r)
	case r.Consent != nil:
		c := r.Consent
		it.Title = "Approval requested: " + c.Action
		if r.Status == approvals.StatusRecorded {
			it.Title = "Approval recorded: " + c.Action
			field("Recorded by", r.Requester.Display+" (as the agent reports it; not an authenticated decision)")
		}
		field("Question", c.Question)
		field("Detail", c.Detail)
		field("Turn", c.Turn)
		field("Message", c.MessageID)
	case r.Question != nil:
		q := r.Question
		it.Title = q.Question
		field("Context", q.Context)
		if len(q.Answers) > 0 {
			field("Answer", strings.Join(q.Answers, ", "))
		}
		if r.Status == approvals.StatusAnswered {
			field("Note", q.Text)
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
