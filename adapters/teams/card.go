package teams

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// Cards are Adaptive Cards 1.5 (https://adaptivecards.io/explorer/) with
// Universal Actions (Action.Execute). Untrusted text (titles, field
// values, reasons, names) is only ever put where no markup is read: a
// TextRun of a RichTextBlock (no Markdown), an action's title, an input's
// value or placeholder. TextBlocks, which Teams reads as Markdown, hold
// only Countersign's own words and numbers.

// Limits. Teams refuses a message over about 28 KB, card included; the
// card is kept well under it.
const (
	cardVersion  = "1.5"
	cardSchema   = "http://adaptivecards.io/schemas/adaptive-card.json"
	maxTitle     = 300
	maxValue     = 1500 // one field's value
	maxFieldsLen = 12000
	maxReason    = 2000 // a rejection reason typed on the card
	maxEditText  = 3000
	maxEditInput = 10
	maxOptions   = 20
	maxUserIDs   = 60 // refresh.userIds holds at most 60 (Teams)
	truncMarker  = "…(truncated)"
)

// Verbs of the card's actions (Action.Execute verb); data carries the
// item's number and what else the action needs.
const (
	verbRefresh      = "refresh"         // Teams asks for a user's view of the card
	verbApprove      = "approve"         // data: item, basis
	verbConfirm      = "approve_confirm" // the second step of approving a destructive item
	verbGrant        = "approve_grant"   // data: item, grant, for
	verbEdit         = "edit"            // opens the edit form on the card
	verbEditSubmit   = "edit_submit"     // data: item, basis; inputs edit_0…, note
	verbReject       = "reject"          // opens the reason form on the card
	verbRejectSubmit = "reject_submit"   // input: reason
	verbAnswer       = "answer"          // data: item, option
	verbAnswerMulti  = "answer_multi"    // input: choices ("0,2")
	verbDetails      = "details"         // a sensitive item's detail, for an approver
	inputReason      = "reason"
	inputNote        = "note"
	inputEdit        = "edit_" // + index
	inputChoices     = "choices"
	stylePositive    = "positive"
	styleDestructive = "destructive"
	colorAttention   = "attention"
	colorGood        = "good"
	colorWarning     = "warning"
)

// card is an Adaptive Card.
type card struct {
	Type    string   `json:"type"`
	Schema  string   `json:"$schema"`
	Version string   `json:"version"`
	Refresh *refresh `json:"refresh,omitempty"`
	Body    []any    `json:"body"`
	Actions []any    `json:"actions,omitempty"`
	// MSTeams makes the card use the message's full width.
	MSTeams *struct {
		Width string `json:"width"`
	} `json:"msteams,omitempty"`
}

type refresh struct {
	Action  execute  `json:"action"`
	UserIDs []string `json:"userIds"`
}

type execute struct {
	Type  string            `json:"type"` // Action.Execute
	Title string            `json:"title,omitempty"`
	Verb  string            `json:"verb"`
	Data  map[string]string `json:"data,omitempty"`
	Style string            `json:"style,omitempty"`
	// AssociatedInputs: "auto" sends the card's inputs, "none" none.
	AssociatedInputs string `json:"associatedInputs,omitempty"`
}

// showCard is an Action.ShowCard: a card folded under a button, shown
// in place when it is clicked (the item's Details).
type showCard struct {
	Type  string   `json:"type"` // Action.ShowCard
	Title string   `json:"title"`
	Card  *subCard `json:"card"`
}

// subCard is the card inside an Action.ShowCard (it takes its version
// from the card it is in).
type subCard struct {
	Type string `json:"type"` // AdaptiveCard
	Body []any  `json:"body"`
}

// actionSet is an ActionSet: actions placed in the card's body.
type actionSet struct {
	Type    string `json:"type"` // ActionSet
	Actions []any  `json:"actions"`
}

type openURL struct {
	Type  string `json:"type"` // Action.OpenUrl
	Title string `json:"title"`
	URL   string `json:"url"`
}

