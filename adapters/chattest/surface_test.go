package chattest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
	// drain delivers every due outbox event to the fake.
	drain()
	// card is item id's card in its channel now, as p's client shows
	// it (on Teams the card a person sees is refreshed for them).
	card(p person, id uint64) card
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
	// replay delivers the last click again, as the platform's retry or
	// a replay of the same delivery would.
	replay() answer
	// forged sends approver's Approve of item id in ways the surface
	// must refuse (a bad signature or token, a stale or future time,
	// a changed body…): the status each got, by name.
	forged(id uint64) map[string]int
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
	card    *card  // the card shown in place of the clicked one (Discord, Teams)
	step    bool   // a confirmation step was opened
}

// surfaces is the table every test runs: one case per surface.
var surfaces = []struct {
	name string
	new  func(t *testing.T) surface
}{
	{"slack", newSlack},
	{"discord", newDiscord},
	{"teams", newTeams},
}

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

// texts are the string values of every "text", "title", "value" and
// "content" key of a JSON document, in document order.
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
		t.Fatalf("not JSON (%v): %s", err, raw)
	}
	return v
}

func background() context.Context { return context.Background() }

func itemRef(id uint64) string { return fmt.Sprintf("#%d", id) }

var _ = strings.Contains
