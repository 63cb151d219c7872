package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ReconcileMode is how a shared memory space resolves a new value from one
// source against a current value from another.
type ReconcileMode string

// The reconcile modes.
const (
	// ModeRecency: the newer assertion wins (the default; contributors are
	// equally trusted).
	ModeRecency ReconcileMode = "RECENCY"
	// ModeAuthority: a strictly higher-ranked source wins; a lower- or
	// equal-ranked source contradicting it is flagged, not applied.
	ModeAuthority ReconcileMode = "AUTHORITY"
	// ModeReview: every cross-source conflict is flagged for a person.
	ModeReview ReconcileMode = "REVIEW"
)

// ParseReconcileMode parses a mode name, case-insensitively. The error is
// the seed's wording, meant for the caller.
func ParseReconcileMode(s string) (ReconcileMode, error) {
	m := ReconcileMode(strings.ToUpper(strings.TrimSpace(s)))
	switch m {
	case ModeRecency, ModeAuthority, ModeReview:
		return m, nil
	}
	//lint:ignore ST1005 the seed's wording (seed 001, set_reconcile_policy) is the contract
	return "", fmt.Errorf("Unknown mode '%s'. Use RECENCY, AUTHORITY, or REVIEW.", m)
}

// SourceRank is one source's authority; higher is more authoritative.
type SourceRank struct {
	Source string `json:"source"`
	Rank   int    `json:"rank"`
}

// ReconcilePolicy is a space's reconcile policy.
type ReconcilePolicy struct {
	Mode      ReconcileMode
	Authority []SourceRank // sorted by SortRanks; sources unlisted rank 0
}

// SortRanks orders ranks the way they are shown: highest rank first, then
// by source name.
func SortRanks(r []SourceRank) {
	sort.SliceStable(r, func(i, j int) bool {
		if r[i].Rank != r[j].Rank {
			return r[i].Rank > r[j].Rank
		}
		return r[i].Source < r[j].Source
	})
}

// Rank returns a source's rank (case-insensitive); unlisted sources rank 0.
func (p ReconcilePolicy) Rank(source string) int {
	for _, r := range p.Authority {
		if strings.EqualFold(r.Source, source) {
			return r.Rank
		}
	}
	return 0
}

// sameSource reports whether two sources are the same non-empty source.
func sameSource(a, b string) bool {
	return a != "" && b != "" && strings.EqualFold(a, b)
}

// Resolve decides whether a new value from newSource may replace a current
// value from oldSource. It returns true to supersede; false with the reason
// to flag the new value for a person instead.
//
//  1. RECENCY (or no policy): supersede.
//  2. The same non-empty source correcting its own fact: supersede, whatever
//     the mode.
//  3. REVIEW: flag.
//  4. AUTHORITY: supersede only when rank(new) > rank(old), strictly.
//
// An empty source on either side counts as a different source.
func (p ReconcilePolicy) Resolve(newSource, oldSource string) (bool, string) {
	switch p.Mode {
	case "", ModeRecency:
		return true, ""
	}
	if sameSource(newSource, oldSource) {
		return true, ""
	}
	switch p.Mode {
	case ModeReview:
		return false, fmt.Sprintf("cross-source conflict (%s vs %s) held for review under the REVIEW policy", showSource(newSource), showSource(oldSource))
	case ModeAuthority:
		nr, or := p.Rank(newSource), p.Rank(oldSource)
		if nr > or {
			return true, ""
		}
		return false, fmt.Sprintf("source %s (rank %d) does not outrank %s (rank %d) under the AUTHORITY policy", showSource(newSource), nr, showSource(oldSource), or)
	}
	// An unknown stored mode fails closed.
	return false, fmt.Sprintf("unknown reconcile mode %q: held for review", p.Mode)
}

func showSource(s string) string {
	if s == "" {
		return "(no source)"
	}
	return "'" + s + "'"
}

// FormatRanks renders ranks as the seed shows them: {'fhir': 10, 'agent': 1}.
func FormatRanks(r []SourceRank) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, sr := range r {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(PyRepr(sr.Source))
		b.WriteString(": ")
		b.WriteString(strconv.Itoa(sr.Rank))
	}
	b.WriteByte('}')
	return b.String()
}

// DescribeSet is the answer of set_reconcile_policy.
func (p ReconcilePolicy) DescribeSet() string {
	s := fmt.Sprintf("Reconciliation policy for this space set to %s.", p.Mode)
	if len(p.Authority) > 0 {
		s += "  authority ranks: " + FormatRanks(p.Authority)
	}
	return s
}

// DescribeGet is the answer of get_reconcile_policy; set is false for a
// space that never had a policy set.
func (p ReconcilePolicy) DescribeGet(set bool) string {
	if !set {
		return "Policy: RECENCY (default — newer assertion wins)."
	}
	s := "Policy: " + string(p.Mode)
	if len(p.Authority) > 0 {
		s += "\n  authority ranks: " + FormatRanks(p.Authority)
	}
	return s
}

// PyRepr quotes s the way the seeds show strings (Python's repr): single
// quotes unless s holds a single quote and no double quote; backslashes,
// the quote in use and control characters escaped. The result is always one
// line, so untrusted text cannot forge further lines of an answer.
func PyRepr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}
