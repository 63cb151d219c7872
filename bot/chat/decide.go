package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// Verb is what a person does to an item.
type Verb string

// The verbs of a decision.
const (
	Approve Verb = "approve" // approve an action, consent or memory change
	Reject  Verb = "reject"  // reject or deny it (a question: decline it)
	Answer  Verb = "answer"  // answer a question with the chosen options
	// ViewDetails is not a decision: it names a request for a sensitive
	// item's detail (ShowDetails) in refusals and the audit.
	ViewDetails Verb = "details"
)

// Decision is a person's decision on an item as a surface reports it: who
// (the platform's user id, and the platform roles the user holds), which
// delivery (the surface's dedupe keys), which item, and what.
type Decision struct {
	// Surface is the directory's name of the surface: bot.SurfaceSlack,
	// bot.SurfaceDiscord, or another surface that maps its users to
	// principals through the same directory.
	Surface string
	// UserID is the platform's user id of the person who decided.
	UserID string
	// Roles are the platform roles the user holds (Discord role ids), for
	// a directory that maps roles to principals; nil for none.
	Roles []string
	// Deliveries are the delivery's dedupe keys ("slack:trigger:…",
	// "discord:<interaction id>"). Any key seen before makes the decision a
	// Duplicate, applied once. Empty: no dedupe (the surface has its own).
	Deliveries []string
	// ItemID is the item's number as chat shows it (#12).
	ItemID uint64
	// Verb is approve, reject or answer.
	Verb Verb
	// Reason is the person's reason: required to reject anything but a
	// question (declining a question may go without one).
	Reason string
	// Choices are a question's chosen options, as indexes into the item's
	// Options (the surface never needs to hold the option text).
	Choices []int
	// Arguments, with Verb Approve, edits an action request before it is
	// approved: the arguments to approve instead (a JSON object). The tool
	// validates them like a new request's. nil: approve as proposed.
	Arguments json.RawMessage
	// Value, with Verb Approve, edits a memory proposal before it is
	// approved: the value to confirm instead. nil: approve as proposed.
	Value *string
	// Basis, with an edit, is the EditBasis of the item when its edit form
	// was opened; with a plain approval, the EditBasis of the card the
	// button was on: an item that changed since (another approver's edit)
	// is refused as Invalid, so nobody approves arguments they never saw.
	// "": not checked (an API-shaped surface that sends whole arguments).
	Basis string
	// ArgsSHA256, with Verb Approve on an action request, is the hash of
	// the arguments the person was shown: when another approver's edit
	// has replaced them since, approve_action refuses the approval (in
	// its transaction) and nothing is recorded. "": not checked.
	ArgsSHA256 string
	// Grant, with Verb Approve, is a standing grant the person makes with
	// the approval (an item's Grants offer them). approve_action checks it
	// like an API client's grant: refused, nothing is recorded. nil: none.
	Grant *bot.GrantChoice
	// Caller, when set, is the person the surface authenticated itself (the
	// web console's signed-in principal, surface "web"): the chat directory
	// is not consulted, and UserID only names the person in logs.
	Caller *bot.Caller
	// Confirm, with Verb Approve on a dangerous item (bot.Item.Danger), is
	// what the person typed to confirm it (the console, a typed command):
	// it must be the item's Danger.Target.
	Confirm string
	// Confirmed, with Verb Approve on a dangerous item, says the surface's
	// own confirmation step was passed: Slack's confirm dialog (the
	// platform sends the click only after it), Discord's second button.
	// Without it or Confirm, an approval of a dangerous item decides
	// nothing.
	Confirmed bool
	// Seen is what the person was shown when they decided (the card or
	// page the button was on), recorded on the vote; a dangerous item
	// approved from a card cut to fit is refused. nil: nothing was shown
	// (a typed command).
	Seen *bot.Seen
	// Batch, with Verb Approve, says the approval is one of a batch
	// (CheckBatch) of that bot.Item.Batch: the deciding transaction
	// refuses it, as Invalid, unless the item is of that batch as it
	// stands then. "": a decision on its own.
	Batch string
	// BreakGlass, with Verb Approve, approves the person's own request of
	// a tool under break_glass.tools as break-glass (breakglass.go): Reason
	// is then mandatory, and the one decision rule decides whether they may.
	BreakGlass bool
}

// caller is the principal the decision is taken as: the surface's own
// authenticated caller, else the chat user mapped through the directory.
func (d Decision) caller(b *bot.Bot) *bot.Caller {
	if d.Caller != nil {
		return d.Caller
	}
	return b.Chat().Caller(d.Surface, d.UserID, d.Roles)
}

