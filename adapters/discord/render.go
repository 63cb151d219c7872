package discord

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
)

// Custom ids of the components Countersign puts on its messages. Every id
// is "cs:<action>:<item id>" (":<n>" for an answer, ":<version>" for an
// Approve and an edit), at most maxCustomID characters: an item id has at
// most 20 digits, a version 64.
const (
	actApprove = "approve" // Approve button
	actReject  = "reject"  // Reject button: opens the reason modal
	actReason  = "reason"  // the reason modal's submit
	actDetails = "details" // Show details button of a sensitive item
	actAnswer  = "answer"  // one answer button of a question
	actSelect  = "select"  // the answer select menu of a question
	actEdit    = "edit"    // Edit & approve button: opens the edit modal
	actEdited  = "edited"  // the edit modal's submit; n is the form's basis
	// actConfirm is the second step of a dangerous approval: the button of
	// the private confirmation an Approve click opens; n is the basis.
	actConfirm = "confirm"

	// reasonInput is the custom id of the reason modal's text input.
	reasonInput = "reason"
	// maxReason is the longest reason the modal accepts.
	maxReason = 1000
	// noteInput is the custom id of the edit modal's optional note, and
	// editInput + i of its i-th edit input.
	noteInput = "note"
	editInput = "e"
	// A modal holds at most five rows (one text input each): up to four
	// arguments one input each, and the note; more arguments are edited
	// as one JSON input. A text input holds at most 4000 characters, and
	// its label at most 45.
	// https://discord.com/developers/docs/interactions/message-components#text-inputs
	maxEditInputs = 4
	maxEditText   = 4000
	maxInputLabel = 45
)

func customID(action string, id uint64, extra ...int) string {
	s := "cs:" + action + ":" + strconv.FormatUint(id, 10)
	for _, n := range extra {
		s += ":" + strconv.Itoa(n)
	}
	return s
}

// versionedID is the custom id of an Approve button or an edit modal that
// names the version it shows (chat.EditBasis, 64 hex digits): at most
// 3+8+20+64 characters, within maxCustomID.
func versionedID(action string, id uint64, version string) string {
	s := "cs:" + action + ":" + strconv.FormatUint(id, 10)
	if version != "" {
		s += ":" + version
	}
	return s
}

// parseCustomID splits a custom id made by customID or versionedID. n is
// -1 when absent; version is an Approve's or an edit's version as it was
// carried (64 hex digits; an older card's 32-bit number as 8 hex digits,
// which the decision layer refuses with what to do instead).
func parseCustomID(s string) (action string, id uint64, n int, version string, ok bool) {
	if len(s) > maxCustomID {
		return "", 0, 0, "", false
	}
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 || parts[0] != "cs" {
		return "", 0, 0, "", false
	}
	id, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || id == 0 {
		return "", 0, 0, "", false
	}
	n = -1
	switch {
	case len(parts) == 4 && (parts[1] == actApprove || parts[1] == actConfirm || parts[1] == actEdited) && isHex64(parts[3]):
		version = parts[3]
	case len(parts) == 4:
		n, err = strconv.Atoi(parts[3])
		if err != nil || n < 0 {
			return "", 0, 0, "", false
		}
		if parts[1] == actApprove || parts[1] == actEdited {
			version, n = fmt.Sprintf("%08x", n), -1 // an older card's 32-bit basis
		}
	}
	switch parts[1] {
	case actApprove, actConfirm:
		// optional: the version the message showed (chat.EditBasis)
	case actEdited:
		if version == "" {
			return "", 0, 0, "", false
		}
	case actReject, actReason, actDetails, actSelect, actEdit, actRevoke:
		if n != -1 {
			return "", 0, 0, "", false
		}
	case actAnswer, actGrant:
		if n == -1 {
			return "", 0, 0, "", false
		}
	default:
		return "", 0, 0, "", false
	}
	return parts[1], id, n, version, true
}

// isHex64 reports whether s is 64 lower-case hex digits (a SHA-256).
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// Embed colours: amber while pending, green when approved, red when
// refused, grey when closed without a decision.
const (
	colorPending  = 0xF1C40F
	colorApproved = 0x2ECC71
	colorRefused  = 0xE74C3C
	colorClosed   = 0x95A5A6
)

// outcome is how a final status is shown.
type outcome struct {
	icon, word string
	color      int
}

