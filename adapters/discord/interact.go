package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// signatureWindow is how far X-Signature-Timestamp may be from the bot's
// clock. discordgo.VerifyInteraction checks no time at all, so without it
// a captured signed request could be replayed forever.
const signatureWindow = 5 * time.Minute

// Handler is the HTTP interactions endpoint (POST /discord/interactions).
// It answers 401 to a request whose Ed25519 signature does not verify or
// whose timestamp is more than five minutes off, {"type":1} to a PING, and
// every other interaction with its response in the body.
func (a *Adapter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > a.maxBody {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("request body too large: the limit is %d bytes", a.maxBody)})
			return
		}
		if !a.fresh(r.Header.Get("X-Signature-Timestamp")) {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid request signature: X-Signature-Timestamp is missing or more than 5 minutes off"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
		// VerifyInteraction reads the body and puts it back; nothing may
		// read it before.
		if len(a.publicKey) == 0 || !discordgo.VerifyInteraction(r, a.publicKey) {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid request signature"})
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "could not read the request body"})
			return
		}
		// Signed by Discord, and still refused when two readers could see
		// it differently (bot.CheckJSON).
		if err := bot.CheckJSON("", body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the interaction is refused: " + err.Error()})
			return
		}
		var i discordgo.Interaction
		if err := json.Unmarshal(body, &i); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body is not a Discord interaction: " + err.Error()})
			return
		}
		// The decision completes even if Discord stops waiting.
		writeJSON(w, http.StatusOK, a.respond(context.WithoutCancel(r.Context()), &i))
	})
}

// fresh reports whether a signature timestamp (Unix seconds) is within
// signatureWindow of the bot's clock.
func (a *Adapter) fresh(ts string) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	const maxSec = 1 << 40 // far beyond any real timestamp; keeps the arithmetic in range
	if sec < 0 || sec > maxSec {
		return false
	}
	return a.bot.Now().Sub(time.Unix(sec, 0)).Abs() <= signatureWindow
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// respond computes the answer to one interaction, from the gateway or the
// HTTP endpoint alike. It never calls Discord: the answer is sent by the
// caller, and messages other than the clicked one are edited by the outbox.
func (a *Adapter) respond(ctx context.Context, i *discordgo.Interaction) *discordgo.InteractionResponse {
	switch i.Type {
	case discordgo.InteractionPing:
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}
	case discordgo.InteractionMessageComponent:
		return a.onComponent(ctx, i)
	case discordgo.InteractionModalSubmit:
		return a.onModal(ctx, i)
	case discordgo.InteractionApplicationCommand:
		return a.onCommand(ctx, i)
	}
	return private("Countersign does not handle this kind of interaction.")
}

// private is an ephemeral reply (type 4, flags 64): only the clicker sees
// it, and the message clicked stays as it is for everyone else.
func private(text string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{
			Content:         text,
			Flags:           discordgo.MessageFlagsEphemeral,
			AllowedMentions: noMentions(),
			Embeds:          []*discordgo.MessageEmbed{},
			Components:      []discordgo.MessageComponent{},
		},
	}
}

// privateMessage is an ephemeral reply carrying a rendered message.
func privateMessage(m message) *discordgo.InteractionResponse {
	r := private(m.Content)
	r.Data.Embeds = m.Embeds
	return r
}

// updateMessage replaces the clicked message (type 7) with a rendered item.
func updateMessage(m message) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseUpdateMessage,
		Data: &discordgo.InteractionResponseData{
			Content:         m.Content,
			Embeds:          m.Embeds,
			Components:      m.Components,
			AllowedMentions: noMentions(),
		},
	}
}

const internalFailure = "Countersign could not process this because of an internal error; it has been logged. Check the message or `/countersign show` before trying again."

// clicker is who sent an interaction: the member in a server, the user in
// a direct message.
func clicker(i *discordgo.Interaction) (userID string, roles []string) {
	if i.Member != nil && i.Member.User != nil {
		return i.Member.User.ID, i.Member.Roles
	}
	if i.User != nil {
		return i.User.ID, nil
	}
	return "", nil
}

