package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Verdict is the outcome of a safety gate.
type Verdict string

// The verdicts. check_before_act answers SAFE or BLOCKED; safe_recall
// answers ANSWERED or WITHHELD.
const (
	VerdictSafe     Verdict = "SAFE"
	VerdictBlocked  Verdict = "BLOCKED"
	VerdictAnswered Verdict = "ANSWERED"
	VerdictWithheld Verdict = "WITHHELD"
)

// Fact statuses as the safety gate reads them (the memory package's values).
const (
	StatusActive  = "ACTIVE"
	StatusFlagged = "FLAGGED_CONFLICT"
)

// The fixed reason lines (without the bullet).
const (
	ReasonNoActive  = "no active fact for this subject — nothing safe to act on"
	ReasonFlagged   = "unresolved conflict (FLAGGED) — the value is disputed"
	ReasonNoSupport = "no current fact supports this — nothing safe to act on"
)

// FactState is what the safety gate reads of one fact.
type FactState struct {
	ID         uint64
	Subject    string
	Value      string
	Status     string // ACTIVE, FLAGGED_CONFLICT, SUPERSEDED or HISTORICAL
	Confidence float64
	SetAt      time.Time
	// Supersedes is non-zero when the fact replaced an earlier value; only
	// such a fact can trip the recent-change window.
	Supersedes uint64
}

// SafetyPolicy is the policy check_before_act and safe_recall share.
type SafetyPolicy struct {
	MinConfidence  float64 // a fact below this blocks
	RequireActive  bool    // a retired fact blocks
	BlockOnFlagged bool    // a flagged fact (conflict or pending approval) blocks
	// MaxStalenessDays blocks a fact last set more than this many days ago;
	// zero or below turns the window off.
	MaxStalenessDays float64
	// BlockOnRecentChangeDays blocks a fact that superseded an earlier value
	// less than this many days ago; zero or below turns the window off.
	BlockOnRecentChangeDays float64
}

// DefaultSafetyPolicy is the documented default: min_confidence 0.7,
// require_active and block_on_flagged on, both day windows off.
func DefaultSafetyPolicy() SafetyPolicy {
	return SafetyPolicy{MinConfidence: 0.7, RequireActive: true, BlockOnFlagged: true}
}

// reasonConfidence is the low-confidence reason line.
func reasonConfidence(conf, min float64) string {
	return fmt.Sprintf("confidence %s < required %s", Conf(conf), Limit(min))
}

// reasonStale is the staleness reason line; the age is truncated to whole days.
func reasonStale(ageDays, limit float64) string {
	return fmt.Sprintf("stale: last set %dd ago > %sd limit", int64(math.Trunc(ageDays)), Limit(limit))
}

// reasonRecent is the recent-change reason line; the age is rounded to two
// decimals and always shows one ("0.0d", "0.25d", "1.5d").
func reasonRecent(ageDays float64) string {
	return fmt.Sprintf("recently changed %sd ago — may be unsettled", Conf(ageDays))
}

// reasonRetired is the reason line of a retired fact.
func reasonRetired(status string) string {
	return fmt.Sprintf("not current (status %s) — acting on a retired value", status)
}

// reasonFlaggedSubject is safe_recall's line for a subject in context that
// has a flagged fact.
func reasonFlaggedSubject(subject string) string {
	return fmt.Sprintf("unresolved conflict on '%s' — the value is disputed", subject)
}