// Status is how a decision ended.
type Status int

// The statuses of an Outcome.
const (
	// Decided: the decision was recorded and the item has its outcome.
	Decided Status = iota + 1
	// Counted: the decision was recorded and the item still waits for
	// others (a quorum).
	Counted
	// Ready: every check passed and nothing was decided yet (Prepare, and
	// ShowDetails when the detail may be shown).
	Ready
	// Duplicate: this delivery was seen before; nothing was applied again.
	Duplicate
	// Refused: the person may not do this (unmapped, out of scope, or the
	// one decision rule said no). The refusal is audited.
	Refused
	// Closed: the item already has its outcome; Reply says what was
	// recorded. Nothing was changed.
	Closed
	// NotFound: there is no such item.
	NotFound
	// Invalid: the decision does not fit the item (an option that is not
	// one of the question's, a rejection without a reason). Nothing was
	// recorded.
	Invalid
	// Failed: Countersign could not complete it (its fault, logged).
	Failed
)

// Outcome is what a surface renders after a decision: the item's state
// (when the person may see it) and the private reply for the person.
type Outcome struct {
	Status Status
	// Item is the item's state after the decision; zero (ID 0) when there
	// is none to show (no such item, an unmapped or out-of-scope user).
	Item bot.Item
	// Reply is the private text for the person, plain (the renderer
	// escapes it for its surface); "" when the updated item says it all.
	Reply string
	// Caller is the principal the person acted as; nil when unmapped.
	Caller *bot.Caller
	// Field, on an Invalid edit, is the argument (or "arguments", "value")
	// the tool found at fault, so a form shows the error on that input.
	Field string
}

// edited reports whether the decision carries an edit.
func (d Decision) edited() bool { return d.Arguments != nil || d.Value != nil }

// Decide takes one decision from a chat surface (or any surface that maps
// its users through the bot's chat directory: the web console too) and
// does all of it: identity (the platform user mapped to a principal, with
// its role and scopes: an unmapped user is refused and audited), then one
// typed decision (bot.Decide) in one store transaction: dedupe by
// d.Deliveries; the item read once (missing: NotFound; outside the
// person's scope: refused and audited, nothing revealed; already decided:
// Closed with the recorded outcome); the choices, reason, confirmation and
// version checked against the item (checks); the decision tool an API
// client calls, which applies the one decision rule (policy.Decide) and
// audits a refusal; and the item's new state. A refusal, a conflict or a
// failure never panics and never leaks another space's item.
func Decide(ctx context.Context, b *bot.Bot, d Decision) (out Outcome) {
	ctx, span := startDecision(ctx, b, d) // trace.go
	defer func() { endDecision(span, out) }()
	if d.UserID == "" {
		return Outcome{Status: Invalid, Reply: "Countersign could not tell who sent this, so it did nothing."}
	}
	caller := d.caller(b)
	if caller == nil {
		out, _ := begin(ctx, b, d) // dedupe, then the refusal, audited
		return out
	}
	bd := bot.Decision{ItemID: d.ItemID, Approve: d.Verb != Reject, Reason: strings.TrimSpace(d.Reason), Deliveries: d.Deliveries}
	bd.Check = func(it bot.Item, bd *bot.Decision) error {
		if out, audit := checks(b, d, caller, it, bd); out.Status != Ready {
			return &stopped{out: out, space: it.Space, audit: audit}
		}
		return nil
	}
	dec, err := b.Decide(ctx, caller, bd)
	var stop *stopped
	switch {
	case errors.As(err, &stop):
		if stop.audit != "" {
			refuse(ctx, b, d, caller, stop.space, stop.audit)
		}
		return stop.out
	case errors.Is(err, bot.ErrDuplicate):
		return duplicate(ctx, b, d)
	case errors.Is(err, bot.ErrNoItem):
		return Outcome{Status: NotFound, Caller: caller, Reply: fmt.Sprintf("No item #%d. `pending` lists the items awaiting a decision.", d.ItemID)}
	case err != nil:
		out := failed(b, d, caller, dec.Item, err)
		var be *bot.Error
		if d.edited() && out.Status == Invalid && errors.As(err, &be) {
			out.Field = be.Field
			// A schema error names the whole arguments; its message names
			// the property ("validating /properties/dose: ..."), which
			// is the input a form shows it under.
			if m := schemaProperty.FindStringSubmatch(be.Msg); be.Field == ArgumentsInput && m != nil {
				out.Field = ArgumentsInput + "." + m[1]
			}
		}
		return out
	}
	b.Logger().InfoContext(ctx, "decided from chat", "surface", d.Surface, "item", d.ItemID, "caller", caller.String(), "verb", string(d.Verb), "edited", bd.Edit != nil)
	out = settled(caller, dec.Item)
	if d.Grant != nil {
		out.Reply = grantMade(dec.Result)
	}
	return out
}

