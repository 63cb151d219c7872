package slack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	slackgo "github.com/slack-go/slack"
)

// Slack's documented limits. Everything sent is cut to these before it
// leaves, so Slack never rejects a message for its length (invalid_blocks)
// and nothing is silently dropped.
const (
	// Section block text: at most 3000 characters; a section field at most
	// 2000, and at most 10 fields.
	// https://docs.slack.dev/reference/block-kit/blocks/section-block
	maxSectionText = 3000
	maxFieldText   = 2000
	maxFields      = 10
	// Header block text (plain_text): at most 150 characters.
	// https://docs.slack.dev/reference/block-kit/blocks/header-block
	maxHeaderText = 150
	// Button text (plain_text): at most 75 characters; value at most 2000.
	// https://docs.slack.dev/reference/block-kit/block-elements/button-element
	maxButtonText  = 75
	maxButtonValue = 2000
	// Confirmation dialog: title 100, text 300, button labels 30 characters.
	// https://docs.slack.dev/reference/block-kit/composition-objects/confirmation-dialog-object
	maxConfirmTitle  = 100
	maxConfirmText   = 300
	maxConfirmButton = 30
	// Option object text: at most 75 characters; a checkbox group holds at
	// most 10 options.
	// https://docs.slack.dev/reference/block-kit/composition-objects/option-object
	// https://docs.slack.dev/reference/block-kit/block-elements/checkboxes-element
	maxOptionText = 75
	maxCheckboxes = 10
	// An actions block holds at most 25 elements; a context block at most 10.
	// https://docs.slack.dev/reference/block-kit/blocks/actions-block
	// https://docs.slack.dev/reference/block-kit/blocks/context-block
	maxActionElements = 25
	// A message holds at most 50 blocks.
	// https://docs.slack.dev/reference/block-kit/blocks
	maxBlocks = 50
	// Message text (the notification fallback): Slack truncates at 40000
	// characters and recommends at most 4000.
	// https://docs.slack.dev/reference/methods/chat.postMessage#truncating
	maxMessageText = 4000
	// Modal title, submit and close labels: at most 24 characters;
	// private_metadata at most 3000; an input label at most 2000.
	// https://docs.slack.dev/reference/views/modal-views (view object fields)
	maxModalTitle = 24
	// maxReason is the most characters of a rejection reason the modal
	// accepts (the plain-text input's max_length, itself at most 3000).
	// https://docs.slack.dev/reference/block-kit/block-elements/plain-text-input-element
	maxReason = 2000
	// maxEditText is the most characters an edit input holds (a
	// plain-text input's max_length is at most 3000), and maxEditInputs the
	// most arguments edited one input each before the form falls back to
	// one JSON input (a modal holds 100 blocks; ten inputs stay usable).
	maxEditText   = 3000
	maxEditInputs = 10
)

// truncMarker ends every text cut to a limit.
const truncMarker = "…(truncated)"

// Action and callback ids. They are fixed per action; the item id travels in
// the button's value and the actions block's block_id.
const (
	actionApprove  = "countersign.approve"
	actionReject   = "countersign.reject"
	actionAnswer   = "countersign.answer." // + option index
	actionChoices  = "countersign.choices" // a multi-choice question's checkboxes
	actionSubmit   = "countersign.submit"  // submits the checked choices
	callbackReject = "countersign.reject"  // the reason modal
	actionEdit     = "countersign.edit"    // Edit & approve: opens the edit modal
	callbackEdit   = "countersign.edit"    // the edit modal
	actionDetails  = "countersign.details" // Details: the item's folded detail, privately
	editBlock      = "edit_"               // + input index: an edit modal input block
	editAction     = "input"               // the plain-text input of an edit block
	noteBlock      = "note_block"          // the edit modal's optional note
	noteAction     = "note"                // the note's input
	blockPrefix    = "countersign:"        // + item id
	reasonBlock    = "reason_block"
	reasonAction   = "reason"
)