// outcomeOf is how a final status is shown: chat's one vocabulary for the
// icon and the word, and the embed colour for approving, refusing or
// closing without a decision.
func outcomeOf(status string) outcome {
	icon, word := chat.StatusWord(status)
	color := colorClosed
	switch {
	case chat.Approving(status):
		color = colorApproved
	case chat.Refusing(status):
		color = colorRefused
	}
	return outcome{icon, clip(word, 64, inline), color}
}

// kindNoun names an item kind in running text (chat.KindNoun).
func kindNoun(k bot.ItemKind) string { return chat.KindNoun(k) }

// sensitiveNoun names a sensitive item without saying what it is about.
func sensitiveNoun(k bot.ItemKind) string { return chat.SensitiveNoun(k) }

// waitsFor says what a pending item waits for.
func waitsFor(k bot.ItemKind) string {
	switch k {
	case bot.KindQuestion:
		return "awaits an answer"
	case bot.KindConsent:
		return "awaits a decision"
	}
	return "awaits approval"
}

func capitalize(s string) string {
	for i, r := range s {
		if i == 0 {
			return strings.ToUpper(string(r)) + s[len(string(r)):]
		}
	}
	return s
}

func article(noun string) string {
	if strings.IndexAny(noun[:1], "aeiou") == 0 {
		return "an " + noun
	}
	return "a " + noun
}

// fmtTime shows a time unambiguously, in UTC.
func fmtTime(t time.Time) string { return chat.Stamp(t) }

// message is one rendered item: what a post, an edit and an interaction
// update all send.
type message struct {
	Content    string                       `json:"content"`
	Embeds     []*discordgo.MessageEmbed    `json:"embeds"`
	Components []discordgo.MessageComponent `json:"components"`
}

// noMentions is set on every message Countersign sends: nothing in it may
// ping anyone. The empty (not nil) Parse list is what tells Discord so.
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// render shows an item in a channel: an embed with what is asked and, while
// it is pending, the buttons to decide it. A sensitive item shows only
// that it awaits a decision; its detail goes privately to approvers who
// click Show details (renderDetails).
func render(it bot.Item) message {
	m := message{Content: headline(it), Components: []discordgo.MessageComponent{}}
	e := &discordgo.MessageEmbed{
		Type:      discordgo.EmbedTypeRich,
		Color:     colorPending,
		Footer:    &discordgo.MessageEmbedFooter{Text: fmt.Sprintf("Countersign #%d · %s", it.ID, kindNoun(it.Kind))},
		Timestamp: it.CreatedAt.UTC().Format(time.RFC3339),
	}
	if it.CreatedAt.IsZero() {
		e.Timestamp = ""
	}
	if !it.Pending() {
		e.Color = outcomeOf(it.Status).color
	}
	var desc []string
	var fields []field
	if it.Sensitive {
		e.Title = capitalize(article(sensitiveNoun(it.Kind))) + " " + waitsFor(it.Kind)
		desc = append(desc, "The details are withheld from this channel. Approvers can click **Show details** to see them privately.")
	} else {
		e.Title = clip(it.Title, maxEmbedTitle, inline)
		if e.Title == "" {
			e.Title = capitalize(kindNoun(it.Kind))
		}
		// The card's lines for the person clicking, in chat's order and
		// words: the danger, a reopening, what approving does.
		if it.Danger != nil && it.Pending() {
			desc = append(desc, "**"+clip(it.Danger.Warning, 600, inline)+"**")
		}
		if line := chat.ReopenedLine(it); line != "" && it.Pending() {
			desc = append(desc, "🔁 **"+clip(line, 600, inline)+"**")
		}
		if label := chat.EffectLabel(it); label != "" {
			desc = append(desc, "**"+label+"** "+clip(it.Effect, 1200, inline))
		}
		if it.Requester != "" {
			// The name: the principal's id is detail (Details).
			desc = append(desc, "**Requested by** "+clip(chat.NameOf(it.Requester), 300, inline))
		}
		if it.Space.UserID != "" && !hasField(it, "Space") {
			desc = append(desc, "**Memory space** "+clip(it.Space.Label(), 400, inline))
		}
		fields = itemFields(it)
	}
	if it.Sensitive && it.Danger != nil && it.Pending() {
		desc = append(desc, "**⚠ Approving this cannot be undone.**")
	}
	if it.Pending() && !it.ExpiresAt.IsZero() {
		desc = append(desc, "**Expires** "+fmtTime(it.ExpiresAt))
	}
	if it.WebURL != "" {
		// Built by the core from web.public_url, never from item text.
		desc = append(desc, "[Open in browser]("+it.WebURL+")")
	}
	e.Description = strings.Join(desc, "\n")
	e.Fields = layoutFields(fields, statusFields(it), maxEmbedTotal-units16(e.Title)-units16(e.Description)-units16(e.Footer.Text))
	m.Embeds = []*discordgo.MessageEmbed{e}
	if it.Pending() {
		m.Components = components(it)
	}
	return m
}

