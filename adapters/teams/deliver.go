package teams

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// Renderer returns the adapter's half of the outbox's delivery contract
// (bot.Renderer): it posts an item's card as a new message in a channel
// or conversation, replaces it whenever the item changes (the tally, the
// outcome, an edit, its expiry), and replies in its thread; the outbox
// decides which an event needs, records the cards and decides retry and
// give-up. Each failure is classified by the connector.
func (a *Adapter) Renderer() bot.Renderer { return renderer{a} }

// renderer is the Teams bot.Renderer, and its bot.DirectMessenger.
type renderer struct{ a *Adapter }

var _ bot.DirectMessenger = renderer{}

// Channel maps a configured channel name to its Teams conversation id.
func (r renderer) Channel(name string) string { return r.a.channels[name] }

// Post posts the item's shared card in conversation channel.
func (r renderer) Post(ctx context.Context, channel string, it bot.Item, _ string) (bot.MessageRef, error) {
	act, err := r.a.cardActivity(ctx, channel, it)
	if err != nil {
		return bot.MessageRef{}, err
	}
	id, err := r.a.api.send(ctx, channel, act)
	if err != nil {
		return bot.MessageRef{}, fmt.Errorf("posting item %d in %s: %w", it.ID, channel, err)
	}
	return bot.MessageRef{ChannelID: channel, MessageID: id}, nil
}

// DirectChannel opens (or finds) the one-to-one chat of the bot and the
// configured person named name (principals[].teams), for a stage's notify
// (bot.DirectMessenger): the card is then posted there like in a
// channel. Their Teams user id is looked up in the configured channels'
// rosters, the default one first; "" when the person has no Teams account.
func (r renderer) DirectChannel(ctx context.Context, name string) (string, error) {
	oid := r.a.bot.Chat().Account(bot.SurfaceTeams, name)
	if oid == "" {
		return "", nil
	}
	var mri string
	var err error
	for _, conv := range r.a.rosters() {
		mri, err = r.a.mri(ctx, conv, oid)
		var perm *bot.PermanentError
		if err == nil || !errors.As(err, &perm) {
			break // found, or a failure to retry: not a member elsewhere
		}
	}
	if err == nil && mri == "" {
		err = &bot.PermanentError{Err: errors.New("no configured channel to look them up in")}
	}
	if err != nil {
		return "", fmt.Errorf("looking %s up in the configured channels: %w", name, err)
	}
	dm, err := r.a.api.personal(ctx, "28:"+r.a.appID, mri, r.a.tenant)
	if err != nil {
		return "", fmt.Errorf("opening the chat with %s: %w", name, err)
	}
	return dm, nil
}

