package slack

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	slackgo "github.com/slack-go/slack"
)

// click is what a worker needs of a button press. Only ids are taken from
// the payload: the item is always loaded from the store.
type click struct {
	deliveries []string // dedupe keys, in order
	user       string   // the Slack user id, for Slack's API
	who        string   // the directory's id: WORKSPACE/USER (who)
	channel    string
	action     string // actionApprove, actionReject, actionAnswer+i, actionSubmit
	value      string // the button's value: "12", or "12:3" for an option
	trigger    string
	chosen     []string // a multi-choice question's checked option values
	// seen is the card the button was on, as Slack sends it back with the
	// click (cardText); nil when the click came without one.
	seen *bot.Seen
}

// submission is a submitted reason modal.
type submission struct {
	deliveries []string
	user       string // the Slack user id
	who        string // the directory's id (who)
	metadata   string // "12|C0123"
	reason     string
}

// interaction accepts one verified interaction payload. It returns the
// acknowledgement payload (nil for an empty acknowledgement; a
// *slackgo.ViewSubmissionResponse for a form error) and whether the
// interaction was accepted: false means the worker queue is full and the
// delivery must not be acknowledged. deliveries are the transport's dedupe
// keys (the Socket Mode envelope id); the trigger id is added here. from is
// the delivery's context: the work queued for it continues its request id
// and trace span (bot.Continued).
func (a *Adapter) interaction(from context.Context, cb slackgo.InteractionCallback, deliveries []string) (ack any, accepted bool) {
	if cb.TriggerID != "" {
		deliveries = append(deliveries, "slack:trigger:"+cb.TriggerID)
	}
	who := a.who(cb.User.ID, clickWorkspace(cb), clickEnterprise(cb))
	switch cb.Type {
	case slackgo.InteractionTypeBlockActions:
		if len(cb.ActionCallback.BlockActions) == 0 {
			return nil, true
		}
		act := cb.ActionCallback.BlockActions[0]
		switch {
		case act.ActionID == actionApprove, act.ActionID == actionReject, act.ActionID == actionSubmit, act.ActionID == actionEdit,
			act.ActionID == actionApproveGrant, act.ActionID == actionRevokeGrant, act.ActionID == actionDetails,
			strings.HasPrefix(act.ActionID, actionAnswer):
		default:
			return nil, true // a checkbox toggled, or not ours: nothing to do
		}
		if len(deliveries) == 0 {
			deliveries = []string{"slack:action:" + cb.User.ID + ":" + act.ActionTs}
		}
		c := click{
			deliveries: deliveries, user: cb.User.ID, who: who, channel: cb.Container.ChannelID,
			action: act.ActionID, value: act.Value, trigger: cb.TriggerID,
		}
		if c.channel == "" {
			c.channel = cb.Channel.ID
		}
		if bs := cb.Message.Blocks.BlockSet; len(bs) > 0 {
			text, cut := cardText(bs)
			c.seen = bot.SeenText(bot.SurfaceSlack, text, cut)
		}
		if act.ActionID == actionSubmit && cb.BlockActionState != nil {
			for _, o := range cb.BlockActionState.Values[act.BlockID][actionChoices].SelectedOptions {
				c.chosen = append(c.chosen, o.Value)
			}
		}
		return nil, a.enqueueFrom(from, func(ctx context.Context) { a.handleClick(ctx, c) })
	case slackgo.InteractionTypeViewSubmission:
		if cb.View.CallbackID == callbackEdit {
			return a.editSubmission(cb, who, deliveries), true
		}
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
		s := submission{deliveries: deliveries, user: cb.User.ID, who: who, metadata: cb.View.PrivateMetadata, reason: reason}
		if !a.enqueueFrom(from, func(ctx context.Context) { a.handleSubmission(ctx, s) }) {
			return slackgo.NewErrorsViewSubmissionResponse(map[string]string{reasonBlock: "Countersign is busy; submit again in a moment."}), true
		}
		return nil, true
	}
	return nil, true
}