// stopped ends a decision in its transaction before the decision tool
// runs (checks said no): out is the answer, and audit, when not "", the
// refusal to audit under space once the transaction is rolled back.
type stopped struct {
	out   Outcome
	space bot.Space
	audit string
}

func (s *stopped) Error() string { return fmt.Sprintf("chat: decision stopped: %s", s.out.Reply) }

// checks are what chat checks of a decision on item it, as it stands in
// the deciding transaction, before the decision tool runs: the item in
// the person's scope and pending (admit), the verb against the item, a
// dangerous item's confirmation, the version the person saw. It completes
// bd from d and it; Status Ready means go on, anything else is the answer
// (with, for a refusal, the detail to audit).
func checks(b *bot.Bot, d Decision, caller *bot.Caller, it bot.Item, bd *bot.Decision) (Outcome, string) {
	if out, audit := admit(d, caller, it); out.Status != Ready {
		return out, audit
	}
	if d.BreakGlass {
		return breakGlassChecks(d, caller, it, bd), ""
	}
	approve := d.Verb != Reject
	switch d.Verb {
	case Answer:
		if it.Kind != bot.KindQuestion {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("#%d is not a question; approve or reject it.", it.ID)}, ""
		}
		answers, msg := chosen(it, d.Choices)
		if msg != "" {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: msg}, ""
		}
		bd.Answers = answers
	case Reject:
		if strings.TrimSpace(d.Reason) == "" && it.Kind != bot.KindQuestion {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("A reason is required to reject #%d; nothing was recorded.", it.ID)}, ""
		}
	case Approve:
		if it.Kind == bot.KindQuestion {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("#%d is a question: choose an answer. An answer is never an approval.", it.ID)}, ""
		}
		if d.Batch != "" && it.Batch != d.Batch {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("#%d is no longer approved in a batch of %s (it changed since the batch was checked); nothing was recorded on it. Approve it on its own.", it.ID, d.Batch)}, ""
		}
		if out, ok := dangerChecks(b, d, caller, it, b.Now()); !ok {
			return out, ""
		}
		if d.edited() {
			if d.Grant != nil {
				return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("A standing grant is made with an approval as proposed, not with an edit; nothing was recorded on #%d.", it.ID)}, ""
			}
			return editChecks(d, caller, it, bd), ""
		}
		if msg := checkVersion(&d, it); msg != "" {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: msg}, ""
		}
	default:
		return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("%q is not a decision; approve, reject or answer.", string(d.Verb))}, ""
	}
	if d.Grant != nil {
		if d.Verb != Approve {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("A standing grant comes only with an approval; nothing was recorded on #%d.", it.ID)}, ""
		}
		if it.Kind != bot.KindAction {
			return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("#%d is not an action request, and standing grants are made on action requests only; nothing was recorded.", it.ID)}, ""
		}
		bd.Grant = d.Grant
	}
	if d.ArgsSHA256 != "" && approve && it.Version != "" {
		bd.ArgsSHA256 = d.ArgsSHA256
	}
	if d.Seen != nil {
		// What the person was shown, with the digest of the facts the
		// card showed; a source whose tool records none ignores it.
		bd.Seen = d.Seen
		if len(it.Facts) > 0 && d.Verb == Approve {
			bd.Facts = bot.FactsDigestOf(it.Facts)
		}
	}
	return Outcome{Status: Ready, Item: it, Caller: caller}, ""
}

// admit checks what every decision, preparation or view of an item
// passes once the item is read: its space in the person's scope (else a
// refusal, with the detail to audit, revealing nothing), and pending
// (else Closed with the recorded outcome). Status Ready means go on.
func admit(d Decision, caller *bot.Caller, it bot.Item) (Outcome, string) {
	if !policy.InScope(caller.Role, caller.Scopes, it.Space.UserID) {
		msg := fmt.Sprintf("Access denied: #%d belongs to a memory space outside your assigned scope.", it.ID)
		return Outcome{Status: Refused, Caller: caller, Reply: msg}, fmt.Sprintf("%s #%d: %s", d.Verb, d.ItemID, msg)
	}
	if !it.Pending() {
		return Outcome{Status: Closed, Item: it, Caller: caller, Reply: recordedOutcome(it)}, ""
	}
	return Outcome{Status: Ready, Item: it, Caller: caller}, ""
}

