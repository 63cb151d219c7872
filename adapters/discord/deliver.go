package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
)

// Deliver delivers one outbox event to Discord: it posts a new item,
// re-renders every message of an item whose tally moved or that reached
// its outcome, and replies in an item's thread with a reminder or an
// escalation. It renders the item as it is now, so delivering an event
// twice, or late, shows the same thing. A 429 comes back as a
// *bot.RetryAfterError; a 4xx Discord will never accept as a
// *bot.PermanentError.
func (a *Adapter) Deliver(ctx context.Context, ev bot.Event) error {
	it, err := a.bot.Items().Get(ctx, ev.ItemID)
	if errors.Is(err, bot.ErrNoItem) {
		return &bot.PermanentError{Err: fmt.Errorf("discord: item %d does not exist", ev.ItemID)}
	}
	if err != nil {
		return err
	}
	switch ev.Type {
	case bot.EventCreated:
		return a.post(ctx, it)
	case bot.EventUpdated, bot.EventDecided:
		return a.refresh(ctx, it)
	case bot.EventReminder, bot.EventEscalated:
		return a.reply(ctx, it, ev)
	case bot.EventNote:
		return a.note(ctx, it, ev)
	}
	return &bot.PermanentError{Err: fmt.Errorf("discord: unknown event type %q", ev.Type)}
}

// channelFor is the channel id an item is posted in: its configured
// channel, else the default one.
func (a *Adapter) channelFor(name string) string {
	if id := a.channels[name]; id != "" {
		return id
	}
	return a.channels["default"]
}

// refs are an item's Discord messages.
func refs(it bot.Item) []bot.MessageRef {
	var out []bot.MessageRef
	for _, m := range it.Messages {
		if m.Platform == Sink {
			out = append(out, m)
		}
	}
	return out
}

// post posts a new item and records its message with the item, so that it
// is edited in place later, after a restart too. An item that already has
// a Discord message is not posted again.
func (a *Adapter) post(ctx context.Context, it bot.Item) error {
	if len(refs(it)) > 0 {
		return nil
	}
	ch := a.channelFor(it.Channel)
	m := render(it)
	msg, err := a.send(ctx, ch, &discordgo.MessageSend{
		Content: m.Content, Embeds: m.Embeds, Components: m.Components, AllowedMentions: noMentions(),
	}, nonce("post", it))
	if err != nil {
		return err
	}
	ref := bot.MessageRef{Platform: Sink, ChannelID: msg.ChannelID, MessageID: msg.ID}
	if ref.ChannelID == "" {
		ref.ChannelID = ch
	}
	if ref.MessageID == "" {
		return fmt.Errorf("discord: posting item %d: Discord answered without a message id", it.ID)
	}
	return a.bot.Items().AddMessageRef(ctx, it.ID, ref)
}

// refresh edits every Discord message of an item to show it as it is now:
// the live tally while pending; the outcome, who decided, when and why,
// with the buttons removed, once decided. A message Discord will not edit
// (deleted, or in a channel the bot lost) is logged and skipped.
func (a *Adapter) refresh(ctx context.Context, it bot.Item) error {
	m := render(it)
	for _, ref := range refs(it) {
		content, embeds, comps := m.Content, m.Embeds, m.Components
		edit := &discordgo.MessageEdit{
			Channel: ref.ChannelID, ID: ref.MessageID,
			Content: &content, Embeds: &embeds, Components: &comps, AllowedMentions: noMentions(),
		}
		_, err := a.s.ChannelMessageEditComplex(edit, callOpts(ctx)...)
		err = classify(err)
		var perm *bot.PermanentError
		switch {
		case err == nil:
		case errors.As(err, &perm):
			a.log.Warn("discord: a message of an item cannot be edited; skipped", "item", it.ID, "channel", ref.ChannelID, "message", ref.MessageID, "err", err)
		default:
			return err
		}
	}
	return nil
}

