package discord

import (
	"strings"
	"unicode"
	"unicode/utf16"
)

// Discord's length limits, counted in characters. Lengths here are counted
// in UTF-16 code units, which is never less than Discord's count, so a text
// within them is always accepted.
const (
	// maxContent is a message's content.
	// https://discord.com/developers/docs/resources/message#create-message-jsonform-params
	maxContent = 2000
	// Embed limits: title, description, field name and value, footer text,
	// number of fields, and the sum of all of them in one embed.
	// https://discord.com/developers/docs/resources/message#embed-object-embed-limits
	maxEmbedTitle = 256
	maxEmbedDesc  = 4096
	maxFieldName  = 256
	maxFieldValue = 1024
	maxFooter     = 2048
	maxFields     = 25
	maxEmbedTotal = 6000
	// Component limits: a custom_id, a button label, a select option's
	// label, the options of one select menu.
	// https://discord.com/developers/docs/components/reference#button
	// https://discord.com/developers/docs/components/reference#string-select
	maxCustomID      = 100
	maxButtonLabel   = 80
	maxSelectLabel   = 100
	maxSelectOptions = 25
	// maxButtonsPerRow is the number of buttons one action row holds.
	// https://discord.com/developers/docs/components/reference#action-row
	maxButtonsPerRow = 5
	// maxModalTitle is a modal's title.
	// https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-response-object-modal
	maxModalTitle = 45
)

// truncMarker ends a text that was cut to fit a limit. It reads as a note,
// never as structure (no button, no field, no line of its own).
const truncMarker = "… (truncated)"

// zwsp is the zero-width space inserted into mention syntax so that it
// renders as inert text.
const zwsp = "\u200b"

// textMode says how a piece of untrusted text is shown.
type textMode int

const (
	// inline is markdown on one line: line breaks become spaces.
	inline textMode = iota
	// block is markdown that keeps its line breaks.
	block
	// label is a surface without markdown (button and select labels, modal
	// titles): control characters go, line breaks become spaces, nothing is
	// escaped.
	label
)

// units16 is the length of s in UTF-16 code units.
func units16(s string) int {
	n := 0
	for _, r := range s {
		n += max(utf16.RuneLen(r), 1) // ranging a string never yields a surrogate
	}
	return n
}

// clip renders untrusted text s for a Discord surface and cuts it to at
// most limit characters, ending a cut text with truncMarker. In markdown
// modes it escapes what could fake structure (emphasis, code, spoilers,
// links, quotes, headings, lists) and neutralises mentions (@everyone,
// @here, <@id>, <@&id>, <#id>) with a zero-width space, so they render as
// inert text even where allowed_mentions would not apply.
func clip(s string, limit int, mode textMode) string {
	pieces := escapePieces(s, mode)
	total := 0
	for _, p := range pieces {
		total += units16(p)
	}
	var b strings.Builder
	if total <= limit {
		for _, p := range pieces {
			b.WriteString(p)
		}
		return b.String()
	}
	marker := truncMarker
	if mode == label {
		marker = "…"
	}
	budget := limit - units16(marker)
	used := 0
	for _, p := range pieces {
		n := units16(p)
		if used+n > budget {
			break
		}
		b.WriteString(p)
		used += n
	}
	return strings.TrimRight(b.String(), " \n") + marker
}

// escapePieces splits s into the smallest units that must stay whole (an
// escaped character with its backslash, a neutralised mention with its
// zero-width space), already rendered for mode.
func escapePieces(s string, mode textMode) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	// Drop the invisible characters first, so that what the checks below
	// see is what Discord shows: "@every\x05one" must not become a live
	// @everyone once the control character is gone (found by FuzzClip).
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return r
		}
		if isBidiControl(r) || unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	rs := []rune(s)
	out := make([]string, 0, len(rs))
	lineStart := true
	escapeAt := -1 // index of a '.' ending "12." at the start of a line
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029':
			if mode == block {
				out = append(out, "\n")
				lineStart = true
				continue
			}
			out = append(out, " ")
			continue
		case r == '\t':
			out = append(out, " ")
			continue
		case isBidiControl(r) || (unicode.IsControl(r)):
			continue // dropped: could reorder or hide what is shown
		}
		if mode == label {
			out = append(out, string(r))
			continue
		}
		if lineStart {
			switch {
			case r == ' ':
				out = append(out, " ")
				continue
			case r == '>' || r == '#' || r == '-' || r == '+':
				out = append(out, `\`+string(r))
				lineStart = false
				continue
			case r >= '0' && r <= '9':
				j := i
				for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
					j++
				}
				// "12. x" or "12) x" would start a numbered list.
				if j < len(rs) && (rs[j] == '.' || rs[j] == ')') && (j+1 == len(rs) || rs[j+1] == ' ' || rs[j+1] == '\t') {
					escapeAt = j
				}
			}
			lineStart = false
		}
		switch {
		case i == escapeAt:
			out = append(out, `\`+string(r))
		case strings.ContainsRune("\\*_~`|[]", r):
			out = append(out, `\`+string(r))
		case r == '<':
			// <@id>, <@&id>, <#id>, </cmd:id>, <:emoji:id>, <t:…>: never
			// parsed once escaped and split.
			out = append(out, `\<`+zwsp)
		case r == '@' && mentionWord(rs[i+1:]):
			out = append(out, "@"+zwsp)
		default:
			out = append(out, string(r))
		}
	}
	return out
}

// mentionWord reports whether rest starts with "everyone" or "here" (any
// case), the words that make "@" a mass mention.
func mentionWord(rest []rune) bool {
	for _, w := range []string{"everyone", "here"} {
		if len(rest) >= len(w) && strings.EqualFold(string(rest[:len(w)]), w) {
			return true
		}
	}
	return false
}

// isBidiControl reports the Unicode bidirectional controls, which can make
// text display in an order other than the one stored.
func isBidiControl(r rune) bool {
	switch {
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e':
		return true
	case r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}
