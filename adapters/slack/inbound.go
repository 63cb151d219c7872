package slack

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
	slackgo "github.com/slack-go/slack"
)

// click is what a worker needs of a button press. Only ids are taken from
// the payload: the item is always loaded from the store.
type click struct {
	deliveries []string // dedupe keys, in order
	user       string
	channel    string
	action     string // actionApprove, actionReject, actionAnswer+i, actionSubmit
	value      string // the button's value: "12", or "12:3" for an option
	trigger    string
	chosen     []string // a multi-choice question's checked option values
}

// submission is a submitted reason modal.
type submission struct {
	deliveries []string
	user       string
	metadata   string // "12|C0123"
	reason     string
}

// interaction accepts one verified interaction payload. It returns the
// acknowledgement payload (nil for an empty acknowledgement; a
// *slackgo.ViewSubmissionResponse for a form error) and whether the
// interaction was accepted: false means the worker queue is full and the
// delivery must not be acknowledged. deliveries are the transport's dedupe
// keys (the Socket Mode envelope id); the trigger id is added here.
func (a *Adapter) interaction(cb slackgo.InteractionCallback, deliveries []string) (ack any, accepted bool) {
	if cb.TriggerID != "" {
		deliveries = append(deliveries, "slack:trigger:"+cb.TriggerID)
	}
	switch cb.Type {
	case slackgo.InteractionTypeBlockActions:
		if len(cb.ActionCallback.BlockActions) == 0 {
			return nil, true
		}
		act := cb.ActionCallback.BlockActions[0]
		switch {
		case act.ActionID == actionApprove, act.ActionID == actionReject, act.ActionID == actionSubmit,
			strings.HasPrefix(act.ActionID, actionAnswer):
		default:
			return nil, true // a checkbox toggled, or not ours: nothing to do
		}
		if len(deliveries) == 0 {
			deliveries = []string{"slack:action:" + cb.User.ID + ":" + act.ActionTs}
		}
		c := click{
			deliveries: deliveries, user: cb.User.ID, channel: cb.Container.ChannelID,
			action: act.ActionID, value: act.Value, trigger: cb.TriggerID,
		}
		if c.channel == "" {
			c.channel = cb.Channel.ID
		}
		if act.ActionID == actionSubmit && cb.BlockActionState != nil {
			for _, o := range cb.BlockActionState.Values[act.BlockID][actionChoices].SelectedOptions {
				c.chosen = append(c.chosen, o.Value)
			}
		}
		return nil, a.enqueue(func(ctx context.Context) { a.handleClick(ctx, c) })
	case slackgo.InteractionTypeViewSubmission:
		if cb.View.CallbackID != callbackReject {
			return nil, true
		}
		var reason string
		if cb.View.State != nil {
			reason = strings.TrimSpace(cb.View.State.Values[reasonBlock][reasonAction].Value)
		}
		switch {
		case reason == "":
			return slackgo.NewErrorsViewSubmissionResponse(map[string]string{reasonBlock: "Give a reason: it is recorded with the decision."}), true
		case utf8.RuneCountInString(reason) > maxReason:
			return slackgo.NewErrorsViewSubmissionResponse(map[string]string{reasonBlock: fmt.Sprintf("Keep the reason to %d characters.", maxReason)}), true
		}
		if len(deliveries) == 0 {
			deliveries = []string{"slack:view:" + cb.View.ID}
		}
		s := submission{deliveries: deliveries, user: cb.User.ID, metadata: cb.View.PrivateMetadata, reason: reason}
		if !a.enqueue(func(ctx context.Context) { a.handleSubmission(ctx, s) }) {
			return slackgo.NewErrorsViewSubmissionResponse(map[string]string{reasonBlock: "Countersign is busy; submit again in a moment."}), true
		}
		return nil, true
	}
	return nil, true
}

// first reports whether none of the delivery ids was seen before, recording
// them all. A store failure counts as seen: nothing is applied twice.
func (a *Adapter) first(ctx context.Context, ids []string) bool {
	fresh := true
	for _, id := range ids {
		ok, err := a.bot.FirstDelivery(ctx, id)
		if err != nil {
			a.log.Error("delivery dedupe failed; click dropped", "delivery", id, "err", err)
			return false
		}
		if !ok {
			fresh = false
		}
	}
	if !fresh {
		a.log.Info("duplicate delivery ignored", "deliveries", ids)
	}
	return fresh
}

