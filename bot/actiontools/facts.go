package actiontools

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// This file is "approvals that rest on facts" (issue 23, item 3): a tool
// declares context subjects (tools[].context: [allergy,
// active_medication]); each approval records the versions of their facts
// in the request's space as they stand in the approving transaction
// (approvals.Vote.Facts, and the deciding approval's Request.Facts), and
// redeem_receipt compares them with the facts as they stand in its own
// transaction: a fact superseded, retracted or flagged since sends the
// request back for a new decision (approvals.Request.Reopen) instead of
// redeeming it.
//
// Why each vote, not only the deciding one: under a quorum every approver
// approves on what they saw, so an approval given before an allergy was
// recorded must not count towards one given after it (approve_action
// starts the count again then), and a receipt is redeemed only while the
// facts of every approval it rests on still stand.

// maxFactValue is the most runes of a context subject's value a card and
// a change line show.
const maxFactValue = 120

// contextFacts reads the context subjects of a request in space sp as they
// stand in tx: what approvals record (their versions and values) and what
// a card shows (the values with check_before_act's verdicts at now).
func contextFacts(tx kv.Tx, sp policy.Space, subjects []string, now time.Time) ([]approvals.Fact, []bot.FactView, error) {
	if len(subjects) == 0 {
		return nil, nil, nil
	}
	facts := make([]approvals.Fact, 0, len(subjects))
	views := make([]bot.FactView, 0, len(subjects))
	for _, subject := range subjects {
		live, err := memory.Live(tx, sp, subject)
		if err != nil {
			return nil, nil, err
		}
		f := factOf(subject, live)
		states := make([]policy.FactState, len(live))
		for i, x := range live {
			states[i] = policy.FactState{
				ID: x.ID, Subject: x.Subject, Value: x.Value, Status: string(x.Status),
				Confidence: x.Confidence, SetAt: x.SetAt, Supersedes: x.Supersedes,
			}
		}
		verdict, reasons := policy.CheckBeforeAct(states, policy.DefaultSafetyPolicy(), now)
		facts = append(facts, f)
		views = append(views, bot.FactView{Subject: subject, Value: f.Value, Verdict: string(verdict), Reasons: reasons, Version: f.Version})
	}
	return facts, views, nil
}

// factOf is one subject's live facts as an approval records them: the ids
// and statuses as its version (any supersession, retraction or flag
// changes them), the values as shown.
func factOf(subject string, live []*memory.Fact) approvals.Fact {
	var version, active, held []string
	for _, f := range live {
		st := "A"
		if f.Status == memory.StatusFlagged {
			st = "F"
		}
		version = append(version, fmt.Sprintf("%d:%s", f.ID, st))
		v := bot.OneLine(bot.EscapeInvisible(f.Value), maxFactValue)
		switch {
		case f.Status == memory.StatusActive:
			active = append(active, v)
		case f.IsProposal() && f.Pending == memory.ActionRetract:
			held = append(held, "its removal proposed")
		case f.IsProposal():
			held = append(held, v+" (proposed, awaiting approval)")
		default:
			held = append(held, v+" (disputed)")
		}
	}
	value := strings.Join(active, "; ")
	if value == "" {
		value = "none"
	}
	if len(held) > 0 {
		value += "; " + strings.Join(held, "; ")
	}
	return approvals.Fact{Subject: subject, Value: bot.OneLine(value, 2*maxFactValue), Version: strings.Join(version, " ")}
}

// factViews are the card's facts of request r: the values now, with what
// the request's approval rests on beside any that changed (an approved
// request), or with what its earlier approval rested on (a request sent
// back for a new decision shows the change in Reopened instead).
func factViews(r *approvals.Request, now []bot.FactView, nowFacts []approvals.Fact) []bot.FactView {
	if r.Status != approvals.StatusApproved {
		return now
	}
	changed := map[string]string{}
	for _, c := range r.Changes(nowFacts) {
		changed[c.Subject] = c.Was
	}
	for i := range now {
		if was, ok := changed[now[i].Subject]; ok {
			now[i].Was = was
		}
	}
	return now
}

// factsChanged is the sentence of a request sent back for a new decision:
// what changed, and what it means.
func factsChanged(r *approvals.Request, changes string) string {
	return fmt.Sprintf("The facts %s's approval rested on changed before it ran (%s): it did not run, and it is back for a new decision on the facts as they are now.", r.ID, changes)
}
