package chat

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/bot"
)

// This file is chat's one vocabulary: the words for an item's status and
// kind, the sentence for an outcome already recorded, the time format, and
// how untrusted text is made safe to show. Every renderer (Slack, Discord,
// the chat commands, the web console) uses these, so the surfaces say the
// same thing in the same words; each renderer then escapes for its markup.

// StatusWord is how an item's status is shown: an icon and a capitalised
// word ("✅", "Approved"). A pending item is "⏳", "Pending".
func StatusWord(status string) (icon, word string) {
	switch status {
	case "pending":
		return "⏳", "Pending"
	case "approved":
		return "✅", "Approved"
	case "answered":
		return "✅", "Answered"
	case "recorded":
		return "✅", "Recorded"
	case "rejected":
		return "⛔", "Rejected"
	case "denied":
		return "⛔", "Denied"
	case "declined":
		return "⛔", "Declined"
	case "expired":
		return "⌛", "Expired"
	case "stale":
		return "⚠️", "Closed as stale"
	case "", "closed":
		return "•", "Closed"
	}
	s := bot.OneLine(status, 64)
	if s == "" {
		return "•", "Closed"
	}
	r, n := utf8.DecodeRuneInString(s)
	return "•", string(unicode.ToUpper(r)) + s[n:]
}

// Approving reports whether status is a favourable outcome (approved,
// answered, recorded): renderers colour it so.
func Approving(status string) bool {
	return status == "approved" || status == "answered" || status == "recorded"
}

// Refusing reports whether status is an unfavourable decision (rejected,
// denied, declined).
func Refusing(status string) bool {
	return status == "rejected" || status == "denied" || status == "declined"
}

// KindNoun names an item kind in running text ("memory change").
func KindNoun(k bot.ItemKind) string {
	switch k {
	case bot.KindMemoryChange:
		return "memory change"
	case bot.KindAction:
		return "action request"
	case bot.KindConsent:
		return "consent request"
	case bot.KindQuestion:
		return "question"
	case bot.KindBreakGlassReview:
		return "break-glass review"
	}
	if n := bot.OneLine(string(k), 40); n != "" {
		return n
	}
	return "item"
}

// SensitiveNoun names a sensitive item without saying what it is about.
func SensitiveNoun(k bot.ItemKind) string {
	if k == bot.KindMemoryChange {
		return "change to a sensitive slot"
	}
	return "sensitive " + KindNoun(k)
}

// timeLayout is how chat shows a time: UTC, to the minute.
const timeLayout = "2006-01-02 15:04 UTC"

// Stamp renders t in chat's time format.
func Stamp(t time.Time) string { return t.UTC().Format(timeLayout) }

// recordedOutcome is the sentence for an item that already has its
// outcome: what was recorded, by whom, when, and (unless the item is
// sensitive) why. "#12 was already approved by dr_smith [U0123] at
// 2026-03-02 08:05 UTC. Nothing was changed."
func recordedOutcome(it bot.Item) string {
	_, word := StatusWord(it.Status)
	var b strings.Builder
	fmt.Fprintf(&b, "#%d was already %s", it.ID, strings.ToLower(word))
	if len(it.DecidedBy) > 0 {
		b.WriteString(" by " + joinLine(it.DecidedBy, 600))
	}
	if !it.DecidedAt.IsZero() {
		b.WriteString(" at " + Stamp(it.DecidedAt))
	}
	b.WriteString(". Nothing was changed.")
	if it.Reason != "" && !it.Sensitive {
		b.WriteString("\nReason: " + bot.OneLine(it.Reason, 400))
	}
	return b.String()
}

// WithChanges is the sentence for an item an approver edited before
// approving (#15), "" for one without changes: "approved with changes by
// alice [prin_a]: dose 5mg → 2.5mg" once approved, "changed by alice
// [prin_a] before approval: dose 5mg → 2.5mg" while pending (approvals
// then count for the changed version), "changed by … : …" otherwise. The
// diff is bounded (bot.MaxChanges fields, values cut) and every part is
// cleaned with bot.OneLine; renderers escape it for their markup.
func WithChanges(it bot.Item) string {
	c := it.Changes
	if c == nil {
		return ""
	}
	var lead string
	switch it.Status {
	case "approved":
		lead = "approved with changes by "
	case "pending":
		lead = "changed before approval by "
	default:
		lead = "changed by "
	}
	by := bot.OneLine(c.By, 100)
	if by == "" {
		by = "an approver"
	}
	return bot.OneLine(lead+by+": "+c.Text(), 900)
}

// joinLine joins several untrusted strings with ", " on one line, each
// and the whole capped.
func joinLine(ss []string, max int) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = bot.OneLine(s, 100)
	}
	return bot.OneLine(strings.Join(out, ", "), max)
}

// The words of a card for the person clicking (issue 23): every surface
// draws an item's card lines under these labels, in this order: the
// danger warning, the first line (the agent's summary), what happens if
// you approve, the facts it rests on, the arguments, why you are asked,
// and the folded Details.
const (
	// AskedLabel heads why a person is asked (bot.Item.Asked).
	AskedLabel = "Why you are asked:"
	// DetailsLabel names the folded developer detail (bot.Item.Details).
	DetailsLabel = "Details"
	// ArgsLabel heads an action's arguments (bot.Item.Args).
	ArgsLabel = "With these arguments:"
)

