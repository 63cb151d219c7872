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
	s := OneLine(status, 64)
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
	}
	if n := OneLine(string(k), 40); n != "" {
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

// TimeLayout is how chat shows a time: UTC, to the minute.
const TimeLayout = "2006-01-02 15:04 UTC"

// Stamp renders t in chat's time format.
func Stamp(t time.Time) string { return t.UTC().Format(TimeLayout) }

// RecordedOutcome is the sentence for an item that already has its
// outcome: what was recorded, by whom, when, and (unless the item is
// sensitive) why. "#12 was already approved by dr_smith [U0123] at
// 2026-03-02 08:05 UTC. Nothing was changed."
func RecordedOutcome(it bot.Item) string {
	_, word := StatusWord(it.Status)
	var b strings.Builder
	fmt.Fprintf(&b, "#%d was already %s", it.ID, strings.ToLower(word))
	if len(it.DecidedBy) > 0 {
		b.WriteString(" by " + JoinLine(it.DecidedBy, 600))
	}
	if !it.DecidedAt.IsZero() {
		b.WriteString(" at " + Stamp(it.DecidedAt))
	}
	b.WriteString(". Nothing was changed.")
	if it.Reason != "" && !it.Sensitive {
		b.WriteString("\nReason: " + OneLine(it.Reason, 400))
	}
	return b.String()
}

// WithChanges is the sentence for an item an approver edited before
// approving (#15), "" for one without changes: "approved with changes by
// alice [prin_a]: dose 5mg → 2.5mg" once approved, "changed by alice
// [prin_a] before approval: dose 5mg → 2.5mg" while pending (approvals
// then count for the changed version), "changed by … : …" otherwise. The
// diff is bounded (bot.MaxChanges fields, values cut) and every part is
// cleaned with OneLine; renderers escape it for their markup.
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
	by := OneLine(c.By, 100)
	if by == "" {
		by = "an approver"
	}
	return OneLine(lead+by+": "+c.Text(), 900)
}

// OneLine makes untrusted text safe to put on one line (bot.OneLine: the
// one sanitiser, which the core's change lines use too): control
// characters and line or paragraph separators become spaces, bidirectional
// controls, zero-width and other invisible format characters and invalid
// UTF-8 are dropped, runs of white space collapse, and text over max runes
// is cut with "…" (max 0: no limit). Escaping markup is the renderer's job.
func OneLine(s string, max int) string { return bot.OneLine(s, max) }

// JoinLine joins several untrusted strings with ", " on one line, each
// and the whole capped.
func JoinLine(ss []string, max int) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = OneLine(s, 100)
	}
	return OneLine(strings.Join(out, ", "), max)
}

// Invisible reports whether r is a character chat drops from untrusted
// text: bidirectional controls (which reorder what is shown) and the other
// invisible format characters (zero-width space, joiners, word joiner,
// BOM, soft hyphen...), which can hide text or break a mention apart.
func Invisible(r rune) bool { return bot.Invisible(r) }