// clickWorkspace is the workspace Slack says the user of an interaction
// belongs to: the user's team_id (an Enterprise Grid org's E… id in an
// org), else the team the interaction came from.
func clickWorkspace(cb slackgo.InteractionCallback) string {
	if cb.User.TeamID != "" {
		return cb.User.TeamID
	}
	return cb.Team.ID
}

// clickEnterprise is the Enterprise Grid org of an interaction, "" when
// none.
func clickEnterprise(cb slackgo.InteractionCallback) string {
	if cb.Enterprise.ID != "" {
		return cb.Enterprise.ID
	}
	return cb.Team.EnterpriseID
}

// first reports whether a command delivery is new, recording its ids. A
// store failure counts as seen: nothing is run twice.
func (a *Adapter) first(ctx context.Context, ids []string) bool {
	ok, err := a.bot.Deliveries().First(ctx, ids...)
	if err != nil {
		a.log.Error("delivery dedupe failed; command dropped", "deliveries", ids, "err", err)
		return false
	}
	return ok
}

// handleClick turns a button press into a chat.Decision and renders the
// outcome: parse → decide → render. Every check (dedupe, the clicker's
// principal and scope, the item pending, the one decision rule) is the
// decision layer's.
func (a *Adapter) handleClick(ctx context.Context, c click) {
	if c.action == actionApproveGrant || c.action == actionRevokeGrant {
		a.handleGrantClick(ctx, c)
		return
	}
	idPart, optPart, hasOpt := strings.Cut(c.value, ":")
	id, err := bot.ParseItemID(idPart)
	if err != nil {
		a.tell(ctx, c.channel, c.user, "This button does not name a Countersign item; nothing was recorded.")
		return
	}
	d := chat.Decision{Surface: bot.SurfaceSlack, UserID: c.who, Deliveries: c.deliveries, ItemID: id, Seen: c.seen}
	switch {
	case c.action == actionApprove:
		d.Verb = chat.Approve
		if hasOpt {
			// The version the card showed, and whether the button came
			// with a dangerous item's confirmation dialog (confirmedMark).
			basis, confirmed := strings.CutSuffix(optPart, confirmedMark)
			d.Basis, d.Confirmed = basis, confirmed
		}
	case c.action == actionDetails:
		d.Verb = chat.ViewDetails
		out := chat.ShowDetails(ctx, a.bot, d)
		if out.Status != chat.Ready {
			a.answer(ctx, c.channel, c.user, out)
			return
		}
		a.tell(ctx, c.channel, c.user, chat.DetailsText(out.Item))
		return
	case c.action == actionReject:
		d.Verb = chat.Reject
		out := chat.Prepare(ctx, a.bot, d)
		if out.Status != chat.Ready {
			a.answer(ctx, c.channel, c.user, out)
			return
		}
		if _, err := a.api.OpenViewContext(ctx, c.trigger, reasonModal(out.Item, c.channel)); err != nil {
			a.log.Warn("reason form not opened", "item", id, "err", err)
			a.tell(ctx, c.channel, c.user, fmt.Sprintf("Slack could not open the reason form for #%d (%v). Click Reject again.", id, err))
		}
		return
	case c.action == actionEdit:
		d.Verb = chat.Approve
		out := chat.PrepareEdit(ctx, a.bot, d)
		if out.Status != chat.Ready {
			a.answer(ctx, c.channel, c.user, out)
			return
		}
		lay, why := chat.EditForm(out.Item, maxEditInputs, maxEditText)
		if why != "" {
			a.tell(ctx, c.channel, c.user, why)
			return
		}
		if _, err := a.api.OpenViewContext(ctx, c.trigger, editModal(out.Item, lay, c.channel)); err != nil {
			a.log.Warn("edit form not opened", "item", id, "err", err)
			a.tell(ctx, c.channel, c.user, fmt.Sprintf("Slack could not open the edit form for #%d (%v). Click Edit & approve again.", id, err))
		}
		return
	case strings.HasPrefix(c.action, actionAnswer):
		d.Verb, d.Choices = chat.Answer, []int{choice(optPart, hasOpt)}
	case c.action == actionSubmit:
		d.Verb = chat.Answer
		for _, v := range c.chosen {
			d.Choices = append(d.Choices, choice(v, true))
		}
	default:
		return
	}
	a.answer(ctx, c.channel, c.user, chat.Decide(ctx, a.bot, d))
}