type textBlock struct {
	Type     string `json:"type"` // TextBlock
	Text     string `json:"text"`
	Wrap     bool   `json:"wrap"`
	Weight   string `json:"weight,omitempty"`
	Size     string `json:"size,omitempty"`
	Color    string `json:"color,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
	Spacing  string `json:"spacing,omitempty"`
}

type richText struct {
	Type    string    `json:"type"` // RichTextBlock
	Inlines []textRun `json:"inlines"`
	Spacing string    `json:"spacing,omitempty"`
}

type textRun struct {
	Type     string `json:"type"` // TextRun
	Text     string `json:"text"`
	Weight   string `json:"weight,omitempty"`
	Size     string `json:"size,omitempty"`
	Color    string `json:"color,omitempty"`
	FontType string `json:"fontType,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
}

type inputText struct {
	Type        string `json:"type"` // Input.Text
	ID          string `json:"id"`
	Label       string `json:"label,omitempty"`
	Value       string `json:"value,omitempty"`
	Placeholder string `json:"placeholder,omitempty"`
	IsMultiline bool   `json:"isMultiline,omitempty"`
	MaxLength   int    `json:"maxLength,omitempty"`
	IsRequired  bool   `json:"isRequired,omitempty"`
	ErrorMsg    string `json:"errorMessage,omitempty"`
}

type choiceSet struct {
	Type          string   `json:"type"` // Input.ChoiceSet
	ID            string   `json:"id"`
	Label         string   `json:"label,omitempty"`
	IsMultiSelect bool     `json:"isMultiSelect"`
	Style         string   `json:"style,omitempty"`
	Choices       []choice `json:"choices"`
}

type choice struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

func newCard() *card {
	c := &card{Type: "AdaptiveCard", Schema: cardSchema, Version: cardVersion, Body: []any{}}
	c.MSTeams = &struct {
		Width string `json:"width"`
	}{Width: "Full"}
	return c
}

// words is a TextBlock of Countersign's own words (never untrusted text:
// Teams reads it as Markdown).
func words(s string) textBlock { return textBlock{Type: "TextBlock", Text: s, Wrap: true} }

// plain is a RichTextBlock of untrusted text shown literally.
func plain(runs ...textRun) richText { return richText{Type: "RichTextBlock", Inlines: runs} }

// run is a TextRun of untrusted text, cleaned and cut to max characters.
func run(s string, max int) textRun { return textRun{Type: "TextRun", Text: clean(s, max)} }

// clean makes untrusted text safe to show: control and invisible format
// characters dropped (bot.Invisible), CR LF to LF, cut to max runes.
func clean(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\r':
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case bot.Invisible(r), r < ' ', r == 0x7f, r >= 0x80 && r < 0xa0:
		case r == utf8.RuneError:
		default:
			b.WriteRune(r)
		}
	}
	return cut(b.String(), max)
}

// cut shortens s to max runes, ending with truncMarker when it cut.
func cut(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	keep := max - utf8.RuneCountInString(truncMarker)
	if keep < 0 {
		keep = 0
	}
	return strings.TrimRight(string(r[:keep]), "\n") + truncMarker
}

// label is untrusted text for a plain-text place (an action's title, an
// input's label): one line, cut.
func label(s string, max int) string { return bot.OneLine(s, max) }

func itemTitle(it bot.Item) string {
	if strings.TrimSpace(it.Title) == "" {
		return "Item #" + strconv.FormatUint(it.ID, 10)
	}
	return it.Title
}

func idOf(it bot.Item) string { return strconv.FormatUint(it.ID, 10) }

// view is who a card is drawn for.
type view struct {
	// buttons: the viewer may decide the item (their refreshed view).
	buttons bool
	// details: the viewer may see a sensitive item's fields.
	details bool
	// folded: the viewer may read the item's folded detail (bot.Item.Details
	// and its votes): the card carries it under a Details Action.ShowCard.
	// Without it a card with detail offers a Details button, which asks
	// Countersign (chat.ShowDetails decides who may read it).
	folded bool
	// notice is a private line for the viewer at the top (an answer).
	notice      string
	noticeColor string
}

