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

// Deliver sends one outbox event to Slack: it posts a new item, updates
// every message of an item whose state moved, and posts reminders and
// escalations in the item's thread. It is idempotent per event: an item
// already posted is not posted again, and an update rewrites the message
// from the item's current state. A 429 comes back as *bot.RetryAfterError
// and an error Slack will repeat forever as *bot.PermanentError.
func (a *Adapter) Deliver(ctx context.Context, ev bot.Event) error {
	it, err := a.bot.Items().Get(ctx, ev.ItemID)
	if errors.Is(err, bot.ErrNoItem) {
		return &bot.PermanentError{Err: fmt.Errorf("item %d: %w", ev.ItemID, err)}
	}
	if err != nil {
		// An item that cannot be rendered would hold up every later
		// delivery to Slack: after a few tries it is given up, loudly.
		if ev.Attempts+1 >= maxViewAttempts {
			return &bot.PermanentError{Err: fmt.Errorf("item %d cannot be rendered: %w", ev.ItemID, err)}
		}
		return err
	}
	switch ev.Type {
	case bot.EventCreated:
		return a.post(ctx, it)
	case bot.EventUpdated, bot.EventDecided:
		return a.refresh(ctx, it)
	case bot.EventReminder, bot.EventEscalated:
		return a.threadNote(ctx, it, ev)
	case bot.EventNote:
		return a.note(ctx, it, ev)
	}
	return &bot.PermanentError{Err: fmt.Errorf("item %d: unknown event type %q", ev.ItemID, ev.Type)}
}

// maxViewAttempts bounds the tries of an event whose item cannot be loaded.
const maxViewAttempts = 5

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

// channelFor maps an item's channel name to a Slack channel id; a name not
// configured for Slack goes to the default channel.
func (a *Adapter) channelFor(name string) string {
	if id := a.channels[name]; id != "" {
		return id
	}
	return a.channels["default"]
}

func (a *Adapter) post(ctx context.Context, it bot.Item) error {
	if len(refs(it)) > 0 {
		return nil // posted before a crash or retry; updates keep it current
	}
	return a.postTo(ctx, it, a.channelFor(it.Channel))
}

// postTo posts the item to channel and records the message with the item.
func (a *Adapter) postTo(ctx context.Context, it bot.Item, channel string) error {
	ch, ts, err := a.api.PostMessageContext(ctx, channel,
		slackgo.MsgOptionText(itemText(it), false),
		slackgo.MsgOptionBlocks(itemBlocks(it, false)...),
		slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl())
	if err != nil {
		return deliveryError(fmt.Sprintf("chat.postMessage to %s (%s) for item %d", channel, it.Channel, it.ID), err)
	}
	if ch == "" {
		ch = channel
	}
	if err := a.bot.Items().AddMessageRef(ctx, it.ID, bot.MessageRef{Platform: Sink, ChannelID: ch, MessageID: ts}); err != nil {
		return err
	}
	a.log.Info("posted item", "item", it.ID, "channel", ch, "ts", ts)
	if it.Sensitive && it.Pending() {
		a.sendDetail(ctx, it, ch)
	}
	return nil
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
		_, err := a.api.PostEphemeralContext(ctx, channel, user,
			slackgo.MsgOptionText(detailText(it), false),
			slackgo.MsgOptionBlocks(itemBlocks(it, true)...))
		if err != nil {
			a.log.Warn("private detail of a sensitive item not delivered", "item", it.ID, "user", user, "err", err)
		}
	}
}

// refresh rewrites every Slack message of the item from its current state:
// the live tally while pending; the outcome, who decided, when and why, and
// no buttons, once decided.
func (a *Adapter) refresh(ctx context.Context, it bot.Item) error {
	for _, ref := range refs(it) {
		_, _, _, err := a.api.UpdateMessageContext(ctx, ref.ChannelID, ref.MessageID,
			slackgo.MsgOptionText(itemText(it), false),
			slackgo.MsgOptionBlocks(itemBlocks(it, false)...))
		if err == nil {
			continue
		}
		derr := deliveryError(fmt.Sprintf("chat.update of %s/%s for item %d", ref.ChannelID, ref.MessageID, it.ID), err)
		var perm *bot.PermanentError
		if errors.As(derr, &perm) {
			// This message is gone or frozen; the others still get updated.
			a.log.Error("message of an item cannot be updated", "item", it.ID, "channel", ref.ChannelID, "ts", ref.MessageID, "err", err)
			continue
		}
		return derr
	}
	return nil
}

// threadNote posts a reminder or an escalation as a reply in the thread of
// each of the item's messages. An escalation is also shown in the channel
// (reply_broadcast), mentions the mapped Slack users of the escalation role,
// and, when it names an escalation channel, posts the item there too, with
// its buttons (that message is then kept up to date like the first).
func (a *Adapter) threadNote(ctx context.Context, it bot.Item, ev bot.Event) error {
	if !it.Pending() {
		return nil // decided meanwhile: nothing to remind anyone of
	}
	var msg, channel string
	if ev.Type == bot.EventEscalated {
		var role string
		var rest []string
		channel, role, rest = bot.ParseEscalation(ev.Note)
		msg = text(fmt.Sprintf("📣 Escalated: #%d still awaits a decision.", it.ID), 500)
		if role != "" {
			msg += " " + text("Escalated to role "+role+":", 200)
			for _, u := range a.roleMembers[strings.ToLower(role)] {
				msg += " <@" + u + ">" // from the config, checked in New; never from an item
			}
		}
		if len(rest) > 0 {
			msg += " " + text(strings.Join(rest, " "), 1000)
		}
	} else {
		note := ev.Note
		if note == "" {
			note = fmt.Sprintf("Reminder: #%d still awaits a decision.", it.ID)
		}
		msg = "⏰ " + text(note, maxMessageText-2)
	}
	for _, ref := range refs(it) {
		opts := []slackgo.MsgOption{slackgo.MsgOptionText(msg, false), slackgo.MsgOptionTS(ref.MessageID)}
		if ev.Type == bot.EventEscalated {
			opts = append(opts, slackgo.MsgOptionBroadcast())
		}
		if _, _, err := a.api.PostMessageContext(ctx, ref.ChannelID, opts...); err != nil {
			derr := deliveryError(fmt.Sprintf("%s in the thread of %s/%s for item %d", ev.Type, ref.ChannelID, ref.MessageID, it.ID), err)
			var perm *bot.PermanentError
			if errors.As(derr, &perm) {
				a.log.Error("thread reply not posted", "item", it.ID, "err", err)
				continue
			}
			return derr
		}
	}
	if target := a.channels[channel]; channel != "" && target != "" {
		for _, ref := range refs(it) {
			if ref.ChannelID == target {
				return nil // already there
			}
		}
		return a.postTo(ctx, it, target)
	}
	return nil
}

// permanentSlackErrors are Web API errors that the same call will meet
// again however often it is retried: the message or its content is at
// fault, or the channel is gone or closed to the bot (fix the config or
// invite the bot; the item stays decidable through the API and chat
// commands). Anything else (auth, scopes, Slack's own faults) is retried
// with backoff, so a token fixed later still gets every message out.
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

// deliveryError classifies a Web API failure for the outbox.
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
		return wrapped
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
	return wrapped
}
