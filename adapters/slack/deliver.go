package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/countersign/countersign/bot"
	slackgo "github.com/slack-go/slack"
)

// Renderer returns the adapter's half of the outbox's delivery contract
// (bot.Renderer): it posts an item as Block Kit, rewrites its messages in
// place, and replies in their threads; the outbox decides which of these
// an event needs, records the messages with the item, and decides retry
// and give-up. A failed Web API call is classified by deliveryError.
func (a *Adapter) Renderer() bot.Renderer { return renderer{a} }

// renderer is the Slack bot.Renderer.
type renderer struct{ a *Adapter }

// refs returns the item's Slack messages.
func refs(it bot.Item) []bot.MessageRef {
	var out []bot.MessageRef
	for _, m := range it.Messages {
		if m.Platform == Sink {
			out = append(out, m)
		}
	}
	return out
}

// Channel maps a configured channel name to its Slack channel id.
func (r renderer) Channel(name string) string { return r.a.channels[name] }

// Post posts the item in channel. A sensitive pending item's full detail
// then goes privately to each approver (sendDetail).
func (r renderer) Post(ctx context.Context, channel string, it bot.Item, _ string) (bot.MessageRef, error) {
	a := r.a
	ch, ts, err := a.api.PostMessageContext(ctx, channel,
		slackgo.MsgOptionText(itemText(it), false),
		slackgo.MsgOptionBlocks(itemBlocks(it, false)...),
		slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl())
	if err != nil {
		return bot.MessageRef{}, deliveryError(fmt.Sprintf("chat.postMessage to %s (%s) for item %d", channel, it.Channel, it.ID), err)
	}
	if ch == "" {
		ch = channel
	}
	if it.Sensitive && it.Pending() {
		a.sendDetail(ctx, it, ch)
	}
	return bot.MessageRef{ChannelID: ch, MessageID: ts}, nil
}

// sendDetail sends the full detail of a sensitive item privately (an
// ephemeral message) to each approver in the channel who may see it
// (Caller.MaySeeDetails). Slack shows an
// ephemeral message only to a member of the channel, only in the client
// session that is open, and never stores it: a failure for one approver is
// logged and does not hold the others back.
func (a *Adapter) sendDetail(ctx context.Context, it bot.Item, channel string) {
	for _, user := range a.approvers {
		// Only those the one rule lets see the details (the item's space
		// in their scopes): an approver of another ward gets nothing.
		if c := a.bot.Chat().Caller(bot.SurfaceSlack, user, nil); c == nil || !c.MaySeeDetails(it) {
			continue
		}
		_, err := a.api.PostEphemeralContext(ctx, channel, UserOf(user),
			slackgo.MsgOptionText(detailText(it), false),
			slackgo.MsgOptionBlocks(itemBlocks(it, true)...))
		if err != nil {
			a.log.Warn("private detail of a sensitive item not delivered", "item", it.ID, "user", user, "err", err)
		}
	}
}

// Update rewrites the message card from the item's current state.
func (r renderer) Update(ctx context.Context, card bot.MessageRef, it bot.Item) error {
	_, _, _, err := r.a.api.UpdateMessageContext(ctx, card.ChannelID, card.MessageID,
		slackgo.MsgOptionText(itemText(it), false),
		slackgo.MsgOptionBlocks(itemBlocks(it, false)...))
	if err != nil {
		return deliveryError(fmt.Sprintf("chat.update of %s/%s for item %d", card.ChannelID, card.MessageID, it.ID), err)
	}
	return nil
}

// Reply posts a reminder, an escalation or a note in the thread of card.
// An escalation is also shown in the channel (reply_broadcast) and
// mentions the mapped Slack users of its role.
func (r renderer) Reply(ctx context.Context, card bot.MessageRef, it bot.Item, n bot.Note) error {
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(r.a.replyText(it, n), false), slackgo.MsgOptionTS(card.MessageID)}
	if n.Type == bot.EventEscalated {
		opts = append(opts, slackgo.MsgOptionBroadcast())
	}
	if _, _, err := r.a.api.PostMessageContext(ctx, card.ChannelID, opts...); err != nil {
		return deliveryError(fmt.Sprintf("%s in the thread of %s/%s for item %d", n.Type, card.ChannelID, card.MessageID, it.ID), err)
	}
	return nil
}