// itemCard draws the item, as chat's vocabulary lays a card out for the
// person clicking: a dangerous item's warning first, the first line (the
// agent's summary), a reopening, what approving does, the facts it rests
// on, the arguments, the item's other fields, why a person is asked; then
// who asked and when, the outcome or the buttons, and the folded Details.
// The shared card (what everyone in the channel sees) has no decision
// buttons; while the item is pending its refresh names the eligible
// approvers, whose Teams clients then ask for their own view (v.buttons).
func itemCard(it bot.Item, v view, userIDs []string) *card {
	c := newCard()
	id := idOf(it)
	if v.notice != "" {
		tb := words(escapeMarkdown(v.notice))
		tb.Color, tb.Weight = orColor(v.noticeColor), "Bolder"
		c.Body = append(c.Body, tb)
	}
	head := "Approval needed"
	if it.Kind == bot.KindQuestion {
		head = "Question"
	}
	if !it.Pending() {
		icon, word := chat.StatusWord(it.Status)
		head = icon + " " + word
	}
	hb := words(escapeMarkdown(head) + " · #" + id)
	hb.IsSubtle, hb.Size = true, "Small"
	c.Body = append(c.Body, hb)
	withheld := it.Sensitive && !v.details
	title := plain(textRun{Type: "TextRun", Text: clean(itemTitle(it), maxTitle), Weight: "Bolder", Size: "Medium"})
	if withheld {
		title = plain(textRun{Type: "TextRun", Text: "A " + chat.SensitiveNoun(it.Kind) + " awaits a decision", Weight: "Bolder", Size: "Medium"})
		if !it.Pending() {
			title.Inlines[0].Text = "A " + chat.SensitiveNoun(it.Kind)
		}
	}
	c.Body = append(c.Body, title)
	if withheld {
		if it.Danger != nil && it.Pending() {
			w := words("⚠ Approving this cannot be undone.")
			w.Color, w.Weight = colorAttention, "Bolder"
			c.Body = append(c.Body, w)
		}
		c.Body = append(c.Body, words("The detail of this sensitive item is shown only to its approvers: Show details, or open it in the console."))
	} else {
		c.Body = append(c.Body, lineBlocks(it)...)
		if d := detailsAction(it, v); d != nil {
			// In the body, as its own ActionSet: the card's actions are
			// the decision's (Teams shows at most five).
			c.Body = append(c.Body, actionSet{Type: "ActionSet", Actions: []any{d}})
		}
	}
	c.Body = append(c.Body, contextLine(it))
	if it.Tally != "" {
		c.Body = append(c.Body, plain(textRun{Type: "TextRun", Text: "🗳 "}, run(it.Tally, 500)))
	}
	if ch := chat.WithChanges(it); ch != "" {
		if withheld {
			ch = "edited by an approver; the changes are withheld from this channel"
		}
		c.Body = append(c.Body, plain(textRun{Type: "TextRun", Text: "✏️ "}, run(capitalize(ch), 1000)))
	}
	if !it.Pending() {
		c.Body = append(c.Body, outcomeBlocks(it)...)
	}
	switch {
	case it.Pending() && v.buttons:
		if it.Kind == bot.KindQuestion && it.Multi && len(it.Options) > 0 {
			c.Body = append(c.Body, choicesInput(it))
		}
		if hidden := len(it.Options) - maxOptions; it.Kind == bot.KindQuestion && hidden > 0 {
			c.Body = append(c.Body, words(fmt.Sprintf("…(truncated: %d more options cannot be shown in Teams; answer in the console or with the API)", hidden)))
		}
		c.Actions = append(c.Actions, decisionActions(it)...)
	case it.Pending():
		n := words("Approvers see the buttons on this card.")
		n.IsSubtle, n.Size = true, "Small"
		c.Body = append(c.Body, n)
	}
	if withheld && it.Pending() && v.buttons {
		c.Actions = append(c.Actions, execute{Type: "Action.Execute", Title: "Show details", Verb: verbDetails, Data: map[string]string{"item": id}})
	}
	if it.WebURL != "" {
		// Built by the core from web.public_url, never from item text.
		c.Actions = append(c.Actions, openURL{Type: "Action.OpenUrl", Title: "Open in browser", URL: it.WebURL})
	}
	if it.Pending() {
		ids := userIDs
		if len(ids) > maxUserIDs {
			ids = ids[:maxUserIDs]
		}
		if ids == nil {
			ids = []string{}
		}
		c.Refresh = &refresh{Action: execute{Type: "Action.Execute", Verb: verbRefresh, Data: map[string]string{"item": id}}, UserIDs: ids}
	}
	seal(c)
	return c
}

