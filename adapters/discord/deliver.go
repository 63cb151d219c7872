package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
)

// Renderer returns the adapter's half of the outbox's delivery contract
// (bot.Renderer): it posts an item as an embed with buttons, edits its
// messages in place, and replies to them; the outbox decides which of
// these an event needs, records the messages with the item, and decides
// retry and give-up. A failed REST call is classified by classify.
func (a *Adapter) Renderer() bot.Renderer { return renderer{a} }

// renderer is the Discord bot.Renderer.
type renderer struct{ a *Adapter }

// Channel is the Discord channel id of a configured channel name.
func (r renderer) Channel(name string) string { return r.a.channels[name] }

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

// Post posts the item in channel, with an enforced nonce derived from key
// so that a post retried after a crash does not make a second message.
func (r renderer) Post(ctx context.Context, channel string, it bot.Item, key string) (bot.MessageRef, error) {
	m := render(it)
	msg, err := r.a.send(ctx, channel, &discordgo.MessageSend{
		Content: m.Content, Embeds: m.Embeds, Components: m.Components, AllowedMentions: noMentions(),
	}, nonce(key, it))
	if err != nil {
		return bot.MessageRef{}, err
	}
	return bot.MessageRef{ChannelID: msg.ChannelID, MessageID: msg.ID}, nil
}

// Update edits the message card to show the item as it is now.
func (r renderer) Update(ctx context.Context, card bot.MessageRef, it bot.Item) error {
	m := render(it)
	edit := &discordgo.MessageEdit{
		Channel: card.ChannelID, ID: card.MessageID,
		Content: &m.Content, Embeds: &m.Embeds, Components: &m.Components, AllowedMentions: noMentions(),
	}
	_, err := r.a.s.ChannelMessageEditComplex(edit, deliveryOpts(ctx)...)
	return classify(err)
}

// Reply posts a reminder, an escalation or a note as a reply to card. An
// escalation names its role (roles are named, never pinged) and mentions
// the person on call when the config maps them to a Discord user: that
// user is the only mention the message allows.
func (r renderer) Reply(ctx context.Context, card bot.MessageRef, it bot.Item, n bot.Note) error {
	no := false
	id := r.onCall(n)
	mention := ""
	if id != "" {
		mention = " <@" + id + ">" // the config's mapping, never an item's text
	}
	content, allowed := replyContent(it, n, len(mention))+mention, noMentions()
	if id != "" {
		allowed.Users = []string{id}
	}
	send := &discordgo.MessageSend{
		Content: content, AllowedMentions: allowed,
		Embeds: []*discordgo.MessageEmbed{}, Components: []discordgo.MessageComponent{},
		Reference: &discordgo.MessageReference{MessageID: card.MessageID, ChannelID: card.ChannelID, FailIfNotExists: &no},
	}
	_, err := r.a.send(ctx, card.ChannelID, send, nonce(n.Key, it))
	return err
}

// onCall is the Discord user id of the person on call an escalation names
// (principals[].discord), or "" when it names nobody or they have none.
func (r renderer) onCall(n bot.Note) string {
	if n.Type != bot.EventEscalated || n.Person == "" {
		return ""
	}
	id := r.a.bot.Chat().Account(bot.SurfaceDiscord, n.Person)
	if !digits(id) {
		return ""
	}
	return id
}

// digits reports whether id can be a Discord id (a snowflake: 1 to 20
// decimal digits), so that nothing else is written into a mention.
func digits(id string) bool {
	if len(id) < 1 || len(id) > 20 {
		return false
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// replyContent is the text of a reply, leaving room for reserve more
// characters (ASCII) within Discord's limit.
func replyContent(it bot.Item, n bot.Note, reserve int) string {
	if n.Type == bot.EventNote {
		lead := fmt.Sprintf("🔁 **Countersign #%d**: ", it.ID)
		return lead + clip(strings.TrimSpace(n.Text), maxContent-reserve-units16(lead), block)
	}
	icon, what, note := "⏰", "reminder", n.Text
	if n.Type == bot.EventEscalated {
		icon, what = "📣", "escalation"
		note = fmt.Sprintf("#%d still %s, past the escalation time.", it.ID, waitsFor(it.Kind))
		if n.Role != "" {
			note += " Escalated to role " + n.Role + "."
		}
		if l := n.OnCallLine(); l != "" {
			note += " " + l
		}
		if n.Text != "" {
			note += " " + n.Text
		}
	}
	if note == "" {
		note = fmt.Sprintf("#%d still %s.", it.ID, waitsFor(it.Kind))
	}
	lead := fmt.Sprintf("%s **Countersign #%d** %s: ", icon, it.ID, what)
	return lead + clip(note, maxContent-reserve-units16(lead), block)
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
	body, err := a.s.RequestWithBucketID("POST", endpoint, messageCreate{MessageSend: m, Nonce: nonce, EnforceNonce: true}, endpoint, deliveryOpts(ctx)...)
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
// one item (what is the outbox's key of the post): the item id alone would
// repeat across stores.
func nonce(what string, it bot.Item) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%d|%d|%s", what, it.ID, it.CreatedAt.UnixNano(), it.Space)))
	return "cs" + hex.EncodeToString(sum[:11])
}

// DirectChannel opens the DM channel with the configured person named
// name and returns its id: "" when they have no Discord account
// (bot.DirectMessenger; a stage's notify).
func (r renderer) DirectChannel(ctx context.Context, name string) (string, error) {
	user := r.a.bot.Chat().Account(bot.SurfaceDiscord, name)
	if user == "" {
		return "", nil
	}
	ch, err := r.a.s.UserChannelCreate(user, deliveryOpts(ctx)...)
	if err != nil {
		return "", classify(err)
	}
	return ch.ID, nil
}