// renderDetails shows a sensitive item in full, for an ephemeral reply to
// one approver. It has no buttons.
func renderDetails(it bot.Item) message {
	it.Sensitive = false
	m := render(it)
	m.Content = fmt.Sprintf("🔒 Details of Countersign #%d, shown only to you. Decide on the message in the channel.", it.ID)
	m.Components = []discordgo.MessageComponent{}
	return m
}

// hasField reports whether the item's source shows a field with label.
func hasField(it bot.Item, label string) bool {
	for _, f := range it.Fields {
		if strings.EqualFold(f.Label, label) {
			return true
		}
	}
	return false
}

// headline is a message's content: one line with no untrusted text except
// the deciders' names, which notifications show.
func headline(it bot.Item) string {
	noun := kindNoun(it.Kind)
	if it.Sensitive {
		noun = sensitiveNoun(it.Kind)
	}
	if it.Pending() {
		return fmt.Sprintf("**Countersign #%d**: %s %s.", it.ID, article(noun), waitsFor(it.Kind))
	}
	o := outcomeOf(it.Status)
	s := fmt.Sprintf("**Countersign #%d**: %s %s %s", it.ID, o.icon, noun, strings.ToLower(o.word))
	if len(it.DecidedBy) > 0 {
		s += " by " + deciders(it, 1500)
	}
	return s + "."
}

// deciders lists who decided, escaped, within limit characters.
func deciders(it bot.Item, limit int) string {
	return clip(strings.Join(it.DecidedBy, ", "), limit, inline)
}

// joinLines joins lines already escaped, one a line, within limit: the
// lines that do not fit are dropped, and the last line says so with
// truncMarker.
func joinLines(lines []string, limit int) string {
	all := strings.Join(lines, "\n")
	if units16(all) <= limit {
		return all
	}
	var out []string
	used := units16(truncMarker)
	for _, l := range lines {
		n := units16(l) + 1
		if used+n > limit {
			break
		}
		out = append(out, l)
		used += n
	}
	return strings.Join(append(out, truncMarker), "\n")
}

// notShown names the field that sums up the fields that did not fit.
const notShown = "Not shown"

// field is one embed field before layout.
type field struct{ name, value string }

// itemFields are the card's facts and arguments, the item's own labelled
// lines (untrusted), a question's options, and why a person is asked.
func itemFields(it bot.Item) []field {
	var fs []field
	if len(it.Facts) > 0 {
		lines := make([]string, len(it.Facts))
		for i, f := range it.Facts {
			icon := "✅"
			if f.Verdict != "SAFE" {
				icon = "⛔"
			}
			lines[i] = icon + " " + clip(chat.FactLine(f), 400, inline)
		}
		fs = append(fs, field{strings.TrimSuffix(chat.FactsHeading(it), ":"), joinLines(lines, maxFieldValue)})
	}
	if len(it.Args) > 0 {
		lines := make([]string, len(it.Args))
		for i, a := range it.Args {
			lines[i] = "**" + clip(a.Label, 60, inline) + "**: " + clip(a.Value, 300, inline)
		}
		fs = append(fs, field{strings.TrimSuffix(chat.ArgsLabel, ":"), joinLines(lines, maxFieldValue)})
	}
	for _, f := range it.Fields {
		fs = append(fs, field{clip(f.Label, maxFieldName, inline), clip(f.Value, maxFieldValue, block)})
	}
	if it.Kind == bot.KindQuestion && len(it.Options) > 0 {
		name := "Options"
		if it.Multi {
			name = "Options (choose one or more)"
		}
		fs = append(fs, field{name, optionList(it.Options)})
	}
	if it.Asked != "" {
		fs = append(fs, field{strings.TrimSuffix(chat.AskedLabel, ":"), clip(it.Asked, maxFieldValue, inline)})
	}
	return fs
}