// lineBlocks are the card's lines for the person clicking, in chat's
// order and words (Slack's cardBlocks, Discord's embed): untrusted text
// only in TextRuns.
func lineBlocks(it bot.Item) []any {
	var out []any
	if it.Danger != nil && it.Pending() {
		out = append(out, plain(textRun{Type: "TextRun", Text: clean(bot.OneLine(it.Danger.Warning, 400), 400), Weight: "Bolder", Color: colorAttention}))
	}
	if line := chat.ReopenedLine(it); line != "" && it.Pending() {
		out = append(out, plain(textRun{Type: "TextRun", Text: "🔁 " + clean(line, 600), Weight: "Bolder", Color: colorWarning}))
	}
	if lbl := chat.EffectLabel(it); lbl != "" {
		out = append(out, plain(textRun{Type: "TextRun", Text: lbl + " ", Weight: "Bolder"}, run(bot.OneLine(it.Effect, 1000), 1000)))
	}
	if len(it.Facts) > 0 {
		out = append(out, plain(textRun{Type: "TextRun", Text: chat.FactsHeading(it), Weight: "Bolder"}))
		for _, f := range it.Facts {
			icon, color := "✅ ", ""
			if f.Verdict != "SAFE" {
				icon, color = "⛔ ", colorAttention
			}
			r := run(chat.FactLine(f), 600)
			r.Color = color
			out = append(out, plain(textRun{Type: "TextRun", Text: icon}, r))
		}
	}
	if len(it.Args) > 0 {
		out = append(out, plain(textRun{Type: "TextRun", Text: chat.ArgsLabel, Weight: "Bolder"}))
		out = append(out, fieldBlocks(it.Args)...)
	}
	out = append(out, fieldBlocks(it.Fields)...)
	if it.Asked != "" {
		out = append(out, plain(
			textRun{Type: "TextRun", Text: chat.AskedLabel + " ", Weight: "Bolder", IsSubtle: true, Size: "Small"},
			textRun{Type: "TextRun", Text: clean(bot.OneLine(it.Asked, 600), 600), IsSubtle: true, Size: "Small"},
		))
	}
	return out
}

// detailsAction is the card's Details: folded under an Action.ShowCard
// for a viewer who may read them, else a button that asks Countersign
// (chat.ShowDetails decides who may read them); nil when there are none.
func detailsAction(it bot.Item, v view) any {
	switch {
	case len(it.Details) == 0 && len(it.Votes) == 0:
		return nil
	case v.folded:
		return showCard{Type: "Action.ShowCard", Title: chat.DetailsLabel, Card: detailsCard(it)}
	}
	return execute{Type: "Action.Execute", Title: chat.DetailsLabel, Verb: verbDetails, Data: map[string]string{"item": idOf(it)}}
}

// detailsCard is an item's folded detail (chat.DetailsText: its Details
// fields and its votes, each with what the voter was shown), one
// RichTextBlock a line.
func detailsCard(it bot.Item) *subCard {
	c := &subCard{Type: "AdaptiveCard", Body: []any{}}
	for _, line := range strings.Split(chat.DetailsText(it), "\n") {
		c.Body = append(c.Body, plain(run(line, maxValue)))
	}
	return c
}