// escape makes untrusted text inert in Slack mrkdwn (and harmless in
// plain_text): &, < and > become entities, so no <!channel>, <@U…>, <#C…>
// or <url|label> can be formed; @channel, @here and @everyone typed plainly
// get a word joiner after the @; control characters other than newline and
// tab, and bidirectional overrides (which can make text read differently
// from what it is), are shown as U+FFFD.
func escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '\r':
			// "\r\n" becomes "\n"; a lone CR is dropped.
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case bot.Invisible(r):
			// Bidirectional controls and other invisible format
			// characters are dropped, as on every surface (bot.OneLine).
		case unicode.IsControl(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
	return neutraliseBroadcasts(b.String())
}

// wordJoiner is invisible and stops Slack reading "@channel" as a mention.
const wordJoiner = "\u2060"

var broadcasts = []string{"channel", "here", "everyone"}

// neutraliseBroadcasts inserts a word joiner after every @ that starts
// @channel, @here or @everyone, in any letter case.
func neutraliseBroadcasts(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] != '@' {
			continue
		}
		rest := s[i+1:]
		for _, w := range broadcasts {
			if len(rest) >= len(w) && strings.EqualFold(rest[:len(w)], w) {
				b.WriteString(wordJoiner)
				break
			}
		}
	}
	return b.String()
}

// truncate cuts escaped text to at most max characters (runes), ending with
// truncMarker when it cut. It never cuts inside an entity such as &amp;.
func truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	keep := max - utf8.RuneCountInString(truncMarker)
	if keep < 0 {
		keep = 0
	}
	cut := 0
	for i := range s {
		if keep == 0 {
			cut = i
			break
		}
		keep--
	}
	s = s[:cut]
	// An entity is at most 5 bytes ("&amp;"); drop a partial one.
	if amp := strings.LastIndexByte(s, '&'); amp >= 0 && len(s)-amp < 5 && !strings.Contains(s[amp:], ";") {
		s = s[:amp]
	}
	return strings.TrimRight(s, "\n") + truncMarker
}

// text is escape then truncate, for mrkdwn and message text, where Slack
// parses &, < and > as markup.
func text(s string, max int) string { return truncate(escape(s), max) }

// plainText makes untrusted text safe for a plain_text object (headers,
// button and option labels, confirmation dialogs, modal titles). Slack
// shows plain_text literally and parses no markup in it
// (https://docs.slack.dev/reference/block-kit/composition-objects/text-object:
// formatting markup applies "when type is mrkdwn"), so it is not
// HTML-escaped: an escaped "->" would show as "-&gt;". Control characters,
// bidirectional and other invisible format characters are replaced or
// dropped as bot.OneLine does, line breaks become spaces, and the text is
// cut to max characters. As a second guard, should a client ever parse it,
// a word joiner (invisible) follows every "<" that would open a Slack
// reference ("<!", "<@", "<#") and every "@" of a broadcast word.
func plainText(s string, max int) string {
	s = bot.OneLine(s, 0)
	for _, open := range []string{"<!", "<@", "<#"} {
		s = strings.ReplaceAll(s, open, "<"+wordJoiner+open[1:])
	}
	s = neutraliseBroadcasts(s)
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	keep := max - utf8.RuneCountInString(truncMarker)
	if keep < 0 {
		keep = 0
	}
	return string(r[:keep]) + truncMarker
}

// codeSafe keeps escaped text from closing the code span or block it is
// shown in: no two backticks stay adjacent, and a backtick at either end is
// padded, using zero-width spaces.
func codeSafe(s string) string {
	for strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`\u200b`")
	}
	if strings.HasPrefix(s, "`") {
		s = "\u200b" + s
	}
	if strings.HasSuffix(s, "`") {
		s += "\u200b"
	}
	return s
}

func mrkdwn(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, s, false, true)
}

func plain(s string) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, s, false, false)
}

// slackDate renders t in each reader's own time zone, with a UTC fallback.
// https://docs.slack.dev/messaging/formatting-message-text#date-formatting
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), utcTime(t))
}

func utcTime(t time.Time) string { return chat.Stamp(t) }

// shortValue is the longest field value shown inline in a two-column field.
const shortValue = 60