// choice parses an option index from a button or checkbox value; a value
// that is not one is -1, which the decision layer refuses.
func choice(v string, ok bool) int {
	i, err := strconv.Atoi(v)
	if !ok || err != nil {
		return -1
	}
	return i
}

// handleSubmission decides a submitted reason form: a rejection.
func (a *Adapter) handleSubmission(ctx context.Context, s submission) {
	idPart, channel, _ := strings.Cut(s.metadata, "|")
	id, err := bot.ParseItemID(idPart)
	if err != nil {
		a.log.Warn("reason form without an item id", "metadata", s.metadata)
		return
	}
	d := chat.Decision{Surface: bot.SurfaceSlack, UserID: s.who, Deliveries: s.deliveries, ItemID: id, Verb: chat.Reject, Reason: s.reason}
	a.answer(ctx, channel, s.user, chat.Decide(ctx, a.bot, d))
}

// answer renders a decision's outcome for the clicker. A decided item's
// messages are updated from the outbox, so nothing is said privately; a
// duplicate delivery (a Slack retry) was answered the first time; anything
// else is told privately.
func (a *Adapter) answer(ctx context.Context, channel, user string, out chat.Outcome) {
	switch out.Status {
	case chat.Duplicate:
		a.log.Info("duplicate delivery ignored", "item", out.Item.ID, "user", user)
		return
	case chat.Decided:
		// The card is updated from the outbox, and says what the
		// decision does now (chat.EffectLabel's "Now:").
		return
	}
	if out.Reply != "" {
		a.tell(ctx, channel, user, out.Reply)
	}
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
	ResponseType string          `json:"response_type"`
	Text         string          `json:"text"`
	Blocks       []slackgo.Block `json:"blocks,omitempty"` // the Revoke buttons of `grants`
}