// checkVersion checks the version an approval of item it names (the
// card's or page's Basis, or a typed ArgsSHA256) against the version up
// for approval now, and puts an action request's into d.ArgsSHA256, so
// that approve_action checks it again in the deciding transaction: a
// version replaced between this look and the decision is refused there.
// An action request edited since it was created is approved only with a
// version named. It returns the refusal, or "".
func checkVersion(d *Decision, it bot.Item) string {
	switch {
	case d.Basis != "" && len(d.Basis) < 64:
		// A card posted before versions were carried in full.
		return fmt.Sprintf("This button is on a card of #%d from before an update of Countersign, and cannot name the version you saw; nothing was recorded. Type `show %d` to see what is up for approval now, then `approve %d <version>`, or approve it in the web console.", it.ID, it.ID, it.ID)
	case d.Basis != "" && d.Basis != EditBasis(it):
		// The card or page the person clicked showed another version
		// (another approver has edited it since, or a fact it rests on
		// changed): an approval counts only for what the approver saw.
		return changedSinceShown(it, d.Basis)
	case it.Version == "":
		return "" // not an action request: no version in the decision
	case d.ArgsSHA256 != "" && d.ArgsSHA256 != it.Version && d.Basis == "":
		return fmt.Sprintf("#%d changed after the version you approved was shown to you (another approver edited it), or that is not its version; nothing was recorded. Look at #%d again (`show %d` gives its version) and approve what is proposed now if you agree.", it.ID, it.ID, it.ID)
	}
	if d.ArgsSHA256 == "" && d.Basis != "" {
		// The card showed the version up now (its basis matched): the
		// deciding transaction checks that it still is.
		d.ArgsSHA256 = it.Version
	}
	if d.ArgsSHA256 == "" && it.Revised {
		return fmt.Sprintf("#%d was edited after it was created, so an approval must name the version it approves; nothing was recorded. Use the Approve button on its card or in the web console, or type `show %d` and then `approve %d <version>` with the version it gives.", it.ID, it.ID, it.ID)
	}
	return ""
}

// dangerChecks are what an approval of a dangerous item (bot.Item.Danger)
// needs besides the rest: a card shown whole, and the confirmation step
// passed (the surface's own, or the target typed). ok is false with the
// outcome to answer when one is missing; nothing is recorded then.
func dangerChecks(b *bot.Bot, d Decision, caller *bot.Caller, it bot.Item, now time.Time) (Outcome, bool) {
	if _, readOnly := b.Items().ReadOnly(caller, it); it.Danger == nil || readOnly || (it.StepUp > 0 && !caller.SteppedUp(it.StepUp, now)) {
		// Not dangerous; or the person may not decide it at all (or not
		// without a fresh sign-in first), which the decision tool refuses
		// (and audits) by the one rule, with the step-up link.
		return Outcome{}, true
	}
	if d.Seen != nil && d.Seen.Truncated {
		where := "in the web console"
		if it.WebURL != "" {
			where = "in the web console: " + it.WebURL
		}
		return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: fmt.Sprintf("The %s card of #%d was cut to fit, and #%d cannot be undone, so your approval was not counted; nothing was recorded. Read it whole and approve it %s.", d.Seen.Surface, it.ID, it.ID, where)}, false
	}
	if !d.Confirmed && strings.TrimSpace(d.Confirm) != it.Danger.Target {
		msg := fmt.Sprintf("#%d cannot be undone (%s), so approving it takes a confirmation; nothing was recorded. %s.", it.ID, bot.OneLine(it.Danger.Confirm, 200), TypeToConfirm(it))
		if strings.TrimSpace(d.Confirm) != "" {
			msg = fmt.Sprintf("What you typed is not the %s of #%d; nothing was recorded. %s.", bot.OneLine(it.Danger.TargetLabel, 60), it.ID, TypeToConfirm(it))
		}
		return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: msg, Field: ConfirmField}, false
	}
	return Outcome{}, true
}

// ConfirmField is the Field of an approval refused for want of a
// dangerous item's confirmation: a surface shows its confirmation step.
const ConfirmField = "confirm"