func orColor(c string) string {
	if c == "" {
		return colorAttention
	}
	return c
}

// fieldBlocks renders the item's fields, each a bold label and its value
// verbatim (monospace), within a total budget.
func fieldBlocks(fields []bot.Field) []any {
	var out []any
	budget := maxFieldsLen
	for i, f := range fields {
		v := f.Value
		if strings.TrimSpace(v) == "" {
			v = "—"
		}
		if budget <= 0 {
			out = append(out, words(fmt.Sprintf("…(truncated: %d more fields are not shown; open the item in the console)", len(fields)-i)))
			break
		}
		val := clean(v, min(maxValue, budget))
		budget -= utf8.RuneCountInString(val)
		out = append(out, plain(
			textRun{Type: "TextRun", Text: clean(bot.OneLine(f.Label, 100), 100) + ": ", Weight: "Bolder"},
			textRun{Type: "TextRun", Text: val, FontType: "Monospace"},
		))
	}
	return out
}

// contextLine is who asked, when, until when, and the item's number.
func contextLine(it bot.Item) richText {
	var runs []textRun
	add := func(r textRun) {
		r.IsSubtle, r.Size = true, "Small"
		if len(runs) > 0 {
			runs = append(runs, textRun{Type: "TextRun", Text: " · ", IsSubtle: true, Size: "Small"})
		}
		runs = append(runs, r)
	}
	if it.Requester != "" {
		// The name: the principal's id is detail (Details).
		add(textRun{Type: "TextRun", Text: "Requested by " + clean(chat.NameOf(it.Requester), 200)})
	}
	if !it.CreatedAt.IsZero() {
		add(textRun{Type: "TextRun", Text: "Asked " + chat.Stamp(it.CreatedAt)})
	}
	if it.Pending() && !it.ExpiresAt.IsZero() {
		add(textRun{Type: "TextRun", Text: "Expires " + chat.Stamp(it.ExpiresAt)})
	}
	add(textRun{Type: "TextRun", Text: "Item #" + idOf(it)})
	return plain(runs...)
}

// outcomeBlocks say what was decided, by whom, when and why.
func outcomeBlocks(it bot.Item) []any {
	icon, word := chat.StatusWord(it.Status)
	runs := []textRun{{Type: "TextRun", Text: icon + " " + word, Weight: "Bolder", Color: outcomeColor(it.Status)}}
	if len(it.DecidedBy) > 0 {
		runs = append(runs, textRun{Type: "TextRun", Text: " by " + chat.Deciders(it, 600)})
	}
	if !it.DecidedAt.IsZero() {
		runs = append(runs, textRun{Type: "TextRun", Text: " on " + chat.Stamp(it.DecidedAt)})
	}
	out := []any{plain(runs...)}
	switch {
	case it.Reason == "":
	case it.Sensitive:
		out = append(out, words("The reason is kept in the audit log."))
	default:
		out = append(out, plain(textRun{Type: "TextRun", Text: "Reason: ", Weight: "Bolder"}, textRun{Type: "TextRun", Text: clean(it.Reason, maxReason), FontType: "Monospace"}))
	}
	return out
}

func outcomeColor(status string) string {
	switch {
	case chat.Approving(status):
		return colorGood
	case chat.Refusing(status):
		return colorAttention
	}
	return colorWarning
}