// fromServer refuses, audited, an interaction from a direct message or
// another server than the configured one; nil means go on.
func (a *Adapter) fromServer(ctx context.Context, i *discordgo.Interaction, userID, what string) *discordgo.InteractionResponse {
	if a.guildID == "" || i.GuildID == a.guildID {
		return nil
	}
	where := "a direct message"
	if i.GuildID != "" {
		where = "server " + i.GuildID
	}
	if err := a.bot.Chat().Deny(ctx, Sink, userID, fmt.Sprintf("%s refused: sent from %s, not the configured server", what, where)); err != nil {
		a.log.Error("discord: auditing a refused interaction failed", "user", userID, "err", err)
	}
	return private("Countersign did not act on this: it takes decisions and commands only in its configured Discord server, and this came from a direct message or another server. This is by design. Use the approval channel in the server instead.")
}

// decision starts the chat.Decision of an interaction on item id, or
// answers it at once (no sender, another server).
func (a *Adapter) decision(ctx context.Context, i *discordgo.Interaction, verb chat.Verb, id uint64) (chat.Decision, *discordgo.InteractionResponse) {
	userID, roles := clicker(i)
	if userID == "" || i.ID == "" {
		return chat.Decision{}, private("Countersign could not tell who sent this interaction, so it did nothing.")
	}
	if resp := a.fromServer(ctx, i, userID, fmt.Sprintf("%s #%d", verb, id)); resp != nil {
		return chat.Decision{}, resp
	}
	return chat.Decision{Surface: bot.SurfaceDiscord, UserID: userID, Roles: roles, Deliveries: []string{"discord:" + i.ID}, ItemID: id, Verb: verb}, nil
}

// onComponent handles a click on one of Countersign's buttons or menus:
// parse → decide (package chat) → render.
func (a *Adapter) onComponent(ctx context.Context, i *discordgo.Interaction) *discordgo.InteractionResponse {
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	if !ok {
		return private("Countersign could not read this click.")
	}
	if resp, ok := a.onGrantComponent(ctx, i, data.CustomID); ok {
		return resp
	}
	act, id, n, version, ok := parseCustomID(data.CustomID)
	verb := map[string]chat.Verb{actApprove: chat.Approve, actConfirm: chat.Approve, actEdit: chat.Approve, actReject: chat.Reject, actAnswer: chat.Answer, actSelect: chat.Answer, actDetails: chat.ViewDetails}[act]
	if !ok || verb == "" {
		return private("This button is not one of Countersign's, so it did nothing.")
	}
	d, resp := a.decision(ctx, i, verb, id)
	if resp != nil {
		return resp
	}
	d.Seen = seenOf(i.Message) // what the clicked message showed
	switch act {
	case actReject:
		out := chat.Prepare(ctx, a.bot, d)
		if out.Status != chat.Ready {
			return a.outcome(i, out)
		}
		return reasonModal(out.Item)
	case actEdit:
		out := chat.PrepareEdit(ctx, a.bot, d)
		if out.Status != chat.Ready {
			return a.outcome(i, out)
		}
		lay, why := chat.EditForm(out.Item, maxEditInputs, maxEditText)
		if why != "" {
			return private(clip(why, 1500, block))
		}
		return editModal(out.Item, lay)
	case actDetails:
		out := chat.ShowDetails(ctx, a.bot, d)
		if out.Status != chat.Ready {
			return a.outcome(i, out)
		}
		if out.Item.Sensitive {
			m := renderDetails(out.Item)
			m.Content = clip(m.Content+"\n"+chat.DetailsText(out.Item), maxContent, block)
			return privateMessage(m)
		}
		return private(clip(chat.DetailsText(out.Item), maxContent, block))
	case actApprove:
		d.Basis = version // the version the message showed; checked again as it is decided
		if resp := a.dangerStep(ctx, d); resp != nil {
			return resp
		}
	case actConfirm:
		// The second step of a dangerous approval: this button is on the
		// private confirmation the first click opened.
		d.Basis = version
		d.Confirmed = true
		out := chat.Decide(ctx, a.bot, d)
		if out.Status == chat.Decided || out.Status == chat.Counted {
			text := chat.Receipt(out.Item)
			if out.Status == chat.Counted {
				text = out.Reply
			}
			return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage, Data: &discordgo.InteractionResponseData{
				Content: clip(text, maxContent, block), Embeds: []*discordgo.MessageEmbed{}, Components: []discordgo.MessageComponent{}, AllowedMentions: noMentions(),
			}}
		}
		return a.outcome(i, out)
	case actAnswer:
		d.Choices = []int{n}
	case actSelect:
		for _, v := range data.Values {
			c, err := strconv.Atoi(v)
			if err != nil {
				c = -1 // not an option: the decision layer refuses it
			}
			d.Choices = append(d.Choices, c)
		}
	}
	return a.outcome(i, chat.Decide(ctx, a.bot, d))
}

