package bot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/policy"
)

// This file holds the parts of an item's view that the person clicking
// reads first (issue 23): what happens if they approve, why they are
// asked, the arguments as a list, the facts the approval rests on, the
// danger of a destructive call, and the developer detail folded away. The
// item's source computes all of them from the item itself, never from the
// agent's words; renderers only draw them, in chat's vocabulary.

// Danger marks an item whose approval cannot be undone (a destructive or
// dry-run-first call): surfaces show Warning first, style Approve as the
// dangerous action (and Reject not), and ask for a confirmation step before
// an approval counts (Slack's confirm dialog, Discord's second button, the
// target typed in the console or a chat command).
type Danger struct {
	// Warning is the line shown above everything else.
	Warning string `json:"warning"`
	// Target is what an approver types to confirm: the name of what the
	// call acts on (its first required string argument), else the tool.
	Target string `json:"target"`
	// TargetLabel says what Target is: the argument's name, or "tool".
	TargetLabel string `json:"target_label"`
	// Confirm is the sentence of a confirmation step: what runs, on what,
	// and that it cannot be undone.
	Confirm string `json:"confirm"`
}

// FactView is one fact an approval rests on (a tool's context subject) as
// a card shows it: its value now, check_before_act's verdict on it, and,
// on an approved or reopened item, what it was approved on.
type FactView struct {
	Subject string `json:"subject"`
	// Value is the value now: the active values, a pending proposal
	// noted, or "none" when nothing is recorded.
	Value string `json:"value"`
	// Verdict and Reasons are check_before_act's on the subject, with the
	// seeds' wording (SAFE, or BLOCKED and its reasons).
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
	// Was, when the approval rests on another value than Value, is that
	// value; "" when the fact is as it was approved.
	Was string `json:"was,omitempty"`
	// Version identifies the subject's live facts: a card's basis
	// (chat.EditBasis) covers it, so a click on a card that showed other
	// facts is refused.
	Version string `json:"version"`
}

// VoteView is one vote on an item as the console lists it: who, which
// way, when, and what they were shown.
type VoteView struct {
	By      string    `json:"by"` // "name [id]"
	Approve bool      `json:"approve"`
	At      time.Time `json:"at"`
	// Counts is false for a vote cast on an earlier version of the
	// arguments or in an earlier round (before the facts changed).
	Counts bool `json:"counts"`
	// Seen is what the voter was shown; nil for a vote without a card
	// (an API call, a typed command).
	Seen *Seen `json:"seen,omitempty"`
	// Void, on an approval that no longer counts because its voter was
	// suspended from approving (suspensions.go), says so.
	Void string `json:"void,omitempty"`
	// Assurance is how the voter was authenticated for the vote ("" when
	// it was recorded before votes carried one).
	Assurance policy.Assurance `json:"assurance,omitempty"`
}

// Seen is what an approver was shown when they decided: the SHA-256 of
// the text of the card or page as rendered (lower-case hex), the surface
// that rendered it, and whether anything of the item was cut to fit. A
// surface passes it with the decision (chat.Decision.Seen); the decision
// tool records it on the vote, and refuses a vote on a dangerous item cut
// to fit.
type Seen struct {
	SHA256    string `json:"sha256"`
	Surface   string `json:"surface"`
	Truncated bool   `json:"truncated,omitempty"`
}

// SeenText is the Seen of text (a card's or page's visible text, as the
// surface put it together) on surface.
func SeenText(surface, text string, truncated bool) *Seen {
	sum := sha256.Sum256([]byte(text))
	return &Seen{SHA256: hex.EncodeToString(sum[:]), Surface: surface, Truncated: truncated}
}

// arg is the Seen as a decision tool's "seen" argument.
func (s *Seen) arg() map[string]any {
	m := map[string]any{"sha256": s.SHA256, "surface": s.Surface}
	if s.Truncated {
		m["truncated"] = true
	}
	return m
}

// String names what was seen in one line: "slack card 3f2a9c1e… (whole)".
func (s *Seen) String() string {
	if s == nil {
		return ""
	}
	h := s.SHA256
	if len(h) > 16 {
		h = h[:16] + "…"
	}
	cut := "whole"
	if s.Truncated {
		cut = "cut to fit"
	}
	return fmt.Sprintf("%s %s sha256 %s (%s)", s.Surface, seenNoun(s.Surface), h, cut)
}

func seenNoun(surface string) string {
	if surface == "web" {
		return "page"
	}
	return "card"
}

// maxArgs is the most arguments an item lists one a line; the rest are in
// its Details.
const maxArgs = 12

// ArgList is the arguments of a call (a JSON object) as a readable list:
// one field a top-level argument, in the object's order, a string as it
// is and anything else as compact JSON, invisible characters shown as
// escapes. More than maxArgs arguments end with a line saying how many
// more are in Details; arguments that are not an object are one field.
func ArgList(args json.RawMessage) []Field {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		if len(bytes.TrimSpace(args)) == 0 {
			return nil
		}
		return []Field{{Label: "arguments", Value: EscapeInvisible(string(args))}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // canonical JSON's order: the order the agent's call is hashed in
	var out []Field
	for i, k := range keys {
		if i == maxArgs {
			out = append(out, Field{Label: "…", Value: fmt.Sprintf("%d more arguments: see Details", len(keys)-maxArgs)})
			break
		}
		out = append(out, Field{Label: EscapeInvisible(k), Value: argText(m[k])})
	}
	return out
}

// argText is one argument's value as text: a string as it is, anything
// else as compact JSON.
func argText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return EscapeInvisible(s)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return EscapeInvisible(string(raw))
	}
	return EscapeInvisible(buf.String())
}

// NameOf is the name part of a principal shown as "name [id]": the id is
// detail, folded away from the card. A voter shown "bob [U0BOB] for
// alice" (a vote cast under alice's delegation) is "bob for alice".
func NameOf(display string) string {
	if base, delegator, ok := strings.Cut(display, "] for "); ok && !strings.Contains(delegator, "[") {
		return NameOf(base+"]") + " for " + delegator
	}
	if i := strings.LastIndex(display, " ["); i > 0 && strings.HasSuffix(display, "]") {
		return display[:i]
	}
	return display
}

// Clock returns the time formatted as the cards show it: "21:29 UTC" when
// it falls on the same UTC day as ref, else "2026-03-02 21:29 UTC".
func Clock(t, ref time.Time) string {
	t, ref = t.UTC(), ref.UTC()
	if t.Year() == ref.Year() && t.YearDay() == ref.YearDay() {
		return t.Format("15:04 UTC")
	}
	return t.Format("2006-01-02 15:04 UTC")
}

// FactsDigest is the hex SHA-256 of the facts a card shows (each
// subject's and version's): a decision passes it (Seen), and the decision
// tool refuses an approval when the facts as they stand in its
// transaction digest differently, so nobody approves on facts they were
// not shown.
func FactsDigest(subjects, versions []string) string {
	h := sha256.New()
	for i, s := range subjects {
		v := ""
		if i < len(versions) {
			v = versions[i]
		}
		fmt.Fprintf(h, "%q=%q;", s, v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FactsDigestOf is FactsDigest of a card's facts.
func FactsDigestOf(fs []FactView) string {
	subjects, versions := make([]string, len(fs)), make([]string, len(fs))
	for i, f := range fs {
		subjects[i], versions[i] = f.Subject, f.Version
	}
	return FactsDigest(subjects, versions)
}
