package memory

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/policy"
)

// EscapeBreaks renders an untrusted value on one line: line breaks and tabs are
// shown escaped (\n, \r, \t), so a stored value cannot forge further lines
// of an answer. The stored value is unchanged.
func EscapeBreaks(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s)
}

// Truncate cuts s to at most n runes.
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// RenderStored is remember's answer: "Stored: [ACTION] subject = value".
func RenderStored(a Action, subject, value string) string {
	return fmt.Sprintf("Stored: [%s] %s = %s", a, subject, EscapeBreaks(value))
}

// RenderRetracted is forget's answer for an applied removal.
func RenderRetracted(subject, value string) string {
	return fmt.Sprintf("Retracted (retained in history for audit): %s = %s", subject, EscapeBreaks(value))
}

// NothingToRetract is forget's answer when nothing current matches.
const NothingToRetract = "Nothing matching to retract (that fact isn't currently stored)."

// ExplainLine is one fact behind an answer:
// "  • #2 state = Zustand  [conf 0.95, from crm, supersedes #1]".
func ExplainLine(f *Fact) string {
	tags := []string{"conf " + policy.Conf(f.Confidence)}
	if f.Scope != "" && f.Scope != DefaultScope {
		tags = append(tags, "scope "+f.Scope)
	}
	if f.Source != "" {
		tags = append(tags, "from "+EscapeBreaks(f.Source))
	}
	if f.Supersedes != 0 {
		tags = append(tags, fmt.Sprintf("supersedes #%d", f.Supersedes))
	}
	return fmt.Sprintf("  • #%d %s = %s  [%s]", f.ID, f.Subject, EscapeBreaks(f.Value), strings.Join(tags, ", "))
}

// NoFactsUsed is the answer of a recall with nothing behind it.
const NoFactsUsed = "Nothing stored in this space answers that.\n\n(no stored facts were used)"

// RenderRecall is the answer of recall (and of safe_recall when every fact
// is safe): the facts behind it, in the explain format.
func RenderRecall(r Recall) string {
	if len(r.Facts) == 0 {
		return NoFactsUsed
	}
	var b strings.Builder
	b.WriteString("Based on these facts:")
	for _, x := range r.Facts {
		b.WriteString("\n")
		b.WriteString(ExplainLine(x.Fact))
	}
	return b.String()
}

// ChangeVerb is how a held change is named in the queue.
func ChangeVerb(f *Fact) string {
	switch f.Pending {
	case ActionSupersede:
		return "REPLACE"
	case ActionRetract:
		return "REMOVE"
	}
	return "ADD"
}

// ChangeTitle is a held change on one line, e.g.
// "REPLACE active_medication: 'warfarin 5mg daily' -> 'apixaban 5mg twice daily'".
// current is the value the change was proposed against (the target's value,
// or the snapshot taken when proposed); targetActive false means that value
// is no longer current, and the title says the proposal is stale.
func ChangeTitle(f *Fact, current string, targetActive bool) string {
	cur := policy.PyRepr(current)
	if !targetActive {
		cur += " (no longer current: STALE)"
	}
	switch f.Pending {
	case ActionSupersede:
		return fmt.Sprintf("REPLACE %s: %s -> %s", f.Subject, cur, policy.PyRepr(f.Value))
	case ActionRetract:
		return fmt.Sprintf("REMOVE %s: %s", f.Subject, cur)
	}
	return fmt.Sprintf("ADD %s: %s", f.Subject, policy.PyRepr(f.Value))
}

// PendingLine is one entry of pending_changes: the title, the sentence that
// was said (at most 120 characters), and why it is held when not a confirm
// slot.
type PendingLine struct {
	Fact *Fact
	// Current is the value the change was proposed against.
	Current string
	// TargetActive is false when that value is no longer current: the
	// proposal is stale, can no longer be approved, and the sweeper closes
	// it.
	TargetActive bool
}

// Stale reports whether the line's proposal was made against a value that
// is no longer current (an ADD never is).
func (l PendingLine) Stale() bool { return l.Fact.Supersedes != 0 && !l.TargetActive }

// NoPending is pending_changes' answer for an empty queue.
const NoPending = "No changes awaiting approval."

// RenderPending is pending_changes' answer. Stale proposals are listed
// apart, with the value they expected, so that none reads as awaiting a
// decision it can no longer get.
func RenderPending(lines []PendingLine) string {
	if len(lines) == 0 {
		return NoPending
	}
	var live, stale []PendingLine
	for _, l := range lines {
		if l.Stale() {
			stale = append(stale, l)
		} else {
			live = append(live, l)
		}
	}
	var b strings.Builder
	if len(live) > 0 {
		fmt.Fprintf(&b, "%d change(s) awaiting approval:", len(live))
	} else {
		b.WriteString(NoPending)
	}
	for _, l := range live {
		writePendingLine(&b, l)
	}
	if len(stale) > 0 {
		fmt.Fprintf(&b, "\n\n%d stale proposal(s): the value each was proposed against is no longer current, so it can no longer be approved; the sweeper closes it (or discard it now with reject_change):", len(stale))
		for _, l := range stale {
			writePendingLine(&b, l)
		}
	}
	b.WriteString("\n\nApprove with confirm_change(memory_id), discard with reject_change(memory_id).")
	return b.String()
}