// EffectLabel heads an item's Effect: "If you approve:" while it awaits
// an approval ("If you answer:" for a question), "Now:" once approved,
// "" otherwise.
func EffectLabel(it bot.Item) string {
	switch {
	case it.Effect == "":
		return ""
	case it.Pending() && it.Kind == bot.KindQuestion:
		return "If you answer:"
	case it.Pending():
		return "If you approve:"
	}
	return "Now:"
}

// FactsHeading heads an item's facts: while it is pending, the facts now,
// on which an approval would rest; once approved, the facts it was
// approved on.
func FactsHeading(it bot.Item) string {
	if it.Status == "approved" {
		return "Approved on these facts:"
	}
	return "The approval rests on these facts (now):"
}

// FactLine is one fact of a card on one line: "allergy: none — SAFE",
// "allergy: penicillin (approved on: none) — SAFE", "active_medication:
// none — BLOCKED: no active fact for this subject — nothing safe to act
// on". The verdict and its reasons are check_before_act's, as the seeds
// word them.
func FactLine(f bot.FactView) string {
	v := bot.OneLine(f.Value, 160)
	if f.Was != "" {
		v += " (approved on: " + bot.OneLine(f.Was, 120) + ")"
	}
	line := bot.OneLine(f.Subject, 60) + ": " + v + " — " + bot.OneLine(f.Verdict, 20)
	if len(f.Reasons) > 0 {
		line += ": " + JoinReasons(f.Reasons, 300)
	}
	return line
}

// JoinReasons joins a verdict's reasons on one line.
func JoinReasons(rs []string, max int) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = bot.OneLine(r, 200)
	}
	return bot.OneLine(strings.Join(out, "; "), max)
}

// ReopenedLine is the sentence of an item back for a new decision: "Back
// for a new decision: the facts changed after it was approved (allergy:
// none → penicillin)." "" for an item that never went back.
func ReopenedLine(it bot.Item) string {
	if it.Reopened == "" {
		return ""
	}
	return "Back for a new decision: the facts changed after it was approved (" + bot.OneLine(it.Reopened, 400) + "). Nothing ran."
}

// argLine is one argument on one line: "dose: 5 mg twice daily".
func argLine(f bot.Field) string { return bot.OneLine(f.Label, 60) + ": " + bot.OneLine(f.Value, 300) }

// NameOf is a principal shown as "name [id]" without its id: the card
// shows names, and its Details the ids.
func NameOf(display string) string { return bot.NameOf(bot.OneLine(display, 200)) }

// Deciders are the names of it's deciders, each with how they were
// authenticated when that was recorded: "dr_smith (chat click), dr_jones
// (OIDC step-up)". Every surface's outcome line shows it.
func Deciders(it bot.Item, max int) string {
	out := make([]string, len(it.DecidedBy))
	for i, d := range it.DecidedBy {
		out[i] = NameOf(d)
		if i < len(it.DecidedVia) && it.DecidedVia[i] != "" {
			out[i] += " (" + bot.OneLine(it.DecidedVia[i], 40) + ")"
		}
	}
	return joinLine(out, max)
}

// joinNames are several principals' names (NameOf), joined.
func joinNames(displays []string, max int) string {
	out := make([]string, len(displays))
	for i, d := range displays {
		out[i] = NameOf(d)
	}
	return joinLine(out, max)
}

// Danger words: a dangerous item's confirmation step on every surface.

// ConfirmTitle is the title of a dangerous item's confirmation step.
func ConfirmTitle(it bot.Item) string { return fmt.Sprintf("Approve #%d? It cannot be undone", it.ID) }

// ConfirmText is what a dangerous item's confirmation step says: what
// runs, on what, and who is recorded.
func ConfirmText(it bot.Item) string {
	if it.Danger == nil {
		return "You will be recorded as the approver of: " + bot.OneLine(it.Title, 200)
	}
	return bot.OneLine(it.Danger.Confirm, 240) + " You will be recorded as its approver."
}

// ConfirmButton is the label of the button that confirms a dangerous
// approval.
func ConfirmButton(it bot.Item) string { return fmt.Sprintf("Yes, approve #%d", it.ID) }

// TypeToConfirm asks for a dangerous item's target to be typed (the
// console, a typed command): "To approve, type the db_name: orders_prod".
func TypeToConfirm(it bot.Item) string {
	if it.Danger == nil {
		return ""
	}
	return fmt.Sprintf("To approve, type the %s: %s", bot.OneLine(it.Danger.TargetLabel, 60), bot.OneLine(it.Danger.Target, 100))
}

// Receipt is what a person is told after their decision took effect: the
// outcome and, for an approval, what happens now (bot.Item.Effect).
// "Approved #12. ward_bot may run order_medication once with these
// arguments, before 21:29 UTC."
func Receipt(it bot.Item) string {
	_, word := StatusWord(it.Status)
	s := fmt.Sprintf("%s #%d.", word, it.ID)
	if it.Effect != "" && !it.Sensitive {
		s += " " + bot.OneLine(it.Effect, 400)
	}
	return s
}
