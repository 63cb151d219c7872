package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Renderer is a chat surface's half of the delivery contract: it draws an
// item on its platform, one call at a time. The outbox holds the other half
// (DeliverTo): it decides what each event means for the item's cards (post,
// update, reply in their thread), keeps the cards' references with the
// item, and decides retry, backoff and give-up, the same way for every
// surface.
//
// A renderer makes the platform call it is asked for, once: it never
// retries, waits or gives up (the import rules test enforces it), and it
// reports each failure as what the platform meant:
//
//   - *RetryAfterError: the platform throttled the call (a 429); After is
//     its Retry-After.
//   - *UnavailableError: the platform cannot take any delivery now
//     (unreachable, a 5xx or 408, the credentials refused).
//   - *PermanentError: the platform will refuse this call however often it
//     is made (a deleted message, a channel the bot cannot post in, a
//     payload it rejects).
//   - any other error: the call failed for a reason of its own that may
//     clear (it counts towards GiveUpAfter).
//
// Every string in an Item or a Note may be untrusted text: a renderer
// escapes it for its platform.
type Renderer interface {
	// Channel returns the platform's id of the configured channel name, or
	// "" when this surface has no channel of that name.
	Channel(name string) string
	// Post posts the item's card, with its buttons while it is pending, in
	// channel (an id from Channel) and returns where the card is (its
	// Platform is filled in by the outbox). key names this post of this
	// item and is the same on every retry of it: a platform that takes an
	// idempotency key (a nonce) is given one derived from it.
	Post(ctx context.Context, channel string, it Item, key string) (MessageRef, error)
	// Update rewrites card to show the item as it is now: the live tally
	// while it is pending; the outcome, who decided, when and why, and no
	// buttons, once it is decided.
	Update(ctx context.Context, card MessageRef, it Item) error
	// Reply posts n in the thread of card.
	Reply(ctx context.Context, card MessageRef, it Item, n Note) error
}

// DirectMessenger is implemented by a surface that can post a card to one
// person (a direct message): what EventDirect needs.
type DirectMessenger interface {
	// DirectChannel returns the platform id of the direct conversation
	// with the configured person named name (principals[].name), opening
	// it when needed, or "" when the person has no account on this
	// surface.
	DirectChannel(ctx context.Context, name string) (string, error)
}

// Notifier is implemented by a surface that posts no card (email): it
// tells people of a reminder or an escalation addressed to its channel
// (the escalation's or the reminder's channel= names it), and does
// nothing for the other events. Its Renderer methods other than Channel
// are never called.
type Notifier interface {
	// Notify tells the people the note concerns (n.Role's, else those who
	// may decide the item) that the item awaits a decision. n.Key is the
	// same on every retry of it.
	Notify(ctx context.Context, channel string, it Item, n Note) error
}

// Note is a reply in the thread of an item's card: a reminder, an
// escalation or a note.
type Note struct {
	// Type is EventReminder, EventEscalated or EventNote (or, to a
	// Notifier, EventDirect: Person names the one person to tell).
	Type string
	// Text is the reminder's or the note's text, or the words of an
	// escalation's note that name neither its channel nor its role. It may
	// be empty: the renderer then says that the item still awaits a
	// decision.
	Text string
	// Role is the role an escalation is addressed to ("" for none). A
	// renderer names it, and may mention the people who hold it.
	Role string
	// OnCall is the on-call rotation an escalation is addressed to, and
	// Person who was on call in it at the time of the escalation ("" for
	// nobody): a renderer says so (OnCallLine) and may mention the person
	// (Chat.Account), oncall.go.
	OnCall, Person string
	// Key names this reply (this event, this card), the same on every
	// retry: an idempotency key, like Post's.
	Key string
}

// DeliverTo returns the Deliverer of sink's events to r: the delivery
// contract's half that is the same for every surface. Each event is one
// operation on the item's cards on this surface (the item's messages whose
// Platform is sink):
//
//   - created: post the card in the item's channel, or in "default" when
//     the surface has no channel of that name, and record it with the item;
//     an item that has a card here already is not posted again.
//   - updated, decided: update every card.
//   - reminder: reply in the thread of every card, while the item is
//     pending.
//   - escalated: the same, then, when the escalation names a channel this
//     surface has and the item has no card there yet, post the card there
//     too (it is then kept up to date like the first).
//   - note: reply in the thread of every card, whatever the item's state.
//   - post: while the item is pending, post the card in the channel the
//     event names when this surface has it and the item has no card there
//     yet (kept up to date like the first); it waits for the first card.
//
// A card the platform refuses for good (*PermanentError) is skipped and
// logged, and the item's other cards are still served; the event fails
// permanently only when every card refused. Any other failure ends the
// delivery of the event (Drain decides when it is tried again). An event
// of an item that no longer exists, or of an unknown type, is permanent;
// an item that cannot be read or rendered is a fault of the event's own.
func (o *Outbox) DeliverTo(sink string, r Renderer) Deliverer {
	d := delivery{o: o, sink: sink, r: r}
	return d.deliver
}