func writePendingLine(b *strings.Builder, l PendingLine) {
	fmt.Fprintf(b, "\n  #%d %s", l.Fact.ID, ChangeTitle(l.Fact, l.Current, l.TargetActive))
	if l.Fact.Said != "" {
		fmt.Fprintf(b, "\n        said: %s", policy.PyRepr(Truncate(l.Fact.Said, 120)))
	}
	if !l.Fact.Gated() && l.Fact.Held != "" {
		fmt.Fprintf(b, "\n        held: %s", EscapeBreaks(l.Fact.Held))
	}
}

// RenderHistory is history's answer.
func RenderHistory(subject string, facts []*Fact) string {
	if len(facts) == 0 {
		return fmt.Sprintf("No history for '%s'.", subject)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "History for '%s' (oldest → newest):", subject)
	for i, f := range facts {
		scope := ""
		if f.Scope != DefaultScope {
			scope = " (scope " + f.Scope + ")"
		}
		fmt.Fprintf(&b, "\n  %d. %s%s  [%s]", i+1, EscapeBreaks(f.Value), scope, f.Status)
	}
	return b.String()
}

// EmptySpace is list_memories' answer for a space with no facts.
const EmptySpace = "(no memories yet)"

// RenderList is list_memories' answer: active facts, then flagged ones,
// then the most recent retired ones.
func RenderList(active, flagged, retired []*Fact) string {
	if len(active)+len(flagged)+len(retired) == 0 {
		return EmptySpace
	}
	var lines []string
	for _, f := range active {
		lines = append(lines, fmt.Sprintf("• %s = %s  (#%d)", f.Subject, EscapeBreaks(f.Value), f.ID))
	}
	for _, f := range flagged {
		lines = append(lines, fmt.Sprintf("⚠ %s = %s  (#%d, flagged — needs confirmation)", f.Subject, EscapeBreaks(f.Value), f.ID))
	}
	if len(retired) > 0 {
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, "— history (superseded / retracted / archived) —")
		for _, f := range retired {
			lines = append(lines, fmt.Sprintf("  ◦ %s = %s  [%s]", f.Subject, EscapeBreaks(f.Value), f.Status))
		}
	}
	return strings.Join(lines, "\n")
}

// RenderFact is get_memory's answer.
func RenderFact(f *Fact) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d  %s = %s\n", f.ID, f.Subject, EscapeBreaks(f.Value))
	fmt.Fprintf(&b, "  status=%s  scope=%s  confidence=%s  metadata=%s", f.Status, f.Scope, policy.Conf(f.Confidence), pyMeta(f))
	var extra []string
	extra = append(extra, "kind="+string(f.Kind))
	if f.Source != "" {
		extra = append(extra, "source="+EscapeBreaks(f.Source))
	}
	if f.Supersedes != 0 {
		extra = append(extra, fmt.Sprintf("supersedes=#%d", f.Supersedes))
	}
	extra = append(extra, "set_at="+f.SetAt.UTC().Format(time.RFC3339))
	if !f.RetiredAt.IsZero() {
		extra = append(extra, "retired_at="+f.RetiredAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "\n  %s", strings.Join(extra, "  "))
	if f.Said != "" {
		fmt.Fprintf(&b, "\n  said: %s", policy.PyRepr(f.Said))
	}
	if f.IsProposal() {
		state := "pending"
		if f.Resolved != "" {
			state = string(f.Resolved)
		}
		fmt.Fprintf(&b, "\n  proposal: %s (%s), proposed by %s", ChangeVerb(f), state, f.Proposer())
		if f.DecidedBy != "" {
			fmt.Fprintf(&b, "; decided by %s", f.DecidedBy)
		}
	}
	return b.String()
}

// pyMeta renders the fact's metadata as the seeds show it:
// {'category': 'allergy', 'team': 'eng'}, keys sorted; the slot's category
// is part of it.
func pyMeta(f *Fact) string {
	m := f.MetadataMap()
	if m == nil {
		m = map[string]any{}
	}
	if f.Category != "" {
		m["category"] = f.Category
	}
	return pyValue(m)
}

func pyValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return policy.PyRepr(x)
	case float64:
		if x == float64(int64(x)) && x < 1e15 && x > -1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case json.Number:
		return x.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = policy.PyRepr(k) + ": " + pyValue(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return policy.PyRepr(fmt.Sprint(v))
}