// decisionActions are the buttons of a pending item for an approver.
// The dangerous action looks dangerous: on an item that cannot be undone
// (bot.Item.Danger) Approve is the destructive one and opens the
// confirmation step (confirmCard), Reject is not; an edit or a standing
// grant, which would skip that step, is not offered.
func decisionActions(it bot.Item) []any {
	id := idOf(it)
	if it.Kind == bot.KindQuestion && len(it.Options) > 0 {
		return questionActions(it, id)
	}
	approve := execute{Type: "Action.Execute", Title: "Approve", Verb: verbApprove, Style: stylePositive, Data: map[string]string{"item": id}}
	if b := chat.EditBasis(it); b != "" {
		approve.Data["basis"] = b
	}
	reject := execute{Type: "Action.Execute", Title: "Reject", Verb: verbReject, Style: styleDestructive, Data: map[string]string{"item": id}}
	if it.Danger != nil {
		approve.Style, reject.Style = styleDestructive, ""
	}
	acts := []any{approve}
	if it.Editable != nil && it.Danger == nil {
		acts = append(acts, execute{Type: "Action.Execute", Title: "Edit & approve", Verb: verbEdit, Data: map[string]string{"item": id}})
	}
	acts = append(acts, reject)
	if it.Danger != nil {
		return acts
	}
	for _, g := range it.Grants {
		d := map[string]string{"item": id, "grant": g.Kind}
		if g.For != "" {
			d["for"] = g.For
		}
		acts = append(acts, execute{Type: "Action.Execute", Title: label(g.Label, 60), Verb: verbGrant, Data: d})
	}
	return acts
}

// questionActions are a question's answers: a button per option, or for
// a multi-choice question the options as checkboxes and a Submit.
func questionActions(it bot.Item, id string) []any {
	var acts []any
	if it.Multi {
		// The checkboxes are in the body (choicesInput); Submit sends them.
		acts = append(acts, execute{Type: "Action.Execute", Title: "Submit", Verb: verbAnswerMulti, Style: stylePositive, Data: map[string]string{"item": id}, AssociatedInputs: "auto"})
	} else {
		for i := range min(len(it.Options), maxOptions) {
			acts = append(acts, execute{Type: "Action.Execute", Title: label(it.Options[i], 60), Verb: verbAnswer, Data: map[string]string{"item": id, "option": strconv.Itoa(i)}})
		}
	}
	acts = append(acts, execute{Type: "Action.Execute", Title: "Decline", Verb: verbReject, Data: map[string]string{"item": id}})
	return acts
}

// choicesInput is a multi-choice question's checkboxes (in the body).
func choicesInput(it bot.Item) choiceSet {
	cs := choiceSet{Type: "Input.ChoiceSet", ID: inputChoices, Label: "Choose one or more", IsMultiSelect: true, Style: "expanded"}
	for i := range min(len(it.Options), maxOptions) {
		cs.Choices = append(cs.Choices, choice{Title: label(it.Options[i], 200), Value: strconv.Itoa(i)})
	}
	return cs
}

// confirmCard is the second step of approving a dangerous item
// (bot.Item.Danger), in chat's words (Slack's confirm dialog, Discord's
// second button): the whole card as it is now under what runs, on what,
// and who is recorded, and the button that approves. A card cut to fit
// gets no button: it is approved in the console, read whole.
func confirmCard(it bot.Item) *card {
	c := itemCard(it, view{buttons: true, details: true, folded: true}, nil)
	c.Refresh = nil
	c.Actions = withoutDecisions(c.Actions)
	w := plain(
		textRun{Type: "TextRun", Text: "⚠ " + clean(chat.ConfirmTitle(it), 200) + ". ", Weight: "Bolder", Color: colorAttention},
		run(chat.ConfirmText(it), 600),
	)
	c.Body = append([]any{w}, c.Body...)
	if _, cut := cardText(c); cut {
		where := "the web console"
		if it.WebURL != "" {
			where = "the web console: " + it.WebURL
		}
		c.Body = append(c.Body, plain(run(fmt.Sprintf("#%d does not fit whole on a Teams card, and it cannot be undone, so it is not approved here. Read it whole and approve it in %s.", it.ID, where), 600)))
		c.Actions = append(c.Actions, execute{Type: "Action.Execute", Title: "Cancel", Verb: verbRefresh, Data: map[string]string{"item": idOf(it)}})
		return c
	}
	d := map[string]string{"item": idOf(it)}
	if b := chat.EditBasis(it); b != "" {
		d["basis"] = b
	}
	c.Actions = append([]any{
		execute{Type: "Action.Execute", Title: label(chat.ConfirmButton(it), 60), Verb: verbConfirm, Style: styleDestructive, Data: d},
		execute{Type: "Action.Execute", Title: "Cancel", Verb: verbRefresh, Data: map[string]string{"item": idOf(it)}},
	}, c.Actions...)
	seal(c)
	return c
}