func (a *Adapter) handleClick(ctx context.Context, c click) {
	if !a.first(ctx, c.deliveries) {
		return
	}
	idPart, optPart, hasOpt := strings.Cut(c.value, ":")
	id, err := bot.ParseItemID(idPart)
	if err != nil {
		a.tell(ctx, c.channel, c.user, "This button does not name a Countersign item; nothing was recorded.")
		return
	}
	verb := "approve"
	if c.action == actionReject {
		verb = "reject"
	} else if c.action != actionApprove {
		verb = "answer"
	}
	caller := a.bot.SlackCaller(c.user)
	if caller == nil {
		a.refuseUnmapped(ctx, c.channel, c.user, fmt.Sprintf("%s #%d", verb, id))
		return
	}
	it, ok := a.pendingItem(ctx, c.channel, c.user, id)
	if !ok {
		return
	}
	switch {
	case c.action == actionApprove:
		a.decide(ctx, c.channel, c.user, caller, id, true, "", nil)
	case c.action == actionReject:
		if _, err := a.api.OpenViewContext(ctx, c.trigger, reasonModal(it, c.channel)); err != nil {
			a.log.Warn("reason form not opened", "item", id, "err", err)
			a.tell(ctx, c.channel, c.user, fmt.Sprintf("Slack could not open the reason form for #%d (%v). Click %s again.", id, err, strings.ToUpper(verb[:1])+verb[1:]))
		}
	case strings.HasPrefix(c.action, actionAnswer):
		i, err := strconv.Atoi(optPart)
		if !hasOpt || err != nil || i < 0 || i >= len(it.Options) {
			a.tell(ctx, c.channel, c.user, fmt.Sprintf("That option is not one of #%d's; nothing was recorded.", id))
			return
		}
		a.decide(ctx, c.channel, c.user, caller, id, true, "", []string{it.Options[i]})
	case c.action == actionSubmit:
		var answers []string
		for _, v := range c.chosen {
			i, err := strconv.Atoi(v)
			if err != nil || i < 0 || i >= len(it.Options) {
				a.tell(ctx, c.channel, c.user, fmt.Sprintf("A checked option is not one of #%d's; nothing was recorded.", id))
				return
			}
			answers = append(answers, it.Options[i])
		}
		if len(answers) == 0 {
			a.tell(ctx, c.channel, c.user, "Check at least one option, then press Submit.")
			return
		}
		a.decide(ctx, c.channel, c.user, caller, id, true, "", answers)
	}
}

func (a *Adapter) handleSubmission(ctx context.Context, s submission) {
	if !a.first(ctx, s.deliveries) {
		return
	}
	idPart, channel, _ := strings.Cut(s.metadata, "|")
	id, err := bot.ParseItemID(idPart)
	if err != nil {
		a.log.Warn("reason form without an item id", "metadata", s.metadata)
		return
	}
	caller := a.bot.SlackCaller(s.user)
	if caller == nil {
		a.refuseUnmapped(ctx, channel, s.user, fmt.Sprintf("reject #%d", id))
		return
	}
	if _, ok := a.pendingItem(ctx, channel, s.user, id); !ok {
		return
	}
	a.decide(ctx, channel, s.user, caller, id, false, s.reason, nil)
}

// pendingItem loads item id; if it is missing or already decided it tells
// the clicker privately (with the recorded outcome) and returns false.
func (a *Adapter) pendingItem(ctx context.Context, channel, user string, id uint64) (bot.Item, bool) {
	it, err := a.bot.Item(ctx, id)
	switch {
	case errors.Is(err, bot.ErrNoItem):
		a.tell(ctx, channel, user, fmt.Sprintf("No item #%d.", id))
		return it, false
	case err != nil:
		a.log.Error("item not loaded", "item", id, "err", err)
		a.tell(ctx, channel, user, internalFault)
		return it, false
	case !it.Pending():
		a.tell(ctx, channel, user, recordedOutcome(it))
		return it, false
	}
	return it, true
}