// fieldBlocks renders an item's fields: short single-line values as
// two-column section fields in inline code, anything longer as its own
// section in a code block. Code keeps the value verbatim (no bold, italics
// or strike-through made from its characters) and escape keeps it inert.
func fieldBlocks(fields []bot.Field) []slackgo.Block {
	var out []slackgo.Block
	var row []*slackgo.TextBlockObject
	flush := func() {
		if len(row) > 0 {
			out = append(out, slackgo.NewSectionBlock(nil, row, nil))
			row = nil
		}
	}
	for _, f := range fields {
		label := "*" + text(f.Label, 100) + "*"
		v := escape(f.Value)
		switch {
		case strings.TrimSpace(f.Value) == "":
			row = append(row, mrkdwn(label+"\n—"))
		case utf8.RuneCountInString(v) <= shortValue && !strings.ContainsAny(v, "\n`"):
			row = append(row, mrkdwn(label+"\n`"+v+"`"))
		default:
			flush()
			room := maxSectionText - utf8.RuneCountInString(label) - len("\n``````") - 2
			out = append(out, slackgo.NewSectionBlock(mrkdwn(label+"\n```"+truncate(codeSafe(v), room)+"```"), nil, nil))
			continue
		}
		if len(row) == maxFields {
			flush()
		}
	}
	flush()
	return out
}

// outcome is how a final status is shown: chat's one vocabulary.
func outcome(status string) (icon, word string) { return chat.StatusWord(status) }

// itemText is the message's notification text (shown in notifications and
// by clients that cannot render blocks).
func itemText(it bot.Item) string {
	title := itemTitle(it)
	if it.Pending() {
		return text("Approval needed: "+title, maxMessageText)
	}
	_, word := outcome(it.Status)
	return text(word+": "+title, maxMessageText)
}

func itemTitle(it bot.Item) string {
	if strings.TrimSpace(it.Title) == "" {
		return "Item #" + strconv.FormatUint(it.ID, 10)
	}
	return it.Title
}

// itemBlocks renders an item as Block Kit, as chat's vocabulary lays a
// card out for the person clicking: a dangerous item's warning first, the
// first line (the agent's summary), what approving does, the facts it
// rests on, the arguments, the item's other fields, why a person is
// asked; then who asked and when, the buttons or the outcome. The
// developer detail (bot.Item.Details) is not on the card: the Details
// button shows it privately. A sensitive item shows none of it in a
// channel; detail renders it anyway (the private copy sent to approvers)
// and never carries buttons.
func itemBlocks(it bot.Item, detail bool) []slackgo.Block {
	withheld := it.Sensitive && !detail
	title := itemTitle(it)
	if withheld {
		title = withheldTitle(it)
	}
	blocks := []slackgo.Block{slackgo.NewHeaderBlock(plain(plainText(title, maxHeaderText)))}
	var tail []slackgo.Block
	tail = append(tail, contextBlock(it))
	if it.Tally != "" {
		tail = append(tail, slackgo.NewContextBlock("", mrkdwn("🗳 "+text(it.Tally, 2000))))
	}
	if ch := chat.WithChanges(it); ch != "" {
		if withheld {
			ch = "Edited by an approver; the changes are withheld from this channel."
		}
		tail = append(tail, slackgo.NewContextBlock("", mrkdwn("✏️ "+text(capitalize(ch), 2000))))
	}
	switch {
	case detail:
		tail = append(tail, slackgo.NewContextBlock("", mrkdwn("Only you can see this detail. Decide with the buttons on the message in the channel.")))
	case it.Pending():
		tail = append(tail, actionBlocks(it)...)
	default:
		tail = append(tail, outcomeBlock(it))
	}
	if withheld {
		if it.Danger != nil {
			blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn("*⚠ Approving this cannot be undone.*"), nil, nil))
		}
		blocks = append(blocks, slackgo.NewSectionBlock(mrkdwn("_The detail of this sensitive item was sent privately to the approvers._"), nil, nil))
		return append(blocks, tail...)
	}
	body := cardBlocks(it)
	if room := maxBlocks - len(blocks) - len(tail) - 1; len(body) > room {
		hidden := len(body) - room
		body = append(body[:room], slackgo.NewContextBlock("", mrkdwn(fmt.Sprintf("…(truncated: %d more blocks of detail are not shown)", hidden))))
	}
	blocks = append(blocks, body...)
	return append(blocks, tail...)
}

