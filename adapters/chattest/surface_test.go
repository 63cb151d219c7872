package chattest

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
)

// A surface is one chat surface under test: its real adapter, with its
// real client, against the surface's fake, in front of a world's bot.
// Its methods normalise what the surface shows (a card's buttons and
// text, a private answer) so that one table asserts the same behaviour
// of every surface.
type surface interface {
	world() *world
	// name is the surface's outbox sink and audit surface: "slack".
	name() string
	// who is how the bot names p after a click on this surface:
	// "dr_smith [U0123ABC]", "unmapped [T1/U0999XYZ]".
	who(p person) string
	// restart is a process restart: the adapter and the world's bot are
	// built again on the same store; the platform (the fake) stays.
	restart()
	// drain delivers every due outbox event to the fake.
	drain()
	// renderer is the adapter's bot.Renderer (what the outbox delivers
	// through).
	renderer() bot.Renderer
	// throttle makes the fake answer the next post of a card with a rate
	// limit that asks to wait after; refuse makes it answer the next
	// post with a failure: one that retrying cannot fix (permanent: the
	// channel is gone, the bot may not post there) or one that it may
	// (the platform is down).
	throttle(after time.Duration)
	refuse(permanent bool)
	// card is item id's card in its channel now, as p's client shows
	// it (on Teams the card a person sees is refreshed for them).
	card(p person, id uint64) card
	// channel is the surface's id of the channel name ("ops").
	channel(name string) string
	// posts counts the cards posted (not thread replies), failing the
	// test if one was posted without the bot's credentials.
	posts() int
	// replies are the texts posted in the thread of item id's message
	// (reminders, escalations), oldest first.
	replies(id uint64) []string
	// edits counts the updates of item id's first message.
	edits(id uint64) int
	// click has p press button (approve, reject) on item id's card, as
	// p's client sends it; for a destructive item's approve that is
	// through its confirmation step (Slack's dialog; Discord's and
	// Teams' second button). It returns what p was shown.
	click(p person, id uint64, button string) answer
	// unconfirmed has p approve destructive item id without its
	// confirmation step: the Approve of Discord and Teams (which opens
	// the step), a Slack click without the dialog's mark (an old card,
	// a forged value).
	unconfirmed(p person, id uint64) answer
	// answer has p answer question id with the options at indexes
	// choices (one option's button, or a multi-choice question's
	// several, submitted), as p's client sends it; an index the
	// question does not have is sent as given.
	answer(p person, id uint64, choices ...int) answer
	// details is what p can read privately of item id beyond its
	// channel card: the detail Slack sends each approver when it posts a
	// sensitive item, or the answer to the Details button (Discord,
	// Teams).
	details(p person, id uint64) answer
	// reject has p press Reject on item id's card and submit the reason
	// form it opens with reason; it returns what p was shown when the
	// form was submitted (a refused reason keeps the form open with the
	// problem: private).
	reject(p person, id uint64, reason string) answer
	// replay delivers the last click again, as the platform's retry or
	// a replay of the same delivery would.
	replay() answer
	// forged sends approver's Approve of item id in ways the surface
	// must refuse (a bad signature or token, a stale or future time,
	// a changed body…): the status each got, by name.
	forged(id uint64) map[string]int
	// doubled sends approver's genuine, signed Approve of item id with
	// the key that names what is decided given twice (a harmless value,
	// then the real one): the status and body of the answer, and the
	// key's path as the refusal must name it.
	doubled(id uint64) (status int, body, key string)
}

// card is a card as its channel shows it.
type card struct {
	buttons []string // the actions offered: approve, reject, …
	text    string   // every text of the card, one a line
	// danger is Approve's confirmation when Approve is styled as the
	// dangerous action ("" when it is not).
	danger string
}

func (c card) has(button string) bool {
	for _, b := range c.buttons {
		if b == button {
			return true
		}
	}
	return false
}

// answer is what the clicker was shown.
type answer struct {
	private string // what only the clicker was shown ("" nothing)
	n       int    // in how many private answers (Slack's may be several)
	card    *card  // the card shown in place of the clicked one (Discord, Teams)
	step    bool   // a confirmation step was opened
	// detail is the full text of a private answer that carries more
	// than a sentence (a card shown to the clicker alone).
	detail string
	// form is the form the click opened (Discord's modal custom id).
	form string
	// confirm is the step's confirming button, as the surface sends it
	// (Discord's custom id).
	confirm string
}

