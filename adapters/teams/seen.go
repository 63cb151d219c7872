package teams

import (
	"encoding/json"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// What an approver saw (bot.Seen). Teams does not send the card back with
// a click, as Slack and Discord do; so when Countersign draws a card it
// puts the SHA-256 of the card's text (cardText) into the data of the
// card's deciding buttons, and a click says which card it came from. It
// is the card Countersign sent to that person: their own refreshed view,
// or the confirmation step.

// Data keys of a sealed button.
const (
	dataSeen = "seen" // lower-case hex SHA-256 of the card's text
	dataCut  = "cut"  // "1": something on the card was cut to fit
)

// sealed are the verbs whose clicks record what was seen.
var sealed = map[string]bool{verbApprove: true, verbConfirm: true, verbGrant: true}

// seal stamps the card's deciding buttons with what the card shows.
func seal(c *card) {
	text, cut := cardText(c)
	seen := bot.SeenText(bot.SurfaceTeams, text, cut)
	for _, a := range c.Actions {
		e, ok := a.(execute)
		if !ok || !sealed[e.Verb] || e.Data == nil {
			continue
		}
		e.Data[dataSeen] = seen.SHA256
		if cut {
			e.Data[dataCut] = "1"
		}
	}
}

// cardText is the text a card shows, in order, one a line: every "text"
// and "title" of its body and actions (Details folded under a ShowCard
// included). truncated reports that something was cut to fit (every cut
// ends with truncMarker, or says how much more is not shown).
func cardText(c *card) (text string, truncated bool) {
	raw, err := json.Marshal(struct {
		Body    []any `json:"body"`
		Actions []any `json:"actions"`
	}{c.Body, c.Actions})
	if err != nil {
		return "", false
	}
	return chat.CardText(raw, "text", "title")
}

// seenOf is what a click's card showed, from its sealed data; nil when
// the button carries none (an older card, or a button that decides
// nothing) or a malformed one.
func seenOf(data map[string]string) *bot.Seen {
	h := data[dataSeen]
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return nil
	}
	return &bot.Seen{SHA256: h, Surface: bot.SurfaceTeams, Truncated: data[dataCut] == "1"}
}