// Serve delivers sink's events to r (DeliverTo) until ctx ends, looking
// again every poll when idle (Run). It is how a chat surface starts its
// outbox worker.
func (o *Outbox) Serve(ctx context.Context, sink string, poll time.Duration, r Renderer) error {
	return o.Run(ctx, sink, poll, o.DeliverTo(sink, r))
}

// delivery carries one sink's events to its renderer.
type delivery struct {
	o    *Outbox
	sink string
	r    Renderer
}

func (d delivery) deliver(ctx context.Context, ev Event) error {
	switch ev.Type {
	case EventCreated, EventUpdated, EventDecided, EventReminder, EventEscalated, EventNote, EventPost, EventDirect:
	default:
		return &PermanentError{Err: fmt.Errorf("%s: item %d: unknown event type %q", d.sink, ev.ItemID, ev.Type)}
	}
	it, err := d.o.b.Items().Get(ctx, ev.ItemID)
	if errors.Is(err, ErrNoItem) {
		return &PermanentError{Err: fmt.Errorf("%s: item %d: %w", d.sink, ev.ItemID, err)}
	}
	if err != nil {
		return fmt.Errorf("%s: item %d cannot be rendered: %w", d.sink, ev.ItemID, err)
	}
	if n, ok := d.r.(Notifier); ok {
		return d.notify(ctx, n, it, ev)
	}
	switch ev.Type {
	case EventCreated:
		if len(d.cards(it)) > 0 {
			return nil // posted before a crash or a retry; updates keep it current
		}
		ch := d.r.Channel(it.Channel)
		if ch == "" {
			ch = d.r.Channel("default")
		}
		if ch == "" {
			return &PermanentError{Err: fmt.Errorf("%s: item %d: no channel %q and no default channel", d.sink, it.ID, it.Channel)}
		}
		return d.post(ctx, it, ch, "post")
	case EventUpdated, EventDecided:
		return d.each(ctx, it, "update", func(card MessageRef) error { return d.r.Update(ctx, card, it) })
	case EventNote:
		return d.reply(ctx, it, ev)
	case EventPost:
		return d.postIn(ctx, it, ev)
	case EventDirect:
		return d.direct(ctx, it, ev)
	}
	// A reminder or an escalation.
	if !it.Pending() {
		return nil // decided meanwhile: nothing to remind anyone of
	}
	rerr := d.reply(ctx, it, ev)
	var perm *PermanentError
	if ev.Type != EventEscalated || (rerr != nil && !errors.As(rerr, &perm)) {
		return rerr
	}
	name, _, _ := parseEscalation(ev.Note)
	target := ""
	if name != "" {
		target = d.r.Channel(name)
	}
	if target == "" {
		return rerr
	}
	for _, c := range d.cards(it) {
		if c.ChannelID == target {
			return rerr // already there
		}
	}
	return d.post(ctx, it, target, "escalate"+strconv.FormatUint(ev.Seq, 10))
}

// postIn delivers a post event: the item's card in the channel ev.Note
// names, when this surface defines it and the item is still pending and
// has no card there yet. Until the item's first card is posted (its
// created event is retried) it waits, so that the first card is never
// taken for posted.
func (d delivery) postIn(ctx context.Context, it Item, ev Event) error {
	target := d.r.Channel(ev.Note)
	if target == "" || !it.Pending() {
		return nil // not a channel of this surface, or decided meanwhile
	}
	cards := d.cards(it)
	if len(cards) == 0 {
		return fmt.Errorf("%s: item %d: its first card is not posted yet, so the card for channel %q waits", d.sink, it.ID, ev.Note)
	}
	for _, c := range cards {
		if c.ChannelID == target {
			return nil // already there
		}
	}
	return d.post(ctx, it, target, "post"+strconv.FormatUint(ev.Seq, 10))
}