// withheldTitle is the header of a sensitive item in a channel: what kind
// of item it is and whether it awaits a decision, nothing of what it is
// about.
func withheldTitle(it bot.Item) string {
	noun := chat.SensitiveNoun(it.Kind)
	if it.Pending() {
		return capitalize(article(noun)) + " awaits a decision"
	}
	_, word := outcome(it.Status)
	return capitalize(noun) + ": " + strings.ToLower(word)
}

func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// cardBlocks are the card's lines for the person clicking, in chat's
// order and words.
func cardBlocks(it bot.Item) []slackgo.Block {
	var out []slackgo.Block
	section := func(s string) {
		out = append(out, slackgo.NewSectionBlock(mrkdwn(truncate(s, maxSectionText)), nil, nil))
	}
	if it.Danger != nil && it.Pending() {
		section("*" + escape(bot.OneLine(it.Danger.Warning, 400)) + "*")
	}
	if line := chat.ReopenedLine(it); line != "" && it.Pending() {
		section("🔁 *" + escape(line) + "*")
	}
	if label := chat.EffectLabel(it); label != "" {
		section("*" + escape(label) + "* " + escape(bot.OneLine(it.Effect, 1000)))
	}
	if len(it.Facts) > 0 {
		var b strings.Builder
		b.WriteString("*" + escape(chat.FactsHeading(it)) + "*")
		for _, f := range it.Facts {
			icon := "✅"
			if f.Verdict != "SAFE" {
				icon = "⛔"
			}
			b.WriteString("\n" + icon + " " + escape(chat.FactLine(f)))
		}
		section(b.String())
	}
	if len(it.Args) > 0 {
		section("*" + escape(chat.ArgsLabel) + "*")
		out = append(out, fieldBlocks(it.Args)...)
	}
	out = append(out, fieldBlocks(it.Fields)...)
	if it.Asked != "" {
		out = append(out, slackgo.NewContextBlock("", mrkdwn("*"+escape(chat.AskedLabel)+"* "+text(bot.OneLine(it.Asked, 600), 2000))))
	}
	return out
}

func contextBlock(it bot.Item) *slackgo.ContextBlock {
	var els []slackgo.MixedElement
	if it.Requester != "" {
		// The name: the principal's id is detail (the Details button).
		els = append(els, mrkdwn("Requested by *"+text(chat.NameOf(it.Requester), 200)+"*"))
	}
	if !it.CreatedAt.IsZero() {
		els = append(els, mrkdwn("Asked "+slackDate(it.CreatedAt)))
	}
	if it.Pending() && !it.ExpiresAt.IsZero() {
		els = append(els, mrkdwn("Expires "+slackDate(it.ExpiresAt)))
	}
	els = append(els, mrkdwn(fmt.Sprintf("Item #%d", it.ID)))
	if it.WebURL != "" {
		// Built by the core from web.public_url (checked to hold no '<', '>'
		// or '|'), never from item text.
		els = append(els, mrkdwn("<"+it.WebURL+"|Open in browser>"))
	}
	return slackgo.NewContextBlock("", els...)
}

func outcomeBlock(it bot.Item) slackgo.Block {
	icon, word := outcome(it.Status)
	var b strings.Builder
	b.WriteString(icon + " *" + escape(word) + "*")
	if len(it.DecidedBy) > 0 {
		b.WriteString(" by " + escape(chat.Deciders(it, 600)))
	}
	if !it.DecidedAt.IsZero() {
		b.WriteString(" on " + slackDate(it.DecidedAt))
	}
	head := truncate(b.String(), 1000)
	switch {
	case it.Reason == "":
	case it.Sensitive:
		head += "\n_The reason is kept in the audit log._"
	default:
		room := maxSectionText - utf8.RuneCountInString(head) - len("\n*Reason*\n``````") - 2
		head += "\n*Reason*\n```" + truncate(codeSafe(escape(it.Reason)), room) + "```"
	}
	return slackgo.NewSectionBlock(mrkdwn(head), nil, nil)
}