// optionList numbers a question's options, one a line, within one field.
func optionList(opts []string) string {
	const reserve = 24 // room for "… and N more"
	var lines []string
	used := 0
	for i, o := range opts {
		line := fmt.Sprintf("%d\\. %s", i+1, clip(o, 200, inline))
		if used+units16(line)+1 > maxFieldValue-reserve {
			lines = append(lines, fmt.Sprintf("… and %d more", len(opts)-i))
			break
		}
		lines = append(lines, line)
		used += units16(line) + 1
	}
	return strings.Join(lines, "\n")
}

// statusFields are the tally and, once decided, the outcome, who decided,
// when and why. They always fit: layoutFields places them first.
func statusFields(it bot.Item) []field {
	var fs []field
	if it.Tally != "" {
		fs = append(fs, field{"Approvals", clip(it.Tally, maxFieldValue, inline)})
	}
	if ch := chat.WithChanges(it); ch != "" {
		if it.Sensitive {
			ch = "Edited by an approver; the changes are withheld from this channel."
		}
		fs = append(fs, field{"Changes", "✏️ " + clip(capitalize(ch), maxFieldValue-4, inline)})
	}
	if it.Pending() {
		return fs
	}
	o := outcomeOf(it.Status)
	fs = append(fs, field{"Outcome", o.icon + " " + o.word})
	if len(it.DecidedBy) > 0 {
		fs = append(fs, field{"Decided by", clip(chat.Deciders(it, 1500), maxFieldValue, inline)})
	}
	if !it.DecidedAt.IsZero() {
		fs = append(fs, field{"Decided at", fmtTime(it.DecidedAt)})
	}
	if it.Reason != "" {
		if it.Sensitive {
			fs = append(fs, field{"Reason", "Recorded; withheld from this channel."})
		} else {
			fs = append(fs, field{"Reason", clip(it.Reason, maxFieldValue, block)})
		}
	}
	return fs
}

// layoutFields places the status fields after as many item fields as fit
// in Discord's per-embed limits (25 fields, budget characters in all); the
// rest are summarised in one field, never dropped silently.
func layoutFields(items, status []field, budget int) []*discordgo.MessageEmbedField {
	size := func(f field) int { return units16(f.name) + units16(f.value) }
	for _, f := range status {
		budget -= size(f)
	}
	const more = notShown
	moreSize := units16(more) + 80
	room := maxFields - len(status)
	var out []*discordgo.MessageEmbedField
	for i, f := range items {
		if f.name == "" {
			f.name = "(no label)"
		}
		if f.value == "" {
			f.value = "(empty)"
		}
		left := len(items) - i
		fits := size(f) <= budget && len(out) < room
		if fits && left > 1 {
			fits = size(f)+moreSize <= budget && len(out) < room-1
		}
		if !fits {
			out = append(out, &discordgo.MessageEmbedField{Name: more, Value: fmt.Sprintf("%d more field(s) did not fit in one Discord message.", left)})
			break
		}
		out = append(out, &discordgo.MessageEmbedField{Name: f.name, Value: f.value})
		budget -= size(f)
	}
	for _, f := range status {
		out = append(out, &discordgo.MessageEmbedField{Name: f.name, Value: f.value})
	}
	return out
}