// rosters are the configured channels' conversations, the default first,
// then by name.
func (a *Adapter) rosters() []string {
	names := make([]string, 0, len(a.channels))
	for n := range a.channels {
		if n != "default" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := []string{}
	if c := a.channels["default"]; c != "" {
		out = append(out, c)
	}
	for _, n := range names {
		if c := a.channels[n]; c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Update replaces the card with the item as it is now: for everyone, the
// outcome without buttons once decided; while pending, the shared card
// whose refresh gives the approvers their buttons again.
func (r renderer) Update(ctx context.Context, card bot.MessageRef, it bot.Item) error {
	act, err := r.a.cardActivity(ctx, card.ChannelID, it)
	if err != nil {
		return err
	}
	if err := r.a.api.update(ctx, card.ChannelID, card.MessageID, act); err != nil {
		return fmt.Errorf("updating the card of item %d (%s): %w", it.ID, card.MessageID, err)
	}
	return nil
}

// Reply posts a reminder, an escalation or a note in the card's thread.
// An escalation to a role mentions the people holding it.
func (r renderer) Reply(ctx context.Context, card bot.MessageRef, it bot.Item, n bot.Note) error {
	act := activity{Type: "message", TextFormat: "markdown"}
	act.Text, act.Entities = r.a.replyText(it, n)
	if _, err := r.a.api.reply(ctx, card.ChannelID, card.MessageID, act); err != nil {
		return fmt.Errorf("%s in the thread of item %d: %w", n.Type, it.ID, err)
	}
	return nil
}

// replyText is a thread reply's text (Markdown: untrusted words escaped)
// and its mentions.
func (a *Adapter) replyText(it bot.Item, n bot.Note) (string, []entity) {
	switch n.Type {
	case bot.EventNote:
		note := n.Text
		if note == "" {
			note = fmt.Sprintf("#%d: a note without text.", it.ID)
		}
		return "🔁 " + escapeMarkdown(note), nil
	case bot.EventEscalated:
		msg := fmt.Sprintf("📣 Escalated: #%d still awaits a decision.", it.ID)
		var ents []entity
		if n.Role != "" {
			msg += " Escalated to role " + escapeMarkdown(n.Role) + ":"
			for _, m := range a.roleMembers[strings.ToLower(n.Role)] {
				// From the config, checked in New; never from an item.
				tag := "<at>" + escapeMarkdown(m.Name) + "</at>"
				msg += " " + tag
				ents = append(ents, entity{Type: "mention", Text: tag, Mentioned: &account{ID: m.ID, Name: m.Name}})
			}
		}
		if l := n.OnCallLine(); l != "" {
			msg += " " + escapeMarkdown(l)
			if id := strings.ToLower(a.bot.Chat().Account(bot.SurfaceTeams, n.Person)); id != "" {
				tag := "<at>" + escapeMarkdown(n.Person) + "</at>"
				msg += " " + tag
				ents = append(ents, entity{Type: "mention", Text: tag, Mentioned: &account{ID: id, Name: n.Person}})
			}
		}
		if n.Text != "" {
			msg += " " + escapeMarkdown(n.Text)
		}
		return msg, ents
	}
	note := n.Text
	if note == "" {
		note = fmt.Sprintf("Reminder: #%d still awaits a decision.", it.ID)
	}
	return "⏰ " + escapeMarkdown(note), nil
}

// cardActivity is the message holding the item's shared card.
func (a *Adapter) cardActivity(ctx context.Context, conversationID string, it bot.Item) (activity, error) {
	var ids []string
	if it.Pending() {
		var err error
		if ids, err = a.eligible(ctx, conversationID, it); err != nil {
			return activity{}, err
		}
	}
	c := itemCard(it, view{}, ids)
	return activity{
		Type:        "message",
		Summary:     summary(it),
		Attachments: []attachment{{ContentType: cardContentType, Content: c}},
	}, nil
}

// summary is the message's notification text.
func summary(it bot.Item) string {
	title := label(itemTitle(it), 200)
	if it.Sensitive {
		title = "a " + chat.SensitiveNoun(it.Kind)
	}
	if it.Pending() {
		return "Approval needed: " + title
	}
	return "Decided: " + title
}

// eligible are the Teams user ids of the approvers the one rule lets
// decide the item (at most 60, as refresh.userIds takes): their clients
// fetch their view of the card, with the buttons. An approver who is not
// a member of the conversation is left out (and logged); a lookup that
// fails otherwise fails the delivery, which the outbox retries.
func (a *Adapter) eligible(ctx context.Context, conversationID string, it bot.Item) ([]string, error) {
	var ids []string
	for _, oid := range a.approvers {
		if len(ids) == maxUserIDs {
			a.log.Warn("more eligible approvers than a card's refresh names; the rest refresh the card by hand", "item", it.ID)
			break
		}
		c := a.bot.Chat().Caller(bot.SurfaceTeams, oid, nil)
		if c == nil {
			continue
		}
		if _, readOnly := a.bot.Items().ReadOnly(c, it); readOnly {
			continue
		}
		mri, err := a.mri(ctx, conversationID, oid)
		var perm *bot.PermanentError
		switch {
		case errors.As(err, &perm):
			a.log.Warn("an approver is not a member of the conversation; they do not see the buttons", "item", it.ID, "approver", oid, "err", err)
			continue
		case err != nil:
			return nil, fmt.Errorf("looking up approver %s: %w", oid, err)
		}
		ids = append(ids, mri)
	}
	return ids, nil
}

// mri is the Teams user id of the person with Entra object id oid.
func (a *Adapter) mri(ctx context.Context, conversationID, oid string) (string, error) {
	a.mriMu.Lock()
	id, ok := a.mris[oid]
	a.mriMu.Unlock()
	if ok {
		return id, nil
	}
	id, err := a.api.member(ctx, conversationID, oid)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", &bot.PermanentError{Err: fmt.Errorf("teams: the member lookup of %s answered no id", oid)}
	}
	a.learn(oid, id)
	return id, nil
}

// learn records the Teams user id of an approver's Entra object id, as an
// activity from them shows it (only approvers': the map stays as small as
// the config).
func (a *Adapter) learn(oid, mri string) {
	oid = strings.ToLower(oid)
	if oid == "" || mri == "" || !slices.Contains(a.approvers, oid) {
		return
	}
	a.mriMu.Lock()
	a.mris[oid] = mri
	a.mriMu.Unlock()
}