// actionBlocks renders the buttons of a pending item.
func actionBlocks(it bot.Item) []slackgo.Block {
	id := strconv.FormatUint(it.ID, 10)
	blockID := blockPrefix + id
	if it.Kind == bot.KindQuestion && len(it.Options) > 0 {
		return questionBlocks(it, id, blockID)
	}
	// An Approve carries the version the card shows (chat.EditBasis: the
	// arguments and the facts), so a click on a card not yet updated
	// after another approver's edit or a change of the facts is refused,
	// not counted; and, on a dangerous item, that its confirmation
	// dialog (which names what runs, on what) came first.
	approveValue := id
	if b := chat.EditBasis(it); b != "" || it.Danger != nil {
		approveValue = id + ":" + b
	}
	approve := slackgo.NewButtonBlockElement(actionApprove, approveValue, plain("Approve"))
	reject := slackgo.NewButtonBlockElement(actionReject, id, plain("Reject"))
	if it.Danger != nil {
		// The dangerous action looks dangerous: Approve is red, Reject is
		// not, and the dialog names what cannot be undone.
		approveValue += confirmedMark
		approve = slackgo.NewButtonBlockElement(actionApprove, approveValue, plain("Approve")).WithStyle(slackgo.StyleDanger)
		approve.WithConfirm(slackgo.NewConfirmationBlockObject(
			plain(plainText(chat.ConfirmTitle(it), maxConfirmTitle)),
			plain(plainText(chat.ConfirmText(it), maxConfirmText)),
			plain(plainText(chat.ConfirmButton(it), maxConfirmButton)), plain("Cancel")).WithStyle(slackgo.StyleDanger))
	} else {
		approve.WithStyle(slackgo.StylePrimary)
		approve.WithConfirm(slackgo.NewConfirmationBlockObject(
			plain(plainText("Approve #"+id+"?", maxConfirmTitle)),
			plain(plainText(chat.ConfirmText(it), maxConfirmText)),
			plain("Approve"), plain("Cancel")))
		reject.WithStyle(slackgo.StyleDanger)
	}
	els := []slackgo.BlockElement{approve}
	if it.Editable != nil {
		// Only what can be edited gets the button (an action's arguments,
		// a memory proposal's value); never a consent or a question.
		els = append(els, slackgo.NewButtonBlockElement(actionEdit, id, plain("Edit & approve")))
	}
	els = append(els, reject)
	if len(it.Details) > 0 {
		els = append(els, slackgo.NewButtonBlockElement(actionDetails, id, plain("Details")))
	}
	return append([]slackgo.Block{slackgo.NewActionBlock(blockID, els...)}, grantBlocks(it)...)
}

// confirmedMark ends an Approve button's value when the button carries a
// dangerous item's confirmation dialog: Slack sends the click only after
// the dialog was confirmed, so the click is the confirmation step
// (chat.Decision.Confirmed).
const confirmedMark = ":!"

func questionBlocks(it bot.Item, id, blockID string) []slackgo.Block {
	decline := slackgo.NewButtonBlockElement(actionReject, id, plain("Decline")).WithStyle(slackgo.StyleDanger)
	var els []slackgo.BlockElement
	shown := len(it.Options)
	if it.Multi {
		shown = min(shown, maxCheckboxes)
		opts := make([]*slackgo.OptionBlockObject, shown)
		for i := range shown {
			opts[i] = slackgo.NewOptionBlockObject(strconv.Itoa(i), plain(plainText(it.Options[i], maxOptionText)), nil)
		}
		els = append(els, slackgo.NewCheckboxGroupsBlockElement(actionChoices, opts...),
			slackgo.NewButtonBlockElement(actionSubmit, id, plain("Submit")).WithStyle(slackgo.StylePrimary))
	} else {
		shown = min(shown, maxActionElements-1)
		for i := range shown {
			els = append(els, slackgo.NewButtonBlockElement(actionAnswer+strconv.Itoa(i), id+":"+strconv.Itoa(i), plain(plainText(it.Options[i], maxButtonText))))
		}
	}
	els = append(els, decline)
	out := []slackgo.Block{slackgo.NewActionBlock(blockID, els...)}
	if hidden := len(it.Options) - shown; hidden > 0 {
		out = append(out, slackgo.NewContextBlock("", mrkdwn(fmt.Sprintf("…(truncated: %d more options cannot be shown in Slack; answer with the API)", hidden))))
	}
	return out
}