// Conf formats a number the way the seeds show confidences: rounded to two
// decimals (half to even, on the exact value), trailing zeros dropped, at
// least one decimal kept: 0.5, 0.95, 1.0, 0.33.
func Conf(x float64) string {
	s := strconv.FormatFloat(x, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	if strings.HasSuffix(s, ".") {
		s += "0"
	}
	if s == "-0.0" {
		s = "0.0"
	}
	return s
}

// Limit formats a policy limit as it was passed: 0.7, 90, 1.5.
func Limit(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// ageDays is the fact's age at now in days; a set time in the future counts
// as just set.
func ageDays(setAt, now time.Time) float64 {
	d := now.Sub(setAt)
	if d < 0 {
		d = 0
	}
	return d.Hours() / 24
}

// factReasons returns the reasons one fact is not safe to act on. A flagged
// fact is not current: it contributes only the flagged reason (when
// block_on_flagged), never its confidence or age.
func factReasons(f FactState, p SafetyPolicy, now time.Time) []string {
	if f.Status == StatusFlagged {
		if p.BlockOnFlagged {
			return []string{ReasonFlagged}
		}
		return nil
	}
	var out []string
	if p.RequireActive && f.Status != StatusActive {
		out = append(out, reasonRetired(f.Status))
	}
	if f.Confidence < p.MinConfidence {
		out = append(out, reasonConfidence(f.Confidence, p.MinConfidence))
	}
	age := ageDays(f.SetAt, now)
	if p.MaxStalenessDays > 0 && age > p.MaxStalenessDays {
		out = append(out, reasonStale(age, p.MaxStalenessDays))
	}
	if p.BlockOnRecentChangeDays > 0 && f.Supersedes != 0 && age < p.BlockOnRecentChangeDays {
		out = append(out, reasonRecent(age))
	}
	return out
}

// reasonSet collects reason lines, each once, in the order first found.
type reasonSet struct {
	seen map[string]bool
	list []string
}

func (r *reasonSet) add(lines ...string) {
	for _, l := range lines {
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		if !r.seen[l] {
			r.seen[l] = true
			r.list = append(r.list, l)
		}
	}
}

// CheckBeforeAct is the verdict on acting on a subject, given every ACTIVE
// and FLAGGED_CONFLICT fact of it (in id order). No active fact blocks;
// otherwise each fact is checked against the policy. Each reason is listed
// once, however many facts give it.
func CheckBeforeAct(facts []FactState, p SafetyPolicy, now time.Time) (Verdict, []string) {
	var rs reasonSet
	active := false
	for _, f := range facts {
		if f.Status == StatusActive {
			active = true
		}
	}
	if !active {
		rs.add(ReasonNoActive)
	}
	for _, f := range facts {
		rs.add(factReasons(f, p, now)...)
	}
	if len(rs.list) == 0 {
		return VerdictSafe, nil
	}
	return VerdictBlocked, rs.list
}

// SafeRecall is the verdict on an answer built from context, the facts
// placed behind it, where flaggedSubjects are the subjects in context that
// also have a flagged fact. An empty context withholds the answer.
func SafeRecall(context []FactState, flaggedSubjects []string, p SafetyPolicy, now time.Time) (Verdict, []string) {
	var rs reasonSet
	if len(context) == 0 {
		rs.add(ReasonNoSupport)
	}
	for _, f := range context {
		rs.add(factReasons(f, p, now)...)
	}
	if p.BlockOnFlagged {
		for _, s := range flaggedSubjects {
			rs.add(reasonFlaggedSubject(s))
		}
	}
	if len(rs.list) == 0 {
		return VerdictAnswered, nil
	}
	return VerdictWithheld, rs.list
}

// RenderCheck is check_before_act's text. current holds "subject = value"
// for each active value (shown on SAFE).
func RenderCheck(subject string, v Verdict, reasons, current []string) string {
	if v == VerdictSafe {
		return fmt.Sprintf("✅ SAFE to act on '%s'.\n  current: %s", subject, strings.Join(current, "; "))
	}
	return fmt.Sprintf("⛔ BLOCKED — do NOT act on '%s':%s", subject, bullets(reasons))
}

// RenderWithheld is safe_recall's text when the answer is withheld.
func RenderWithheld(reasons []string) string {
	return "⛔ WITHHELD — not safe to act on this answer:" + bullets(reasons)
}

func bullets(reasons []string) string {
	var b strings.Builder
	for _, r := range reasons {
		b.WriteString("\n  • ")
		b.WriteString(r)
	}
	return b.String()
}