// changedSinceShown says why an approval from a card or page showing
// basis is refused: the arguments were edited, or the facts changed.
func changedSinceShown(it bot.Item, basis string) string {
	noFacts := it
	noFacts.Facts = nil
	if len(it.Facts) > 0 && (EditBasis(noFacts) == "" || EditBasis(noFacts) != basis) {
		// Either the facts changed, or the card showed none: say what
		// they are now.
		lines := make([]string, len(it.Facts))
		for i, f := range it.Facts {
			lines[i] = FactLine(f)
		}
		return fmt.Sprintf("#%d changed after it was shown to you: the facts it rests on are now %s (or its arguments were edited); nothing was recorded. Look at #%d again and approve it if you still agree.", it.ID, strings.Join(lines, "; "), it.ID)
	}
	return fmt.Sprintf("#%d changed after it was shown to you (another approver edited it); nothing was recorded. Look at #%d again and approve what is proposed now if you agree.", it.ID, it.ID)
}

// editChecks check an approval with the decision's edit against item it
// and put the edit in bd (the decision tool validates it like an API
// client's). An edit that changes nothing is a plain approval.
func editChecks(d Decision, caller *bot.Caller, it bot.Item, bd *bot.Decision) Outcome {
	invalid := func(field, msg string) Outcome {
		return Outcome{Status: Invalid, Item: it, Caller: caller, Field: field, Reply: msg}
	}
	switch {
	case it.Editable == nil:
		return invalid("", fmt.Sprintf("#%d cannot be edited: only a pending action request's arguments or a memory proposal's value can. Approve or reject it as it is; nothing was recorded.", it.ID))
	case d.Basis != "" && d.Basis != EditBasis(it):
		return invalid("", fmt.Sprintf("#%d changed after you opened the edit form (another approver edited it); nothing was recorded. Open the form again to see what is proposed now.", it.ID))
	}
	var edit json.RawMessage // nil: the edit changes nothing
	switch it.Editable.Kind {
	case bot.EditArguments:
		if d.Arguments == nil || d.Value != nil {
			return invalid(ArgumentsInput, fmt.Sprintf("#%d is an action request: edit its arguments; nothing was recorded.", it.ID))
		}
		if !json.Valid(d.Arguments) || bytes.TrimSpace(d.Arguments)[0] != '{' {
			return invalid(ArgumentsInput, "The arguments must be one JSON object; nothing was recorded.")
		}
		if !sameJSON(d.Arguments, it.Editable.Current) {
			edit = d.Arguments
		}
	case bot.EditValue:
		if d.Value == nil || d.Arguments != nil {
			return invalid(valueInput, fmt.Sprintf("#%d is a memory change: edit its value; nothing was recorded.", it.ID))
		}
		v := strings.TrimSpace(*d.Value)
		if v == "" {
			return invalid(valueInput, "Give the value to approve; it cannot be empty. Nothing was recorded.")
		}
		if v != editableValue(it) {
			edit, _ = json.Marshal(v)
		}
	default:
		return invalid("", fmt.Sprintf("#%d is a %s; it cannot be edited here. Nothing was recorded.", it.ID, KindNoun(it.Kind)))
	}
	// The version the form started from, checked again in the deciding
	// transaction (an action request's; a memory proposal does not change
	// while it waits).
	if it.Version != "" && d.Basis != "" {
		bd.ArgsSHA256 = d.Basis
	}
	bd.Edit = edit
	return Outcome{Status: Ready, Item: it, Caller: caller}
}

// schemaProperty finds the top-level property a JSON Schema error is about.
var schemaProperty = regexp.MustCompile(`/properties/([^/:\s"]+)`)

// settled is the outcome of a recorded decision, from the item as the
// deciding transaction left it: Decided, or Counted while it waits for
// others.
func settled(caller *bot.Caller, now bot.Item) Outcome {
	if now.Pending() {
		reply := fmt.Sprintf("Your decision on #%d is recorded; it still needs others.", now.ID)
		if now.Tally != "" {
			reply += " " + bot.OneLine(now.Tally, 200)
		}
		return Outcome{Status: Counted, Item: now, Caller: caller, Reply: reply}
	}
	return Outcome{Status: Decided, Item: now, Caller: caller}
}