// dangerStep answers an Approve click on a dangerous item (bot.Item.Danger)
// with its second step (confirmStep) instead of deciding: nil for any
// other item, which is decided at once. The click is deduped here; one
// by a person who may not decide the item (or not without a fresh sign-in
// first) goes on to the decision, which refuses it by the one rule and
// audits the refusal (answering a step-up with its link).
func (a *Adapter) dangerStep(ctx context.Context, d chat.Decision) *discordgo.InteractionResponse {
	it, err := a.bot.Items().Get(ctx, d.ItemID)
	if err != nil || !it.Pending() || it.Danger == nil {
		return nil
	}
	out := chat.Prepare(ctx, a.bot, d)
	_, readOnly := a.bot.Items().ReadOnly(out.Caller, out.Item)
	switch {
	case out.Status != chat.Ready:
		if strings.TrimSpace(out.Reply) == "" {
			return private(internalFailure)
		}
		return private(clip(out.Reply, 1500, block))
	case out.Caller != nil && (readOnly || (out.Item.StepUp > 0 && !out.Caller.SteppedUp(out.Item.StepUp, a.bot.Now()))):
		d.Deliveries = nil // deduped by Prepare
		out = chat.Decide(ctx, a.bot, d)
		return private(clip(out.Reply, 1500, block))
	}
	return confirmStep(out.Item)
}

// outcome renders a decision's outcome: the clicked message updated in
// place when the decision was recorded, else the private reply.
func (a *Adapter) outcome(i *discordgo.Interaction, out chat.Outcome) *discordgo.InteractionResponse {
	switch out.Status {
	case chat.Decided, chat.Counted:
		if i.Message == nil || out.Item.ID == 0 {
			return private(headline(out.Item))
		}
		return updateMessage(render(out.Item))
	}
	if strings.TrimSpace(out.Reply) == "" {
		return private(internalFailure)
	}
	return private(clip(out.Reply, 1500, block))
}

// onModal handles the reason modal of a rejection.
func (a *Adapter) onModal(ctx context.Context, i *discordgo.Interaction) *discordgo.InteractionResponse {
	data, ok := i.Data.(discordgo.ModalSubmitInteractionData)
	if !ok {
		return private("Countersign could not read this form.")
	}
	act, id, _, version, ok := parseCustomID(data.CustomID)
	if ok && act == actEdited {
		return a.onEdit(ctx, i, data, id, version)
	}
	if !ok || act != actReason {
		return private("This form is not one of Countersign's, so it did nothing.")
	}
	reason := strings.TrimSpace(modalValue(data.Components, reasonInput))
	if len([]rune(reason)) > maxReason {
		return private(fmt.Sprintf("The reason is longer than %d characters; nothing was recorded.", maxReason))
	}
	d, resp := a.decision(ctx, i, chat.Reject, id)
	if resp != nil {
		return resp
	}
	d.Reason = reason
	return a.outcome(i, chat.Decide(ctx, a.bot, d))
}