// reply posts a reminder or an escalation as a reply to the item's first
// message (its thread); an item with no message gets it in its channel. An
// escalation names the escalation role (mentions stay disabled: roles are
// named, never pinged) and, when it names an escalation channel configured
// for Discord, the item is posted there too, with its buttons, and kept up
// to date like the first message.
func (a *Adapter) reply(ctx context.Context, it bot.Item, ev bot.Event) error {
	if !it.Pending() {
		return nil // decided meanwhile: nothing to remind anyone of
	}
	icon, what := "⏰", "reminder"
	note := ev.Note
	var channel string
	if ev.Type == bot.EventEscalated {
		icon, what = "📣", "escalation"
		var role string
		var rest []string
		channel, role, rest = bot.ParseEscalation(ev.Note)
		note = fmt.Sprintf("#%d still %s, past the escalation time.", it.ID, waitsFor(it.Kind))
		if role != "" {
			note += " Escalated to role " + role + "."
		}
		if len(rest) > 0 {
			note += " " + strings.Join(rest, " ")
		}
	}
	if note == "" {
		note = fmt.Sprintf("#%d still %s.", it.ID, waitsFor(it.Kind))
	}
	lead := fmt.Sprintf("%s **Countersign #%d** %s: ", icon, it.ID, what)
	content := lead + clip(note, maxContent-units16(lead), block)
	send := &discordgo.MessageSend{Content: content, AllowedMentions: noMentions(), Embeds: []*discordgo.MessageEmbed{}, Components: []discordgo.MessageComponent{}}
	ch := a.channelFor(it.Channel)
	if rs := refs(it); len(rs) > 0 {
		no := false
		ch = rs[0].ChannelID
		send.Reference = &discordgo.MessageReference{MessageID: rs[0].MessageID, ChannelID: rs[0].ChannelID, FailIfNotExists: &no}
	}
	if _, err := a.send(ctx, ch, send, nonce(ev.Type+strconv.FormatUint(ev.Seq, 10), it)); err != nil {
		return err
	}
	target := a.channels[channel]
	if channel == "" || target == "" {
		return nil
	}
	for _, r := range refs(it) {
		if r.ChannelID == target {
			return nil // already posted there
		}
	}
	m := render(it)
	msg, err := a.send(ctx, target, &discordgo.MessageSend{
		Content: m.Content, Embeds: m.Embeds, Components: m.Components, AllowedMentions: noMentions(),
	}, nonce("escalate"+strconv.FormatUint(ev.Seq, 10), it))
	if err != nil {
		return err
	}
	if msg.ID == "" {
		return fmt.Errorf("discord: posting item %d to the escalation channel: Discord answered without a message id", it.ID)
	}
	return a.bot.Items().AddMessageRef(ctx, it.ID, bot.MessageRef{Platform: Sink, ChannelID: target, MessageID: msg.ID})
}

// messageCreate is discordgo's MessageSend plus a nonce that Discord
// enforces: a post retried after a crash (posted, but not yet recorded)
// returns the message already created instead of a second one.
// https://discord.com/developers/docs/resources/message#create-message-jsonform-params
type messageCreate struct {
	*discordgo.MessageSend
	Nonce        string `json:"nonce"`
	EnforceNonce bool   `json:"enforce_nonce"`
}

// send posts a message (POST channels/{id}/messages) with an enforced nonce.
func (a *Adapter) send(ctx context.Context, channelID string, m *discordgo.MessageSend, nonce string) (*discordgo.Message, error) {
	for _, e := range m.Embeds {
		if e.Type == "" {
			e.Type = discordgo.EmbedTypeRich
		}
	}
	endpoint := discordgo.EndpointChannelMessages(channelID)
	body, err := a.s.RequestWithBucketID("POST", endpoint, messageCreate{MessageSend: m, Nonce: nonce, EnforceNonce: true}, endpoint, callOpts(ctx)...)
	if err != nil {
		return nil, classify(err)
	}
	var msg discordgo.Message
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("discord: reading the posted message: %w", err)
	}
	return &msg, nil
}

// nonce is a message nonce (at most 25 characters) unique to one post of
// one item: the item id alone would repeat across stores.
func nonce(what string, it bot.Item) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d|%s", what, it.ID, it.CreatedAt.UnixNano(), it.Space)))
	return "cs" + hex.EncodeToString(sum[:11])
}