// Prepare runs Decide's checks (dedupe, identity, the item pending and in
// the person's scope) without deciding: a surface calls it before asking
// for a reason (Slack's and Discord's reject form). Status Ready carries the
// pending item.
func Prepare(ctx context.Context, b *bot.Bot, d Decision) Outcome {
	out, _ := begin(ctx, b, d)
	return out
}

// sensitiveDetails shows a sensitive item's full detail to someone who
// may decide it (a person holding approve, its space in scope): Ready
// with the item, the view audited as view_sensitive. Anyone else is refused privately,
// and audited.
func sensitiveDetails(ctx context.Context, b *bot.Bot, d Decision) Outcome {
	out, caller := begin(ctx, b, d)
	if out.Status != Ready {
		return out
	}
	it := out.Item
	if !caller.MaySeeDetails(it) {
		refuse(ctx, b, d, caller, it.Space, fmt.Sprintf("details #%d refused: %s (role %s) may not decide it (approve capability and scope)", it.ID, caller, caller.Role))
		return Outcome{Status: Refused, Caller: caller, Reply: fmt.Sprintf("Countersign did not show the details of #%d: they are shown only to approvers who may decide it (a role holding approve, with its space in scope), and your principal (role %s) is not one. This is by design; an approver can review it.", it.ID, caller.Role)}
	}
	if err := b.Chat().Audit(ctx, caller, it.Space, "view_sensitive", fmt.Sprintf("%s: details of #%d shown privately", d.Surface, it.ID)); err != nil {
		b.Logger().Error("chat: auditing a details view failed; details withheld", "item", it.ID, "err", err)
		return Outcome{Status: Failed, Caller: caller, Reply: couldNotComplete}
	}
	return Outcome{Status: Ready, Item: it, Caller: caller}
}

// begin runs the checks every preparation and view passes (a decision
// passes them in its transaction: Decide): dedupe, identity, the item
// loaded once, scope, pending. Status Ready means go on, with the item and
// the caller.
func begin(ctx context.Context, b *bot.Bot, d Decision) (Outcome, *bot.Caller) {
	if d.UserID == "" {
		return Outcome{Status: Invalid, Reply: "Countersign could not tell who sent this, so it did nothing."}, nil
	}
	if len(d.Deliveries) > 0 {
		first, err := b.Deliveries().First(ctx, d.Deliveries...)
		if err != nil {
			b.Logger().Error("chat: recording a delivery failed; nothing applied", "surface", d.Surface, "deliveries", d.Deliveries, "err", err)
			return Outcome{Status: Failed, Reply: couldNotComplete}, nil
		}
		if !first {
			return duplicate(ctx, b, d), nil
		}
	}
	caller := d.caller(b)
	what := fmt.Sprintf("%s #%d", d.Verb, d.ItemID)
	if caller == nil {
		refuse(ctx, b, d, nil, bot.Space{}, fmt.Sprintf("%s refused: %s user %s is not mapped to a principal", what, d.Surface, bot.OneLine(d.UserID, 64)))
		return Outcome{Status: Refused, Reply: fmt.Sprintf("Access denied: I can't %s for you. %s", what, unmappedNote(d.Surface, d.UserID))}, nil
	}
	it, err := b.Items().Get(ctx, d.ItemID)
	switch {
	case errors.Is(err, bot.ErrNoItem):
		return Outcome{Status: NotFound, Caller: caller, Reply: fmt.Sprintf("No item #%d. `pending` lists the items awaiting a decision.", d.ItemID)}, caller
	case err != nil:
		b.Logger().Error("chat: loading an item failed", "item", d.ItemID, "err", err)
		return Outcome{Status: Failed, Caller: caller, Reply: couldNotComplete}, caller
	}
	out, audit := admit(d, caller, it)
	if audit != "" {
		refuse(ctx, b, d, caller, it.Space, audit)
	}
	return out, caller
}

// duplicate answers a delivery seen before: the recorded outcome if the
// item is decided (and the person may see it), else that it counted once.
func duplicate(ctx context.Context, b *bot.Bot, d Decision) Outcome {
	out := Outcome{Status: Duplicate, Reply: fmt.Sprintf("Countersign already received this for #%d; it was not applied twice.", d.ItemID)}
	caller := d.caller(b)
	if caller == nil {
		return out
	}
	out.Caller = caller
	it, err := b.Items().Get(ctx, d.ItemID)
	if err == nil && policy.InScope(caller.Role, caller.Scopes, it.Space.UserID) {
		out.Item = it
		if !it.Pending() {
			out.Reply = recordedOutcome(it)
		}
	}
	return out
}

