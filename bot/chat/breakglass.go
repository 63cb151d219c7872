package chat

import (
	"fmt"
	"strings"

	"github.com/countersign/countersign/bot"
)

// breakGlassChecks are checks' for an approval asked for as break-glass
// (Decision.BreakGlass): an approval as proposed (no edit, no grant), with
// a reason, a dangerous item's confirmation (the danger checks of an
// ordinary approval are made for an approver who may decide; the breaker
// is the requester, so they are made here), and the version the person
// saw. Who may break glass is the one rule's (approve_action runs
// policy.Decide with its break-glass exception); this only shapes the
// decision. It completes bd; Status Ready means go on.
func breakGlassChecks(d Decision, caller *bot.Caller, it bot.Item, bd *bot.Decision) Outcome {
	invalid := func(format string, a ...any) Outcome {
		return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf(format, a...)}
	}
	switch {
	case d.Verb != Approve:
		return invalid("Break-glass is an approval; to refuse #%d, reject it without break-glass.", it.ID)
	case it.Kind != bot.KindAction:
		return invalid("#%d is not an action request; break-glass is for action requests of the tools under break_glass.tools. Nothing was recorded.", it.ID)
	case d.edited() || d.Grant != nil:
		return invalid("A break-glass approval approves #%d as proposed, with no edit and no standing grant; nothing was recorded.", it.ID)
	case strings.TrimSpace(d.Reason) == "":
		return invalid("Breaking glass on #%d needs a reason, which every approver and the reviewers see; nothing was recorded.", it.ID)
	}
	if it.Danger != nil {
		if d.Seen != nil && d.Seen.Truncated {
			return invalid("The %s card of #%d was cut to fit, and #%d cannot be undone; nothing was recorded. Read it whole in the web console.", d.Seen.Surface, it.ID, it.ID)
		}
		if !d.Confirmed && strings.TrimSpace(d.Confirm) != it.Danger.Target {
			out := invalid("#%d cannot be undone (%s), so breaking glass on it takes a confirmation; nothing was recorded. %s.", it.ID, bot.OneLine(it.Danger.Confirm, 200), TypeToConfirm(it))
			out.Field = ConfirmField
			return out
		}
	}
	if msg := checkVersion(&d, it); msg != "" {
		return invalid("%s", msg)
	}
	bd.BreakGlass = true
	if d.ArgsSHA256 != "" && it.Version != "" {
		bd.ArgsSHA256 = d.ArgsSHA256
	}
	if d.Seen != nil {
		bd.Seen = d.Seen
		if len(it.Facts) > 0 {
			bd.Facts = bot.FactsDigestOf(it.Facts)
		}
	}
	return Outcome{Status: Ready, Item: it, Caller: caller}
}