// runCommand runs a /countersign command through package chat as the mapped
// principal (nil if unmapped: chat refuses and audits).
func (a *Adapter) runCommand(ctx context.Context, cmd slackgo.SlashCommand) commandResponse {
	if resp, ok := a.grantsCommand(ctx, cmd); ok {
		return resp
	}
	who := a.who(cmd.UserID, cmd.TeamID, cmd.EnterpriseID)
	reply := a.commands(ctx, a.bot.Chat().Caller(bot.SurfaceSlack, who, nil), who, cmd.Text)
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

// deferredAck is an acknowledgement that can only be computed by deciding:
// an edit form's submission, whose field errors Slack takes only in the
// acknowledgement (response_action: errors). The HTTP handler runs it
// before answering; Socket Mode runs it on a worker and then acknowledges.
type deferredAck func(ctx context.Context) any

// editAckTimeout bounds deciding an edit before Slack's 3 seconds run out.
const editAckTimeout = 2500 * time.Millisecond

// editSubmission reads a submitted edit form. The decision is chat.Decide's
// with the edit; an edit the tool refuses (its JSON Schema, the exec
// allowlist, the same tool and space) comes back as an error on the input
// at fault, with nothing recorded, so the person can fix it.
func (a *Adapter) editSubmission(cb slackgo.InteractionCallback, who string, deliveries []string) deferredAck {
	parts := strings.SplitN(cb.View.PrivateMetadata, "|", 3)
	values := map[string]string{}
	var note string
	if cb.View.State != nil {
		for block, acts := range cb.View.State.Values {
			if block == noteBlock {
				note = strings.TrimSpace(acts[noteAction].Value)
				continue
			}
			if strings.HasPrefix(block, editBlock) {
				values[block] = acts[editAction].Value
			}
		}
	}
	if len(deliveries) == 0 {
		// No trigger id: the view and what was submitted name the delivery,
		// so a corrected resubmission of the same form is a new one.
		h := sha256.New()
		for _, k := range slices.Sorted(maps.Keys(values)) {
			fmt.Fprintf(h, "%s=%q;", k, values[k])
		}
		deliveries = []string{fmt.Sprintf("slack:view:%s:%x", cb.View.ID, h.Sum(nil)[:8])}
	}
	user := cb.User.ID
	return func(ctx context.Context) any {
		formError := func(block, msg string) any {
			return slackgo.NewErrorsViewSubmissionResponse(map[string]string{block: bot.OneLine(msg, 300)})
		}
		if len(parts) != 3 {
			return formError(noteBlock, "This form does not name a Countersign item; close it and click Edit & approve again.")
		}
		id, err := bot.ParseItemID(parts[0])
		if err != nil {
			return formError(noteBlock, "This form does not name a Countersign item; close it and click Edit & approve again.")
		}
		channel := parts[1]
		if utf8.RuneCountInString(note) > maxReason {
			return formError(noteBlock, fmt.Sprintf("Keep the note to %d characters.", maxReason))
		}
		d := chat.Decision{Surface: bot.SurfaceSlack, UserID: who, Deliveries: deliveries, ItemID: id, Verb: chat.Approve, Reason: note, Basis: parts[2]}
		it, err := a.bot.Items().Get(ctx, id)
		var lay chat.EditLayout
		why := "no such item"
		if err == nil {
			lay, why = chat.EditForm(it, maxEditInputs, maxEditText)
		}
		first := editBlock + "0"
		if why != "" {
			// Not (or no longer) editable: the decision layer says why,
			// in the person's terms (decided, refused, not found), and
			// audits a refusal; nothing is decided.
			out := chat.Prepare(ctx, a.bot, d)
			if out.Status == chat.Ready {
				return formError(first, why)
			}
			if out.Status == chat.Duplicate {
				return nil
			}
			return formError(first, out.Reply)
		}
		byName := map[string]string{}
		blockOf := map[string]string{}
		for i, in := range lay.Inputs {
			b := editBlock + strconv.Itoa(i)
			byName[in.Name], blockOf[in.Name] = values[b], b
		}
		if field, msg := lay.Apply(&d, byName); field != "" {
			return formError(blockOf[field], msg)
		}
		out := chat.Decide(ctx, a.bot, d)
		switch out.Status {
		case chat.Decided, chat.Duplicate:
			return nil // closes the form; the card is updated from the outbox
		case chat.Counted:
			a.tell(ctx, channel, user, out.Reply)
			return nil
		case chat.Invalid:
			return formError(fieldBlock(out.Field, blockOf, first), out.Reply)
		case chat.Refused:
			// Refused as clicks are: privately, the form closed (a
			// refusal's answer may carry a link, such as a step-up's,
			// which a form's error text cannot).
			a.tell(ctx, channel, user, out.Reply)
			return nil
		}
		reply := out.Reply
		if strings.TrimSpace(reply) == "" {
			reply = "Countersign could not complete this; nothing was recorded. Try again in a moment."
		}
		return formError(first, reply)
	}
}

// fieldBlock is the block of the input a tool's error names ("dose",
// "arguments.dose", "arguments"), else the first input.
func fieldBlock(field string, blockOf map[string]string, first string) string {
	f := strings.TrimPrefix(field, "arguments.")
	if b, ok := blockOf[f]; ok {
		return b
	}
	if head, _, ok := strings.Cut(f, "."); ok {
		if b, ok := blockOf[head]; ok {
			return b
		}
	}
	return first
}