// components are a pending item's buttons: Approve and Reject; for a
// question one button per option (a select menu when there are more than
// a row holds, or several may be chosen) and Decline; Show details on a
// sensitive item.
func components(it bot.Item) []discordgo.MessageComponent {
	var rows []discordgo.MessageComponent
	decline := discordgo.Button{Label: "Decline", Style: discordgo.SecondaryButton, CustomID: customID(actReject, it.ID)}
	switch {
	case it.Kind == bot.KindQuestion && len(it.Options) > 0 && !it.Multi && len(it.Options) <= maxButtonsPerRow:
		var bs []discordgo.MessageComponent
		for i, o := range it.Options {
			bs = append(bs, discordgo.Button{Label: buttonLabel(o), Style: discordgo.PrimaryButton, CustomID: customID(actAnswer, it.ID, i)})
		}
		if len(bs) < maxButtonsPerRow {
			rows = append(rows, discordgo.ActionsRow{Components: append(bs, decline)})
		} else {
			rows = append(rows, discordgo.ActionsRow{Components: bs}, discordgo.ActionsRow{Components: []discordgo.MessageComponent{decline}})
		}
	case it.Kind == bot.KindQuestion && len(it.Options) > 0:
		n := min(len(it.Options), maxSelectOptions)
		opts := make([]discordgo.SelectMenuOption, n)
		for i := range n {
			opts[i] = discordgo.SelectMenuOption{Label: selectLabel(it.Options[i]), Value: strconv.Itoa(i)}
		}
		one := 1
		maxV := 1
		placeholder := "Choose an answer"
		if it.Multi {
			maxV = n
			placeholder = "Choose one or more answers"
		}
		rows = append(rows,
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.SelectMenu{
				MenuType: discordgo.StringSelectMenu, CustomID: customID(actSelect, it.ID),
				Placeholder: placeholder, MinValues: &one, MaxValues: maxV, Options: opts,
			}}},
			discordgo.ActionsRow{Components: []discordgo.MessageComponent{decline}})
	case it.Kind == bot.KindQuestion:
		// A free-text question is answered with /countersign; it can be
		// declined here.
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{decline}})
	default:
		// An editable item's Approve carries the version it shows
		// (chat.EditBasis), so a click on a message not yet updated after
		// another approver's edit is refused, not counted for the edit.
		approveID := approveCustomID(actApprove, it)
		// The dangerous action looks dangerous: Approve red (it opens a
		// confirmation, the second step), Reject not.
		approveStyle, rejectStyle := discordgo.SuccessButton, discordgo.DangerButton
		if it.Danger != nil {
			approveStyle, rejectStyle = discordgo.DangerButton, discordgo.SecondaryButton
		}
		bs := []discordgo.MessageComponent{discordgo.Button{Label: "Approve", Style: approveStyle, CustomID: approveID}}
		if it.Editable != nil {
			// Only what can be edited gets the button (an action's
			// arguments, a memory proposal's value).
			bs = append(bs, discordgo.Button{Label: "Edit & approve", Style: discordgo.PrimaryButton, CustomID: customID(actEdit, it.ID)})
		}
		bs = append(bs, discordgo.Button{Label: "Reject", Style: rejectStyle, CustomID: customID(actReject, it.ID)})
		if len(it.Details) > 0 && !it.Sensitive {
			bs = append(bs, discordgo.Button{Label: "Details", Style: discordgo.SecondaryButton, CustomID: customID(actDetails, it.ID)})
		}
		rows = append(rows, discordgo.ActionsRow{Components: bs})
		rows = append(rows, grantRow(it)...)
	}
	if it.Sensitive {
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Show details", Style: discordgo.SecondaryButton, CustomID: customID(actDetails, it.ID)},
		}})
	}
	return rows
}

// approveCustomID is the custom id of an Approve (or a confirmation)
// button: the item and the version it shows (chat.EditBasis), so a click
// on a message not yet updated after another approver's edit or a change
// of the facts is refused, not counted.
func approveCustomID(act string, it bot.Item) string {
	return versionedID(act, it.ID, chat.EditBasis(it))
}

// confirmStep is the second step of a dangerous approval: a private
// message only the clicker sees, with the whole card as it is now, what
// runs and that it cannot be undone, and the button that approves. A card
// too long to show whole gets no button: it is approved in the console.
func confirmStep(it bot.Item) *discordgo.InteractionResponse {
	m := render(it)
	m.Content = "⚠ **" + clip(chat.ConfirmTitle(it), 200, inline) + ".** " + clip(chat.ConfirmText(it), 1500, inline)
	if _, cut := cardText(m.Content, m.Embeds, nil); cut {
		where := "the web console"
		if it.WebURL != "" {
			where = "the web console: " + it.WebURL
		}
		return private(clip(fmt.Sprintf("#%d does not fit whole in a Discord message, and it cannot be undone, so it is not approved here. Read it whole and approve it in %s.", it.ID, where), maxContent, inline))
	}
	r := privateMessage(m)
	r.Data.Components = []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.Button{Label: clip(chat.ConfirmButton(it), maxButtonLabel, label), Style: discordgo.DangerButton, CustomID: approveCustomID(actConfirm, it)},
	}}}
	return r
}