// direct delivers a direct event: the item's card in a direct
// conversation with the person ev.Note names, when this surface can post
// to one person and they have an account here, the item is still pending
// and has no card there yet. Like postIn it waits for the item's first
// card. The card is kept up to date like the others.
func (d delivery) direct(ctx context.Context, it Item, ev Event) error {
	dm, ok := d.r.(DirectMessenger)
	if !ok || !it.Pending() {
		return nil
	}
	cards := d.cards(it)
	if len(cards) == 0 {
		return fmt.Errorf("%s: item %d: its first card is not posted yet, so the direct message to %s waits", d.sink, it.ID, ev.Note)
	}
	target, err := dm.DirectChannel(ctx, ev.Note)
	if err != nil {
		return err
	}
	if target == "" {
		return nil // no account on this surface
	}
	for _, c := range cards {
		if c.ChannelID == target {
			return nil // already there
		}
	}
	return d.post(ctx, it, target, "direct"+strconv.FormatUint(ev.Seq, 10))
}

// notify delivers ev to a surface that posts no card: a reminder or an
// escalation of a pending item whose channel is this surface's, once per
// event; a direct event of a pending item (Note.Person names who);
// nothing else.
func (d delivery) notify(ctx context.Context, n Notifier, it Item, ev Event) error {
	if ev.Type == EventDirect && it.Pending() {
		return n.Notify(ctx, "", it, Note{Type: ev.Type, Person: ev.Note, Key: ev.Type + strconv.FormatUint(ev.Seq, 10)})
	}
	if (ev.Type != EventReminder && ev.Type != EventEscalated) || !it.Pending() {
		return nil
	}
	name, role, rest := parseEscalation(ev.Note)
	target := ""
	if name != "" {
		target = d.r.Channel(name)
	}
	if target == "" {
		return nil // addressed elsewhere
	}
	rotation, person, rest := parseOnCall(rest)
	return n.Notify(ctx, target, it, Note{Type: ev.Type, Text: strings.Join(rest, " "), Role: role, OnCall: rotation, Person: person, Key: ev.Type + strconv.FormatUint(ev.Seq, 10)})
}

// cards are the item's messages on this surface.
func (d delivery) cards(it Item) []MessageRef {
	var out []MessageRef
	for _, m := range it.Messages {
		if m.Platform == d.sink {
			out = append(out, m)
		}
	}
	return out
}

// post posts the item's card in channel and records it with the item, so
// that it is updated in place later, after a restart too.
func (d delivery) post(ctx context.Context, it Item, channel, key string) error {
	ref, err := d.r.Post(ctx, channel, it, key)
	if err != nil {
		return err
	}
	if ref.MessageID == "" {
		return fmt.Errorf("%s: posting item %d in %s: the platform answered without a message id", d.sink, it.ID, channel)
	}
	ref.Platform = d.sink
	if ref.ChannelID == "" {
		ref.ChannelID = channel
	}
	if err := d.o.b.Items().AddMessageRef(ctx, it.ID, ref); err != nil {
		return err
	}
	d.o.b.log.InfoContext(ctx, "posted item", "sink", d.sink, "item", it.ID, "channel", ref.ChannelID, "message", ref.MessageID)
	return nil
}

// reply posts ev's note in the thread of every card of the item.
func (d delivery) reply(ctx context.Context, it Item, ev Event) error {
	n := Note{Type: ev.Type, Text: ev.Note}
	switch ev.Type {
	case EventEscalated:
		_, role, rest := parseEscalation(ev.Note)
		n.OnCall, n.Person, rest = parseOnCall(rest)
		n.Role, n.Text = role, strings.Join(rest, " ")
	case EventReminder:
		// A reminder addressed to a surface that posts no card (email)
		// names its channel; the threads show only its words.
		_, _, rest := parseEscalation(ev.Note)
		n.Text = strings.Join(rest, " ")
	}
	if len(d.cards(it)) == 0 {
		d.o.b.log.WarnContext(ctx, "outbox: the item has no card on this surface to reply to", "sink", d.sink, "item", it.ID, "type", ev.Type)
	}
	return d.each(ctx, it, ev.Type, func(card MessageRef) error {
		n.Key = ev.Type + strconv.FormatUint(ev.Seq, 10) + "/" + card.MessageID
		return d.r.Reply(ctx, card, it, n)
	})
}

// each runs op on every card of the item: a card refused for good is
// skipped and logged; any other failure stops at once. It fails
// permanently when every card refused.
func (d delivery) each(ctx context.Context, it Item, what string, op func(MessageRef) error) error {
	var refused error
	done := 0
	for _, c := range d.cards(it) {
		err := op(c)
		var perm *PermanentError
		switch {
		case err == nil:
			done++
		case errors.As(err, &perm):
			refused = err
			d.o.b.log.ErrorContext(ctx, "outbox: a card of the item refused the "+what+" for good; skipped", "sink", d.sink, "item", it.ID, "channel", c.ChannelID, "message", c.MessageID, "err", err)
		default:
			return err
		}
	}
	if done == 0 && refused != nil {
		return refused
	}
	return nil
}