// replyText is the text of a thread reply.
func (a *Adapter) replyText(it bot.Item, n bot.Note) string {
	switch n.Type {
	case bot.EventNote:
		return noteText(it, n.Text)
	case bot.EventEscalated:
		msg := text(fmt.Sprintf("📣 Escalated: #%d still awaits a decision.", it.ID), 500)
		if n.Role != "" {
			msg += " " + text("Escalated to role "+n.Role+":", 200)
			for _, u := range a.roleMembers[strings.ToLower(n.Role)] {
				msg += " <@" + u + ">" // from the config, checked in New; never from an item
			}
		}
		if l := n.OnCallLine(); l != "" {
			msg += " " + text(l, 200)
			if u := a.bot.Chat().Account(bot.SurfaceSlack, n.Person); ValidUserID(u) {
				msg += " <@" + u + ">" // the config's mapping of the person on call
			}
		}
		if n.Text != "" {
			msg += " " + text(n.Text, 1000)
		}
		return msg
	}
	note := n.Text
	if note == "" {
		note = fmt.Sprintf("Reminder: #%d still awaits a decision.", it.ID)
	}
	return "⏰ " + text(note, maxMessageText-2)
}

// permanentSlackErrors are Web API errors that the same call will meet
// again however often it is retried: the message or its content is at
// fault, or the channel is gone or closed to the bot (fix the config or
// invite the bot; the item stays decidable through the API and chat
// commands). Any other error (auth, scopes, Slack's own faults) says that
// Slack takes no delivery now: the outbox retries it with backoff, so a
// token fixed later still gets every message out.
var permanentSlackErrors = map[string]string{
	"invalid_blocks":        "",
	"invalid_blocks_format": "",
	"invalid_arguments":     "",
	"invalid_form_data":     "",
	"msg_too_long":          "",
	"no_text":               "",
	"too_many_attachments":  "",
	"message_not_found":     "the message was deleted",
	"cant_update_message":   "",
	"edit_window_closed":    "",
	"channel_not_found":     "check slack.channels in the config",
	"is_archived":           "the channel is archived; point slack.channels elsewhere",
	"not_in_channel":        "invite the bot to the channel (/invite @Countersign)",
	"restricted_action":     "the workspace does not let the bot post there",
}

// deliveryError classifies a Web API failure into the delivery contract's
// kinds (bot.Renderer): a 429 is a *bot.RetryAfterError, an error Slack
// will repeat forever a *bot.PermanentError, anything else (unreachable,
// 5xx, auth, scopes) a *bot.UnavailableError.
func deliveryError(what string, err error) error {
	wrapped := fmt.Errorf("slack: %s: %w", what, err)
	var rl *slackgo.RateLimitedError
	if errors.As(err, &rl) {
		return &bot.RetryAfterError{After: rl.RetryAfter, Err: wrapped}
	}
	var sc slackgo.StatusCodeError
	if errors.As(err, &sc) {
		if sc.Code >= 400 && sc.Code < 500 && sc.Code != http.StatusRequestTimeout && sc.Code != http.StatusTooManyRequests {
			return &bot.PermanentError{Err: wrapped}
		}
		return &bot.UnavailableError{Err: wrapped}
	}
	var se slackgo.SlackErrorResponse
	if errors.As(err, &se) {
		if hint, ok := permanentSlackErrors[se.Err]; ok {
			if hint != "" {
				wrapped = fmt.Errorf("%w (%s)", wrapped, hint)
			}
			return &bot.PermanentError{Err: wrapped}
		}
	}
	return &bot.UnavailableError{Err: wrapped}
}

// DirectChannel opens (conversations.open) the direct message with the
// configured person named name and returns its channel id: "" when they
// have no Slack account (bot.DirectMessenger; a stage's notify).
func (r renderer) DirectChannel(ctx context.Context, name string) (string, error) {
	user := r.a.bot.Chat().Account(bot.SurfaceSlack, name)
	if user == "" {
		return "", nil
	}
	ch, _, _, err := r.a.api.OpenConversationContext(ctx, &slackgo.OpenConversationParameters{Users: []string{user}})
	if err != nil {
		return "", deliveryError("conversations.open with "+name, err)
	}
	if ch == nil || ch.ID == "" {
		return "", &bot.PermanentError{Err: fmt.Errorf("slack: conversations.open with %s answered no channel", name)}
	}
	return ch.ID, nil
}