// surfaces is the table every test runs: one case per surface, with what
// that surface shows where the surfaces differ in form.
var surfaces = []struct {
	name string
	new  func(t *testing.T) surface
	// inPlace: a click is answered with the clicked card itself (Discord's
	// and Teams' interaction responses); Slack answers a click later, by
	// a private message or by the outbox's update.
	inPlace bool
	// approved and expired are what a card so decided says, in the
	// surface's markup; dates as chat.Stamp writes them.
	approved, expired []string
	// replaySilent: a replayed delivery is dropped without an answer
	// (Slack retries a click it got no 200 for; nobody waits on it);
	// otherwise it is answered with the recorded outcome.
	replaySilent bool
	// step is what approving a destructive item without its
	// confirmation says.
	step string
	// noReason is what a blank reason for a rejection says; rejected
	// what the rejected card says (the reason with its markup inert).
	noReason string
	rejected []string
	// reminder and escalation are what those replies say (besides the
	// escalation's first sentence), live the markup of the note that
	// must not reach the surface as written (it would ping).
	reminder, escalation, live []string
	// retryAfter is the wait a rate limit asks for in the tests, in the
	// surface's resolution (Discord's is fractional seconds).
	retryAfter time.Duration
	// detailsAsked: a sensitive item's detail is shown on a Details
	// button (audited), not sent to the approvers with the card.
	detailsAsked bool
}{
	{name: "slack", new: newSlack,
		approved:     []string{"✅ *Approved* by dr_smith (chat click) on <!date^1772355600^", "|2026-03-01 09:00 UTC>", "Approved: asked by the tests"},
		expired:      []string{"⌛ *Expired* on <!date^1772357460^", "|2026-03-01 09:31 UTC>", "Expired: asked by the tests"},
		replaySilent: true, step: "takes a confirmation",
		noReason: "Give a reason: it is recorded with the decision.",
		rejected: []string{"⛔ *Denied* by nurse_jo (chat click) on <!date^", "```Not during the freeze &lt;!channel&gt; @\u2060here```", "Denied: asked by the tests"}},
	{name: "discord", new: newDiscord, inPlace: true,
		approved: []string{"✅ action request approved by dr_smith [111].", "Outcome\n✅ Approved", "Decided by\ndr_smith (chat click)", "Decided at\n2026-03-01 09:00 UTC"},
		expired:  []string{"⌛ action request expired.", "Outcome\n⌛ Expired", "Decided at\n2026-03-01 09:31 UTC"},
		step:     "cannot be undone",
		noReason: "A reason is required to reject #",
		rejected: []string{"⛔ action request denied by nurse_jo [444].", "Outcome\n⛔ Denied", "Decided by\nnurse_jo (chat click)", "Reason\nNot during the freeze <\u200b!channel> @\u200bhere"},
		reminder: []string{"⏰ **Countersign #", " reminder: Reminder: waited 10m @\u200bhere \\<\u200b!channel> \\<\u200b@&456>"},
		// Discord names the role and mentions nobody: the config maps
		// people to Discord users, not roles to their members.
		escalation: []string{"📣 **Countersign #", " escalation: \\#", " still awaits approval, past the escalation time. Escalated to role member."},
		live:       []string{"<@&456>", " @here"},
		retryAfter: 2500 * time.Millisecond, detailsAsked: true},
	{name: "teams", new: newTeams, inPlace: true,
		approved: []string{"✅ Approved · #", "✅ Approved\n by dr_smith (chat click)\n on 2026-03-01 09:00 UTC"},
		expired:  []string{"⌛ Expired · #", "⌛ Expired\n on 2026-03-01 09:31 UTC"},
		step:     "It cannot be undone",
		// A TextRun shows its text literally: no markup to make inert.
		noReason: "A reason is required to reject #",
		rejected: []string{"⛔ Denied · #", "⛔ Denied\n by nurse_jo (chat click)", "Reason: \nNot during the freeze <!channel> @here"},
		// A mention is an entity the bot adds (never one from a note).
		reminder:   []string{"⏰ Reminder: waited 10m @here \\<\\!channel\\> \\<@&456\\>"},
		escalation: []string{"📣 Escalated: #", " still awaits a decision. Escalated to role member: <at>dr\\_smith</at> <at>nurse\\_jo</at>"},
		live:       []string{"<!channel>", "<@&456>"},
		retryAfter: 2 * time.Second, detailsAsked: true},
}

// unmark undoes the Markdown escapes of a Discord or Teams text, for
// reading it.
var unmark = regexp.MustCompile("\\\\([\\\\`*_{}\\[\\]()<>#+\\-.!|~])")

func unmarked(s string) string { return unmark.ReplaceAllString(s, "$1") }

// ref returns item id's one message on surface sink.
func ref(t *testing.T, w *world, sink string, id uint64) bot.MessageRef {
	t.Helper()
	var out []bot.MessageRef
	for _, m := range w.item(id).Messages {
		if m.Platform == sink {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		t.Fatalf("item %d has no %s message, want 1", id, sink)
	}
	return out[0]
}

// texts are the string values of the "title", "text", "content", "name",
// "value" and "description" keys of a JSON document: an object's in that
// order, arrays in order, an object's other members in no set order.
func texts(v any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"title", "text", "content", "name", "value", "description"} {
				if s, ok := v[k].(string); ok {
					out = append(out, s)
				}
			}
			for k, c := range v {
				if _, ok := c.(string); !ok || k == "" {
					walk(c)
				}
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// decode is a JSON string or bytes as a generic value.
func decode(t *testing.T, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("%s is not JSON (%v), want JSON", raw, err)
	}
	return v
}