// failed turns a refused or failed decision into its outcome; it is the
// item as the deciding transaction left it (zero when it was not read).
func failed(b *bot.Bot, d Decision, caller *bot.Caller, it bot.Item, err error) Outcome {
	var be *bot.Error
	if !errors.As(err, &be) || be.Kind == bot.KindInternal {
		b.Logger().Error("chat: decision failed", "surface", d.Surface, "item", d.ItemID, "caller", caller.String(), "err", err)
		return Outcome{Status: Failed, Item: it, Caller: caller, Reply: couldNotDecide}
	}
	b.Logger().Info("chat: decision refused", "surface", d.Surface, "item", d.ItemID, "caller", caller.String(), "kind", be.Kind, "msg", be.Msg)
	switch be.Kind {
	case bot.KindConflict:
		// Decided meanwhile, expired, or stale: answer with what was
		// recorded, not with the tool's conflict wording.
		if it.ID != 0 && !it.Pending() {
			return Outcome{Status: Closed, Item: it, Caller: caller, Reply: recordedOutcome(it)}
		}
		return Outcome{Status: Closed, Item: it, Caller: caller, Reply: be.Msg}
	case bot.KindDenied, bot.KindUnauthenticated:
		if (d.Surface == bot.SurfaceSlack || d.Surface == bot.SurfaceDiscord || d.Surface == bot.SurfaceTeams) && (errors.Is(err, policy.CheckStepUp) || errors.Is(err, policy.CheckAssurance)) {
			// A fresh sign-in in the console meets a step-up and every
			// minimum of assurance the console can give: offer the link.
			return Outcome{Status: Refused, Item: it, Caller: caller, Reply: stepUpReply(b, caller, it)}
		}
		return Outcome{Status: Refused, Item: it, Caller: caller, Reply: be.Msg}
	case bot.KindNotFound:
		return Outcome{Status: NotFound, Caller: caller, Reply: be.Msg}
	}
	return Outcome{Status: Invalid, Item: it, Caller: caller, Reply: be.Error()}
}

// refuse audits a refused chat attempt: as the mapped principal when there
// is one, else as the unmapped chat identity. A failure to audit is
// logged; the refusal stands.
func refuse(ctx context.Context, b *bot.Bot, d Decision, caller *bot.Caller, sp bot.Space, detail string) {
	var err error
	if caller == nil {
		err = b.Chat().Deny(ctx, d.Surface, d.UserID, detail)
	} else {
		err = b.Chat().Audit(ctx, caller, sp, "access_denied", d.Surface+": "+detail)
	}
	if err != nil {
		b.Logger().Error("chat: auditing a refusal failed; the refusal stands", "surface", d.Surface, "user", bot.OneLine(d.UserID, 64), "err", err)
	}
}

// chosen maps a question's chosen option indexes to the options.
func chosen(it bot.Item, choices []int) ([]string, string) {
	if len(choices) == 0 {
		return nil, fmt.Sprintf("Choose an answer for #%d; nothing was recorded.", it.ID)
	}
	if !it.Multi && len(choices) > 1 {
		return nil, fmt.Sprintf("#%d takes one answer; nothing was recorded.", it.ID)
	}
	seen := map[int]bool{}
	out := make([]string, 0, len(choices))
	for _, n := range choices {
		if n < 0 || n >= len(it.Options) || seen[n] {
			return nil, fmt.Sprintf("That answer is not one of #%d's options; nothing was recorded.", it.ID)
		}
		seen[n] = true
		out = append(out, it.Options[n])
	}
	return out, ""
}

// Replies to a failure that is Countersign's, not the person's. Neither
// claims to know whether anything changed.
const (
	couldNotComplete = "Sorry, I couldn't complete that. It may be a temporary fault; try again in a moment."
	couldNotDecide   = "Sorry, I couldn't complete that decision. It may be a temporary fault; check the item with `show <id>` before trying again."
)