// reasonCard asks for a rejection's reason on the card.
func reasonCard(it bot.Item, problem string) *card {
	verb := "Reject"
	if it.Kind == bot.KindQuestion {
		verb = "Decline"
	}
	c := newCard()
	if problem != "" {
		w := words(escapeMarkdown(problem))
		w.Color = colorAttention
		c.Body = append(c.Body, w)
	}
	c.Body = append(c.Body,
		words(fmt.Sprintf("%s #%d", verb, it.ID)),
		plain(textRun{Type: "TextRun", Text: clean(itemTitle(it), maxTitle), Weight: "Bolder"}),
		inputText{Type: "Input.Text", ID: inputReason, Label: "Why? This is recorded with the decision.", IsMultiline: true, MaxLength: maxReason, IsRequired: it.Kind != bot.KindQuestion, ErrorMsg: "Give a reason: it is recorded with the decision."},
	)
	c.Actions = []any{
		execute{Type: "Action.Execute", Title: verb, Verb: verbRejectSubmit, Style: styleDestructive, Data: map[string]string{"item": idOf(it)}, AssociatedInputs: "auto"},
		execute{Type: "Action.Execute", Title: "Cancel", Verb: verbRefresh, Data: map[string]string{"item": idOf(it)}, AssociatedInputs: "none"},
	}
	return c
}

// editCard is the Edit & approve form on the card: one input per flat
// argument (or one JSON input, or the proposed value), prefilled with
// exactly what is up for approval, and an optional note. values, when
// set, are what the person typed (the form shown again with an error).
func editCard(it bot.Item, lay chat.EditLayout, values map[string]string, problem string) *card {
	c := newCard()
	if problem != "" {
		w := words(escapeMarkdown(problem))
		w.Color, w.Weight = colorAttention, "Bolder"
		c.Body = append(c.Body, w)
	}
	c.Body = append(c.Body,
		words(fmt.Sprintf("Edit #%d", it.ID)),
		plain(textRun{Type: "TextRun", Text: clean(itemTitle(it), maxTitle), Weight: "Bolder"}),
		words("Change what you need and approve: you are recorded as approving the edited version, which is checked like a new request. The proposed version is kept."),
	)
	for i, in := range lay.Inputs {
		v := in.Value
		if got, ok := values[inputEdit+strconv.Itoa(i)]; ok {
			v = got
		}
		c.Body = append(c.Body, inputText{Type: "Input.Text", ID: inputEdit + strconv.Itoa(i), Label: label(in.Label, 200), Value: v, IsMultiline: in.Multiline, MaxLength: maxEditText})
	}
	c.Body = append(c.Body, inputText{Type: "Input.Text", ID: inputNote, Label: "Note (optional): why the change?", Value: values[inputNote], IsMultiline: true, MaxLength: maxReason})
	c.Actions = []any{
		execute{Type: "Action.Execute", Title: "Approve edited", Verb: verbEditSubmit, Style: stylePositive, Data: map[string]string{"item": idOf(it), "basis": lay.Basis}, AssociatedInputs: "auto"},
		execute{Type: "Action.Execute", Title: "Cancel", Verb: verbRefresh, Data: map[string]string{"item": idOf(it)}, AssociatedInputs: "none"},
	}
	return c
}

// escapeMarkdown makes Countersign's own sentences, which may quote an
// item's words (a refusal naming a principal), inert in a TextBlock:
// Markdown's punctuation is backslash-escaped and invisible characters
// dropped.
func escapeMarkdown(s string) string {
	s = bot.OneLine(s, 1500)
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_{}[]()<>#+-.!|~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// capitalize upper-cases the first letter of a sentence.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[n:]
}
