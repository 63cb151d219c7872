package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chatops"
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
		var i discordgo.Interaction
		if err := json.NewDecoder(r.Body).Decode(&i); err != nil {
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

// gate runs the checks every interaction passes before it may act, in
// order: delivered once (a replay or re-delivery of the same interaction
// id gets dup's answer and changes nothing), from the configured server,
// from a mapped user (when mapped is set). A refusal is audited and
// answered privately; a nil response means go on.
func (a *Adapter) gate(ctx context.Context, i *discordgo.Interaction, what string, mapped bool, dup func() *discordgo.InteractionResponse) (*bot.Caller, string, *discordgo.InteractionResponse) {
	userID, roles := clicker(i)
	if userID == "" || i.ID == "" {
		return nil, "", private("Countersign could not tell who sent this interaction, so it did nothing.")
	}
	first, err := a.bot.FirstDelivery(ctx, "discord:"+i.ID)
	if err != nil {
		a.log.Error("discord: recording a delivery failed", "interaction", i.ID, "err", err)
		return nil, "", private(internalFailure)
	}
	if !first {
		return nil, "", dup()
	}
	if a.guildID != "" && i.GuildID != a.guildID {
		where := "a direct message"
		if i.GuildID != "" {
			where = "server " + i.GuildID
		}
		a.audit(ctx, userID, fmt.Sprintf("%s refused: sent from %s, not the configured server", what, where))
		return nil, "", private("Countersign did not act on this: it takes decisions and commands only in its configured Discord server, and this came from a direct message or another server. This is by design. Use the approval channel in the server instead.")
	}
	caller := a.bot.DiscordCaller(userID, roles)
	if caller == nil && mapped {
		a.audit(ctx, userID, fmt.Sprintf("%s refused: discord user %s is not mapped to a principal", what, userID))
		return nil, "", private(fmt.Sprintf("Countersign did not record your click: your Discord account (%s) is not mapped to a Countersign principal, so it cannot decide anything. This is by design: only people listed under principals in Countersign's configuration decide from chat. Ask a Countersign admin to map your user id or one of your roles.", clip(userID, 32, inline)))
	}
	return caller, userID, nil
}

// audit records a refused interaction; a failure to record is logged, and
// the refusal stands.
func (a *Adapter) audit(ctx context.Context, userID, what string) {
	if err := a.bot.DenyChat(ctx, Sink, userID, what); err != nil {
		a.log.Error("discord: auditing a refused interaction failed", "user", userID, "err", err)
	}
}

// onComponent handles a click on one of Countersign's buttons or menus.
func (a *Adapter) onComponent(ctx context.Context, i *discordgo.Interaction) *discordgo.InteractionResponse {
	data, ok := i.Data.(discordgo.MessageComponentInteractionData)
	if !ok {
		return private("Countersign could not read this click.")
	}
	act, id, n, ok := parseCustomID(data.CustomID)
	if !ok || act == actReason {
		return private("This button is not one of Countersign's, so it did nothing.")
	}
	what := fmt.Sprintf("%s #%d", act, id)
	caller, userID, refused := a.gate(ctx, i, what, true, func() *discordgo.InteractionResponse { return a.duplicate(ctx, id) })
	if refused != nil {
		return refused
	}
	it, resp := a.pendingItem(ctx, id)
	if resp != nil {
		return resp
	}
	switch act {
	case actApprove:
		return a.decide(ctx, i, caller, it, true, "", nil)
	case actReject:
		return reasonModal(it)
	case actDetails:
		return a.details(ctx, caller, userID, it)
	case actAnswer:
		if n >= len(it.Options) {
			return private(fmt.Sprintf("That answer is not one of #%d's options any more; nothing was recorded.", id))
		}
		return a.decide(ctx, i, caller, it, true, "", []string{it.Options[n]})
	case actSelect:
		answers, err := chosen(it, data.Values)
		if err != nil {
			return private(err.Error())
		}
		return a.decide(ctx, i, caller, it, true, "", answers)
	}
	return private("This button is not one of Countersign's, so it did nothing.")
}

// chosen maps a select menu's values (option indexes) to the options.
func chosen(it bot.Item, values []string) ([]string, error) {
	if len(values) == 0 || (!it.Multi && len(values) > 1) {
		return nil, fmt.Errorf("choose exactly one answer for #%d; nothing was recorded", it.ID)
	}
	seen := map[int]bool{}
	out := make([]string, 0, len(values))
	for _, v := range values {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n >= len(it.Options) || seen[n] {
			return nil, fmt.Errorf("that choice is not one of #%d's options; nothing was recorded", it.ID)
		}
		seen[n] = true
		out = append(out, it.Options[n])
	}
	return out, nil
}

// pendingItem loads item id; a missing or already decided item is answered
// privately.
func (a *Adapter) pendingItem(ctx context.Context, id uint64) (bot.Item, *discordgo.InteractionResponse) {
	it, err := a.bot.Item(ctx, id)
	if errors.Is(err, bot.ErrNoItem) {
		return bot.Item{}, private(fmt.Sprintf("Countersign has no item #%d.", id))
	}
	if err != nil {
		a.log.Error("discord: loading an item failed", "item", id, "err", err)
		return bot.Item{}, private(internalFailure)
	}
	if !it.Pending() {
		return bot.Item{}, private(recordedOutcome(it, 1000))
	}
	return it, nil
}

// duplicate answers an interaction delivered again: the recorded outcome
// if the item is decided, else a note that the click counted once.
func (a *Adapter) duplicate(ctx context.Context, id uint64) *discordgo.InteractionResponse {
	it, err := a.bot.Item(ctx, id)
	if err == nil && !it.Pending() {
		return private(recordedOutcome(it, 1000))
	}
	return private(fmt.Sprintf("Countersign already received this interaction for #%d; it was not applied twice.", id))
}

// decide takes the decision as caller through the bot (capability,
// requester is not the approver, quorum, staleness, one decision once) and
// answers with the clicked message updated in place, or privately why not.
func (a *Adapter) decide(ctx context.Context, i *discordgo.Interaction, caller *bot.Caller, it bot.Item, approve bool, reason string, answers []string) *discordgo.InteractionResponse {
	_, err := a.bot.DecideItem(ctx, caller, it.ID, approve, reason, answers)
	if err != nil {
		var be *bot.Error
		if !errors.As(err, &be) {
			a.log.Error("discord: decision failed", "item", it.ID, "caller", caller.String(), "err", err)
			return private(internalFailure)
		}
		msg := clip(be.Msg, 700, inline)
		if be.Kind == bot.KindConflict {
			if now, err := a.bot.Item(ctx, it.ID); err == nil && !now.Pending() {
				msg += "\n" + recordedOutcome(now, 400)
			}
		}
		return private(msg)
	}
	now, err := a.bot.Item(ctx, it.ID)
	if err != nil {
		a.log.Error("discord: reloading a decided item failed", "item", it.ID, "err", err)
		return private("Recorded. The message will be updated shortly.")
	}
	if i.Message == nil {
		return private(headline(now))
	}
	return updateMessage(render(now))
}

// details shows a sensitive item's full detail privately to an approver,
// and audits that it was shown. Anyone else is refused privately, and
// audited.
func (a *Adapter) details(ctx context.Context, caller *bot.Caller, userID string, it bot.Item) *discordgo.InteractionResponse {
	if !caller.MaySeeSensitive(it.Space) {
		a.audit(ctx, userID, fmt.Sprintf("details #%d refused: %s (role %s) may not decide it (approve capability and scope)", it.ID, caller, caller.Role))
		return private(fmt.Sprintf("Countersign did not show the details of #%d: they are shown only to approvers who may decide it (a role holding approve, with its space in scope), and your principal (role %s) is not one. This is by design; an approver can review it.", it.ID, caller.Role))
	}
	c := a.bot.SystemCall(a.bot.Now())
	c.Caller, c.Tool, c.Space = caller, &bot.Tool{Name: Sink}, it.Space
	err := c.Update(ctx, func(tx *bot.Tx) error {
		return tx.Audit("view_sensitive", fmt.Sprintf("discord: details of #%d shown privately", it.ID))
	})
	if err != nil {
		a.log.Error("discord: auditing a details view failed; details withheld", "item", it.ID, "err", err)
		return private(internalFailure)
	}
	return privateMessage(renderDetails(it))
}

// onModal handles the reason modal of a rejection.
func (a *Adapter) onModal(ctx context.Context, i *discordgo.Interaction) *discordgo.InteractionResponse {
	data, ok := i.Data.(discordgo.ModalSubmitInteractionData)
	if !ok {
		return private("Countersign could not read this form.")
	}
	act, id, _, ok := parseCustomID(data.CustomID)
	if !ok || act != actReason {
		return private("This form is not one of Countersign's, so it did nothing.")
	}
	caller, _, refused := a.gate(ctx, i, fmt.Sprintf("reject #%d", id), true, func() *discordgo.InteractionResponse { return a.duplicate(ctx, id) })
	if refused != nil {
		return refused
	}
	it, resp := a.pendingItem(ctx, id)
	if resp != nil {
		return resp
	}
	reason := strings.TrimSpace(modalValue(data.Components, reasonInput))
	if reason == "" && it.Kind != bot.KindQuestion {
		return private(fmt.Sprintf("A reason is required to reject #%d; nothing was recorded. Click Reject again and say why.", id))
	}
	if len([]rune(reason)) > maxReason {
		return private(fmt.Sprintf("The reason is longer than %d characters; nothing was recorded.", maxReason))
	}
	return a.decide(ctx, i, caller, it, false, reason, nil)
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
	caller, userID, refused := a.gate(ctx, i, "command", false, func() *discordgo.InteractionResponse {
		return private("Countersign already received this command; it was not run twice.")
	})
	if refused != nil {
		return refused
	}
	reply := chatops.Run(ctx, a.bot, caller, Sink, userID, text)
	out := clip(reply.Text, maxContent, block)
	if strings.TrimSpace(out) == "" {
		out = "(no output)"
	}
	return private(out)
}