// unmappedNote says why an unmapped chat user cannot act, and whom to ask.
func unmappedNote(surface, userID string) string {
	id := bot.OneLine(userID, 64)
	switch surface {
	case bot.SurfaceSlack:
		return fmt.Sprintf("Your Slack account (%s) is not mapped to a Countersign principal. This is by design: only people listed under principals: in Countersign's config.yaml act from chat. Ask a Countersign admin to add your Slack user id there.", id)
	case bot.SurfaceDiscord:
		return fmt.Sprintf("Your Discord account (%s) is not mapped to a Countersign principal. This is by design: only people listed under principals: in Countersign's config.yaml act from chat. Ask a Countersign admin to add your Discord user id, or one of your Discord roles, there.", id)
	case bot.SurfaceTeams:
		return fmt.Sprintf("Your Microsoft Teams account (Entra object id %s) is not mapped to a Countersign principal. This is by design: only people listed under principals: in Countersign's config.yaml act from chat. Ask a Countersign admin to add your Entra object id there (principals[].teams).", id)
	default:
		return fmt.Sprintf("Your account (%s) is not mapped to a Countersign principal. This is by design: only people listed under principals: in Countersign's config.yaml decide. Ask a Countersign admin to add you there.", id)
	}
}

// stepUpReply answers a chat approval of an item that requires step-up
// (the one rule refused it, and audited the refusal): a one-time link to
// approve it in the console after a fresh sign-in, for this person only.
// The item stays pending.
func stepUpReply(b *bot.Bot, caller *bot.Caller, it bot.Item) string {
	link, err := b.WebLinks().StepUp(caller, it.ID)
	if err != nil {
		b.Logger().Warn("chat: no step-up link", "item", it.ID, "caller", caller.String(), "err", err)
		return fmt.Sprintf("Step-up required: approving #%d needs a fresh sign-in at your identity provider, in the web console, and I could not make you a link (%s). Nothing was recorded; #%d stays pending. Open it in the console and sign in again there, or ask another approver.", it.ID, err, it.ID)
	}
	return fmt.Sprintf("Step-up required: approving #%d needs a fresh sign-in at your identity provider. Approve it in the console after signing in again: %s (one use, for you only, valid 5 minutes). Nothing was recorded; #%d stays pending.", it.ID, link, it.ID)
}

// ShowDetails shows an item's folded detail (bot.Item.Details and its
// votes: what a Details button opens) to someone who may read the item: a
// mapped principal whose role holds read, with the item's space in scope,
// pending or decided. A sensitive item's detail is shown only as
// sensitiveDetails shows it (to those who may decide it, audited). Ready carries the item.
func ShowDetails(ctx context.Context, b *bot.Bot, d Decision) Outcome {
	out, caller := begin(ctx, b, d)
	if out.Status == Closed {
		out.Status, out.Reply = Ready, ""
	}
	if out.Status != Ready {
		return out
	}
	it := out.Item
	if it.Sensitive {
		return sensitiveDetails(ctx, b, Decision{Surface: d.Surface, UserID: d.UserID, Roles: d.Roles, ItemID: d.ItemID, Verb: ViewDetails, Caller: d.Caller})
	}
	if !caller.MayRead() {
		msg := policy.DenyCapability(fmt.Sprintf("details #%d", it.ID), policy.CapRead, caller.Role)
		refuse(ctx, b, d, caller, it.Space, msg)
		return Outcome{Status: Refused, Caller: caller, Reply: msg}
	}
	return Outcome{Status: Ready, Item: it, Caller: caller}
}

// DetailsText is an item's folded detail as private text: its Details
// fields and its votes, each with what the voter was shown.
func DetailsText(it bot.Item) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s of #%d (%s):", DetailsLabel, it.ID, KindNoun(it.Kind))
	for _, f := range it.Details {
		b.WriteString("\n• " + bot.OneLine(f.Label, 60) + ": " + bot.OneLine(f.Value, 600))
	}
	if len(it.Votes) > 0 {
		b.WriteString("\nVotes:")
		for _, v := range it.Votes {
			b.WriteString("\n• " + VoteLine(v))
		}
	}
	return b.String()
}

// VoteLine is one vote on one line: who, which way, when, and what they
// were shown ("alice [prin_a] approved at 2026-03-02 08:05 UTC, on the
// slack card sha256 3f2a…(whole)"); a vote that no longer counts says so.
func VoteLine(v bot.VoteView) string {
	way := "approved"
	if !v.Approve {
		way = "refused"
	}
	s := bot.OneLine(v.By, 120) + " " + way + " at " + Stamp(v.At)
	if v.Seen != nil {
		s += ", on the " + v.Seen.String()
	} else {
		s += ", on no card (an API call or a typed command)"
	}
	switch {
	case v.Approve && !v.Counts && v.Void != "":
		s += "; no longer counts: " + bot.OneLine(v.Void, 300)
	case v.Approve && !v.Counts:
		s += "; no longer counts (cast on earlier arguments or facts)"
	}
	return s
}