// onEdit decides a submitted edit form: an approval with the edit,
// through chat.Decide (deduped by the interaction id). A form the text of
// which cannot be read, or an edit the tool refuses, is answered privately
// with what to fix; nothing is recorded.
func (a *Adapter) onEdit(ctx context.Context, i *discordgo.Interaction, data discordgo.ModalSubmitInteractionData, id uint64, basis string) *discordgo.InteractionResponse {
	note := strings.TrimSpace(modalValue(data.Components, noteInput))
	if len([]rune(note)) > maxReason {
		return private(fmt.Sprintf("The note is longer than %d characters; nothing was recorded.", maxReason))
	}
	d, resp := a.decision(ctx, i, chat.Approve, id)
	if resp != nil {
		return resp
	}
	d.Reason, d.Basis = note, basis
	it, err := a.bot.Items().Get(ctx, id)
	var lay chat.EditLayout
	why := "no such item"
	if err == nil {
		lay, why = chat.EditForm(it, maxEditInputs, maxEditText)
	}
	if why != "" {
		// Not (or no longer) editable: the decision layer says why
		// (decided, refused and audited, not found); nothing is decided.
		out := chat.Prepare(ctx, a.bot, d)
		if out.Status == chat.Ready {
			return private(clip(why, 1500, block))
		}
		return a.outcome(i, out)
	}
	values := map[string]string{}
	for n, in := range lay.Inputs {
		values[in.Name] = modalValue(data.Components, editInput+strconv.Itoa(n))
	}
	if _, msg := lay.Apply(&d, values); msg != "" {
		return private(clip(msg+" Nothing was recorded; click Edit & approve to try again.", 1500, block))
	}
	out := chat.Decide(ctx, a.bot, d)
	if out.Status == chat.Invalid {
		return private(clip(out.Reply+" Nothing was recorded; click Edit & approve to try again.", 1500, block))
	}
	return a.outcome(i, out)
}

// modalValue finds the value of the text input with custom id in a
// submitted modal.
func modalValue(rows []discordgo.MessageComponent, id string) string {
	for _, c := range rows {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, in := range row.Components {
			if ti, ok := in.(*discordgo.TextInput); ok && ti.CustomID == id {
				return ti.Value
			}
		}
	}
	return ""
}

// onCommand runs /countersign <command> as the mapped principal (nil when
// unmapped: the command layer refuses what needs one) and answers
// privately.
func (a *Adapter) onCommand(ctx context.Context, i *discordgo.Interaction) *discordgo.InteractionResponse {
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	if !ok || data.Name != CommandName {
		return private("Countersign does not know this command. Use /countersign.")
	}
	text := ""
	if opt := data.GetOption("command"); opt != nil {
		text, _ = opt.Value.(string)
	}
	userID, roles := clicker(i)
	if userID == "" || i.ID == "" {
		return private("Countersign could not tell who sent this interaction, so it did nothing.")
	}
	if resp := a.fromServer(ctx, i, userID, "command"); resp != nil {
		return resp
	}
	first, err := a.bot.Deliveries().First(ctx, "discord:"+i.ID)
	if err != nil {
		a.log.Error("discord: recording a delivery failed", "interaction", i.ID, "err", err)
		return private(internalFailure)
	}
	if !first {
		return private("Countersign already received this command; it was not run twice.")
	}
	if resp := a.grantsCommand(ctx, a.bot.Chat().Caller(bot.SurfaceDiscord, userID, roles), userID, text); resp != nil {
		return resp
	}
	reply := chat.Run(ctx, a.bot, a.bot.Chat().Caller(bot.SurfaceDiscord, userID, roles), Sink, userID, text)
	out := clip(reply.Text, maxContent, block)
	if strings.TrimSpace(out) == "" {
		out = "(no output)"
	}
	return private(out)
}