const internalFault = "Countersign could not record your decision because of an internal fault; nothing was changed. Try again, or decide through the API."

// decide takes the decision through the one code path of every surface
// (capability, requester ≠ approver, quorum, staleness, one decision once)
// and answers the clicker privately when it is refused or still needs
// others. The messages themselves are updated from the outbox.
func (a *Adapter) decide(ctx context.Context, channel, user string, caller *bot.Caller, id uint64, approve bool, reason string, answers []string) {
	_, err := a.bot.DecideItem(ctx, caller, id, approve, reason, answers)
	if err != nil {
		var be *bot.Error
		if !errors.As(err, &be) {
			a.log.Error("decision failed", "item", id, "caller", caller.String(), "err", err)
			a.tell(ctx, channel, user, internalFault)
			return
		}
		a.log.Info("decision refused", "item", id, "caller", caller.String(), "kind", be.Kind, "msg", be.Msg)
		msg := be.Msg
		if be.Kind == bot.KindConflict {
			if it, err := a.bot.Item(ctx, id); err == nil && !it.Pending() {
				msg += "\n" + recordedOutcome(it)
			}
		}
		a.tell(ctx, channel, user, msg)
		return
	}
	a.log.Info("decided from slack", "item", id, "caller", caller.String(), "approve", approve)
	if it, err := a.bot.Item(ctx, id); err == nil && it.Pending() {
		msg := fmt.Sprintf("Your decision on #%d is recorded; it still needs others.", id)
		if it.Tally != "" {
			msg += " " + it.Tally
		}
		a.tell(ctx, channel, user, msg)
	}
}

// refuseUnmapped audits a click or command from a Slack user who is not
// mapped to a principal, and tells them privately why nothing happened.
func (a *Adapter) refuseUnmapped(ctx context.Context, channel, user, what string) {
	if err := a.bot.DenyChat(ctx, Sink, user, what+": not mapped to a principal"); err != nil {
		a.log.Error("refused click not audited", "user", user, "err", err)
	}
	a.log.Info("unmapped slack user refused", "user", user, "what", what)
	a.tell(ctx, channel, user, fmt.Sprintf(
		"Access denied: your Slack user %s is not mapped to a Countersign principal, so you cannot %s. Nothing was changed and the attempt is recorded in the audit log. "+
			"This is by design: only people listed under principals in Countersign's config decide from chat; ask an administrator to add you, or ask a mapped approver.", user, what))
}

// tell answers one user privately (chat.postEphemeral). The text is plain:
// it is escaped here. Failures are logged: the answer is a courtesy, the
// decision (or refusal) is already recorded.
func (a *Adapter) tell(ctx context.Context, channel, user, msg string) {
	if channel == "" || user == "" {
		a.log.Warn("private answer has nowhere to go", "user", user, "msg", msg)
		return
	}
	if _, err := a.api.PostEphemeralContext(ctx, channel, user, slackgo.MsgOptionText(text(msg, maxSectionText), false)); err != nil {
		a.log.Warn("private answer not delivered", "user", user, "channel", channel, "err", err)
	}
}

// commandResponse is the answer to a slash command: the HTTP response body
// or the Socket Mode acknowledgement payload.
type commandResponse struct {
	ResponseType string `json:"response_type"`
	Text         string `json:"text"`
}

// runCommand runs a /countersign command through chatops as the mapped
// principal (nil if unmapped: chatops refuses and audits).
func (a *Adapter) runCommand(ctx context.Context, cmd slackgo.SlashCommand) commandResponse {
	reply := a.commands(ctx, a.bot.SlackCaller(cmd.UserID), cmd.UserID, cmd.Text)
	typ := slackgo.ResponseTypeEphemeral
	if !reply.Private {
		typ = slackgo.ResponseTypeInChannel
	}
	msg := text(reply.Text, maxMessageText)
	if strings.TrimSpace(msg) == "" {
		msg = "(no answer)"
	}
	return commandResponse{ResponseType: typ, Text: msg}
}

// duplicateCommand answers a slash command delivery seen before.
var duplicateCommand = commandResponse{ResponseType: slackgo.ResponseTypeEphemeral, Text: "This command was already received; it was not run again."}