// cardText is the text a message shows, in order, one a line: its
// content, each embed's title, description, fields and footer, and its
// button labels. Its SHA-256 is what an approver saw (bot.Seen): Discord
// sends the message back with each click, so a click records it as
// Discord showed it. truncated reports that something was cut to fit
// (every cut ends with truncMarker; fields that did not fit are summed
// up under "Not shown").
func cardText(content string, embeds []*discordgo.MessageEmbed, components []discordgo.MessageComponent) (text string, truncated bool) {
	lines := []string{content}
	for _, e := range embeds {
		if e == nil {
			continue
		}
		lines = append(lines, e.Title, e.Description)
		for _, f := range e.Fields {
			if f == nil {
				continue
			}
			lines = append(lines, f.Name, f.Value)
			if f.Name == notShown {
				truncated = true
			}
		}
		if e.Footer != nil {
			lines = append(lines, e.Footer.Text)
		}
	}
	for _, c := range components {
		row, ok := c.(discordgo.ActionsRow)
		if p, isPtr := c.(*discordgo.ActionsRow); isPtr && p != nil {
			row, ok = *p, true
		}
		if !ok {
			continue
		}
		for _, b := range row.Components {
			switch b := b.(type) {
			case discordgo.Button:
				lines = append(lines, b.Label)
			case *discordgo.Button:
				lines = append(lines, b.Label)
			}
		}
	}
	for _, l := range lines {
		if strings.Contains(l, truncMarker) {
			truncated = true
		}
	}
	return strings.Join(lines, "\n"), truncated
}

// seenOf is what a click's message showed (cardText); nil when the click
// came without one.
func seenOf(m *discordgo.Message) *bot.Seen {
	if m == nil {
		return nil
	}
	text, cut := cardText(m.Content, m.Embeds, m.Components)
	return bot.SeenText(bot.SurfaceDiscord, text, cut)
}

func buttonLabel(s string) string {
	l := clip(s, maxButtonLabel, label)
	if strings.TrimSpace(l) == "" {
		return "(blank)"
	}
	return l
}

func selectLabel(s string) string {
	l := clip(s, maxSelectLabel, label)
	if strings.TrimSpace(l) == "" {
		return "(blank)"
	}
	return l
}

// reasonModal asks a rejecter why (required), or a person declining a
// question why (optional). It must be the first response to the click (a
// modal cannot follow a deferral).
func reasonModal(it bot.Item) *discordgo.InteractionResponse {
	title, question, required := fmt.Sprintf("Reject #%d", it.ID), "Why reject it?", true
	if it.Kind == bot.KindQuestion {
		title, question, required = fmt.Sprintf("Decline #%d", it.ID), "Why decline? (optional)", false
	}
	in := discordgo.TextInput{
		CustomID: reasonInput, Label: question, Style: discordgo.TextInputParagraph,
		Placeholder: "Recorded with the decision and shown with the outcome.",
		Required:    required, MaxLength: maxReason,
	}
	if required {
		in.MinLength = 1
	}
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{
			CustomID:   customID(actReason, it.ID),
			Title:      clip(title, maxModalTitle, label),
			Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{in}}},
		},
	}
}

// editModal is the "Edit & approve" form: one input per argument (or one
// JSON input, or the proposed value) prefilled exactly with what is up for
// approval, and an optional note. The modal's custom id carries the item
// and the form's basis (chat.EditBasis), so a form opened before another
// approver's edit is refused, not applied. It must be the first response
// to the click.
func editModal(it bot.Item, lay chat.EditLayout) *discordgo.InteractionResponse {
	var rows []discordgo.MessageComponent
	for i, in := range lay.Inputs {
		style := discordgo.TextInputShort
		if in.Multiline {
			style = discordgo.TextInputParagraph
		}
		l := clip(in.Label, maxInputLabel, label)
		if strings.TrimSpace(l) == "" {
			l = "(unnamed)"
		}
		// The prefill is the exact current text: an input left alone must
		// not change the arguments. A text input shows it literally.
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{
			CustomID: editInput + strconv.Itoa(i), Label: l, Style: style, Value: in.Value, MaxLength: maxEditText,
		}}})
	}
	rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{
		CustomID: noteInput, Label: "Note (optional)", Style: discordgo.TextInputParagraph,
		Placeholder: "Why the change? Recorded with the decision.", MaxLength: maxReason,
	}}})
	return &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{
			CustomID:   versionedID(actEdited, it.ID, lay.Basis),
			Title:      clip(fmt.Sprintf("Edit & approve #%d", it.ID), maxModalTitle, label),
			Components: rows,
		},
	}
}