// detailText is the notification text of the private copy of a sensitive item.
func detailText(it bot.Item) string {
	return text("Detail of sensitive item #"+strconv.FormatUint(it.ID, 10)+": "+itemTitle(it), maxMessageText)
}

// reasonModal is the form a rejection reason is typed into. private
// metadata carries the item id and the channel to answer in.
func reasonModal(it bot.Item, channelID string) slackgo.ModalViewRequest {
	id := strconv.FormatUint(it.ID, 10)
	verb := "Reject"
	if it.Kind == bot.KindQuestion {
		verb = "Decline"
	}
	in := slackgo.NewPlainTextInputBlockElement(plain("Why? This is recorded with the decision."), reasonAction)
	in.Multiline = true
	in.MaxLength = maxReason
	return slackgo.ModalViewRequest{
		Type:            slackgo.VTModal,
		CallbackID:      callbackReject,
		PrivateMetadata: id + "|" + channelID,
		Title:           plain(plainText(verb+" #"+id, maxModalTitle)),
		Submit:          plain(verb),
		Close:           plain("Cancel"),
		Blocks: slackgo.Blocks{BlockSet: []slackgo.Block{
			slackgo.NewSectionBlock(mrkdwn("*"+text(itemTitle(it), maxSectionText-2)+"*"), nil, nil),
			slackgo.NewInputBlock(reasonBlock, plain("Reason"), nil, in),
		}},
	}
}

// capitalize upper-cases the first letter of a sentence.
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// editModal is the "Edit & approve" form: one input per argument (or one
// JSON input, or the proposed value) prefilled exactly with what is up for
// approval, and an optional note. private_metadata carries the item id,
// the channel to answer in and the form's basis (chat.EditBasis), so a
// form opened before another approver's edit is refused, not applied.
func editModal(it bot.Item, lay chat.EditLayout, channelID string) slackgo.ModalViewRequest {
	id := strconv.FormatUint(it.ID, 10)
	blocks := []slackgo.Block{
		slackgo.NewSectionBlock(mrkdwn("*"+text(itemTitle(it), maxSectionText-2)+"*"), nil, nil),
		slackgo.NewContextBlock("", mrkdwn("Change what you need and approve: you are recorded as approving the edited version, which is checked like a new request. The proposed version is kept.")),
	}
	for i, in := range lay.Inputs {
		el := slackgo.NewPlainTextInputBlockElement(nil, editAction)
		// The prefill is the exact current text: an input left alone
		// must not change the arguments. plain_text_input shows it
		// literally; nothing in it is parsed as markup.
		el.InitialValue = in.Value
		el.Multiline = in.Multiline
		el.MaxLength = maxEditText
		b := slackgo.NewInputBlock(editBlock+strconv.Itoa(i), plain(plainText(in.Label, 2000)), nil, el)
		b.Optional = true // an empty string is a value; chat checks what may be empty
		blocks = append(blocks, b)
	}
	note := slackgo.NewPlainTextInputBlockElement(plain("Why the change? Recorded with the decision."), noteAction)
	note.Multiline = true
	note.MaxLength = maxReason
	nb := slackgo.NewInputBlock(noteBlock, plain("Note (optional)"), nil, note)
	nb.Optional = true
	blocks = append(blocks, nb)
	return slackgo.ModalViewRequest{
		Type:            slackgo.VTModal,
		CallbackID:      callbackEdit,
		PrivateMetadata: id + "|" + channelID + "|" + lay.Basis,
		Title:           plain(plainText("Edit #"+id, maxModalTitle)),
		Submit:          plain("Approve edited"),
		Close:           plain("Cancel"),
		Blocks:          slackgo.Blocks{BlockSet: blocks},
	}
}

// cardText is the text a card shows, in order, one a line: every text of
// its blocks (the header, sections and their fields, context elements,
// button labels and their confirmation dialogs). Its SHA-256 is what an
// approver saw (bot.Seen): Slack sends the card back with each click, so
// a click records the card as Slack showed it. truncated reports that
// something was cut to fit (every cut ends with truncMarker, or says how
// much more is not shown).
func cardText(blocks []slackgo.Block) (text string, truncated bool) {
	raw, err := json.Marshal(blocks)
	if err != nil {
		return "", false
	}
	return chat.CardText(raw, "text")
}
