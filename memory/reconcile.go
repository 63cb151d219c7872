package memory

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/countersign/countersign/policy"
)

// Memory's errors are *policy.Error (the error type the surfaces report):
// KindInvalid when the caller's input is at fault (400, Field names it),
// KindConflict when the stored state does not allow it (409), KindNotFound
// for no such fact (404).

func invalid(field, format string, args ...any) *policy.Error {
	return &policy.Error{Kind: policy.KindInvalid, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *policy.Error {
	return &policy.Error{Kind: policy.KindConflict, Msg: fmt.Sprintf(format, args...)}
}

// Op is the kind of write a statement is.
type Op int

// The write operations.
const (
	OpRemember Op = iota + 1 // an assertion: remember
	OpForget                 // a removal: forget
	OpEdit                   // a human edit of one fact: update_memory
)

// Input is one structured statement to reconcile. No model is involved:
// what happens is a function of the input, the declared slot, the space's
// live facts and its reconcile policy.
type Input struct {
	Op         Op
	Subject    string // as given; folded onto a declared slot or normalised
	Value      string // remember, edit: the value; forget: which item (optional)
	Said       string // the sentence that was said
	Confidence float64
	Source     string
	Kind       Kind
	Scope      string
	TimeRef    TimeRef
	Category   string          // the caller's metadata category
	Metadata   json.RawMessage // the caller's metadata object
	// Replaces names the current value (or list item) a remembered value
	// replaces; matched like forget's value.
	Replaces string
	// Trusted: the source is a trusted source, so the confirm gate is skipped.
	Trusted bool
	// Approver: the caller holds approve, so an edit of a confirm slot applies.
	Approver bool
	// Target is the fact an edit replaces (OpEdit).
	Target uint64
	// By is the caller, "name [id]"; ByID and ByName identify it.
	By, ByID, ByName string
}

// State is what a plan reads: the subject's live facts (ACTIVE and
// FLAGGED_CONFLICT, every scope, by id), its archived facts (for a
// past-tense statement), the fact an edit targets, and the space's policy.
type State struct {
	Live   []*Fact
	Past   []*Fact
	Target *Fact // OpEdit
	Policy policy.ReconcilePolicy
}

// Plan is what reconciliation decided, before it is written.
type Plan struct {
	Action   Action
	Subject  string
	Value    string // the value as reported: "Stored: [ACTION] subject = value"
	Existing *Fact  // DEDUP: the fact that already holds it
	Target   *Fact  // the fact superseded, retracted, or targeted by a held change
	New      *Fact  // the row to write; nil for DEDUP and SKIP
	Held     bool   // New is a held change (a proposal) awaiting a person
}

// Resolved is a subject resolved against the declared slots.
type Resolved struct {
	Subject  string // the canonical subject: the slot's name, or the folded subject
	Slot     Slot   // the declared slot (zero when undeclared)
	Declared bool
}

// Resolve folds a subject onto a declared slot (aliases, case and
// separators) or, undeclared, onto its folded form.
func (o *Options) Resolve(subject string) Resolved {
	if s, ok := o.Schema.Lookup(subject); ok {
		return Resolved{Subject: s.Name, Slot: s, Declared: true}
	}
	return Resolved{Subject: Fold(subject)}
}

// Stateful reports whether a fact of this subject holds until replaced: a
// state, or any fact on a declared single-valued slot (where an event is a
// change of state, so the slot keeps one value).
func (r Resolved) Stateful(f *Fact) bool {
	return f.Kind != KindEvent || (r.Declared && !r.Slot.Multi)
}

// Multi reports whether the subject is a declared list slot.
func (r Resolved) Multi() bool { return r.Declared && r.Slot.Multi }

// Confirm reports whether the subject is a declared confirm slot.
func (r Resolved) Confirm() bool { return r.Declared && r.Slot.Confirm }

// ListIdentity is a list item's identity: the canonical value up to the
// first " — ", " – " or " - ", or the first space followed by a digit,
// lower-cased. "Warfarin 5 mg PO daily" is "warfarin", so a change of dose
// replaces the warfarin item and "stop the metformin" finds metformin.
func ListIdentity(v string) string {
	s := Canonical(v)
	for _, sep := range []string{" — ", " – ", " - "} {
		if i := strings.Index(s, sep); i >= 0 {
			s = s[:i]
		}
	}
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ' ' && s[i+1] >= '0' && s[i+1] <= '9' {
			s = s[:i]
			break
		}
	}
	return strings.TrimSpace(s)
}

// containsWords reports whether phrase occurs in text on word boundaries
// (case-insensitive; both already canonical).
func containsWords(text, phrase string) bool {
	if phrase == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(text[from:], phrase)
		if i < 0 {
			return false
		}
		i += from
		j := i + len(phrase)
		before := i == 0 || !isWordByte(text, i-1, true)
		after := j == len(text) || !isWordByte(text, j, false)
		if before && after {
			return true
		}
		from = i + 1
	}
}

// isWordByte reports whether the rune ending (back) or starting (!back) at
// byte i of s is a letter or digit.
func isWordByte(s string, i int, back bool) bool {
	var r rune
	if back {
		k := i
		for k > 0 && s[k]&0xC0 == 0x80 {
			k--
		}
		r = []rune(s[k : i+1])[0]
	} else {
		r = []rune(s[i:])[0]
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// MatchItems finds the facts a query names: an exact (canonical) value
// first; else the same list identity; else the facts whose identity occurs
// as whole words in the query ("stop the metformin"). It returns the
// matches of the first rule that finds any.
func MatchItems(facts []*Fact, query string) []*Fact {
	q := Canonical(query)
	if q == "" {
		return nil
	}
	var out []*Fact
	for _, f := range facts {
		if Canonical(f.Value) == q {
			out = append(out, f)
		}
	}
	if len(out) > 0 {
		return out
	}
	qi := ListIdentity(query)
	for _, f := range facts {
		if id := ListIdentity(f.Value); id != "" && id == qi {
			out = append(out, f)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, f := range facts {
		if containsWords(q, ListIdentity(f.Value)) {
			out = append(out, f)
		}
	}
	return out
}

func quoteValues(facts []*Fact) string {
	parts := make([]string, len(facts))
	for i, f := range facts {
		parts[i] = fmt.Sprintf("#%d %s", f.ID, policy.PyRepr(f.Value))
	}
	return strings.Join(parts, ", ")
}

// filter returns the facts for which keep is true.
func filter(facts []*Fact, keep func(*Fact) bool) []*Fact {
	var out []*Fact
	for _, f := range facts {
		if keep(f) {
			out = append(out, f)
		}
	}
	return out
}

// Plan decides what a statement does, purely from the input and state. The
// order of the checks:
//
//  1. fold the subject onto a declared slot; normalise the value (verbatim
//     keeps it byte for byte); the slot's category stamps the fact;
//  2. time_ref past: ARCHIVE (or DEDUP if already archived);
//  3. the same value already ACTIVE in the same scope: DEDUP;
//  4. find the value it replaces (the rival): a named item (replaces), the
//     list item with the same identity, or the single value of the slot;
//     events never replace anything, except on a declared single-valued
//     slot;
//  5. no rival: ADD, or COEXIST beside another scope; a future-tense
//     statement, or a COEXIST below 0.7, is held (FLAG);
//  6. a rival makes it a change — gated on this effective action, whatever
//     the caller called it: held when future-tense, on a confirm slot
//     (unless the source is trusted), below confidence 0.7, or when the
//     space's reconcile policy says the source may not override; otherwise
//     SUPERSEDE.
//
// The same held change proposed twice is queued once (DEDUP).
func (o *Options) Plan(in Input, st State, now time.Time) (Plan, error) {
	switch in.Op {
	case OpRemember:
		return o.planRemember(in, st, now)
	case OpForget:
		return o.planForget(in, st, now)
	case OpEdit:
		return o.planEdit(in, st, now)
	}
	return Plan{}, fmt.Errorf("memory: unknown op %d", in.Op)
}

func scopeOf(in Input) string {
	if in.Scope == "" {
		return DefaultScope
	}
	return in.Scope
}

// newFact builds the row a plan writes, stamped with provenance.
func (o *Options) newFact(in Input, r Resolved, value string, now time.Time) *Fact {
	cat := in.Category
	if r.Declared && r.Slot.Category != "" {
		cat = r.Slot.Category
	}
	kind := in.Kind
	if kind == "" {
		kind = KindState
	}
	return &Fact{
		Subject: r.Subject, Value: value, Scope: scopeOf(in), Kind: kind,
		Confidence: in.Confidence, Source: in.Source, Said: in.Said, Category: cat,
		Metadata: in.Metadata, SetAt: now, SetBy: in.By,
	}
}

// held turns n into a held change of target (nil for an ADD), unless the
// same change is already held: then the plan is a DEDUP of it.
func held(p Plan, st State, n *Fact, pending Action, target *Fact, why string, in Input, now time.Time) Plan {
	var tid uint64
	if target != nil {
		tid = target.ID
	}
	for _, f := range st.Live {
		if !f.Open() || f.Pending != pending || f.Supersedes != tid || f.Scope != n.Scope {
			continue
		}
		if pending == ActionRetract || Canonical(f.Value) == Canonical(n.Value) {
			p.Action, p.Existing, p.Target, p.Value = ActionDedup, f, target, f.Value
			return p
		}
	}
	n.Status = StatusFlagged
	n.Pending = pending
	n.Held = why
	n.Supersedes = tid
	n.ProposedAt = now
	n.ProposerID, n.ProposerName = in.ByID, in.ByName
	if target != nil {
		n.Target = target.Value
	}
	p.Action, p.New, p.Target, p.Held = ActionFlag, n, target, true
	return p
}

// Reasons a change is held, besides a confirm slot (HeldConfirm).
const (
	HeldFuture = "future-tense statement: not applied until it is true"
)

// HeldLowConfidence is the held reason of a change below AutoThreshold.
func HeldLowConfidence(conf float64) string {
	return fmt.Sprintf("confidence %s is below %s, so the change was not applied", policy.Conf(conf), policy.Limit(AutoThreshold))
}

func (o *Options) planRemember(in Input, st State, now time.Time) (Plan, error) {
	r := o.Resolve(in.Subject)
	value := NormalizeValue(in.Value, r.Declared && r.Slot.Verbatim)
	canon := Canonical(value)
	scope := scopeOf(in)
	p := Plan{Subject: r.Subject, Value: value}
	n := o.newFact(in, r, value, now)

	if in.TimeRef == TimePast {
		for _, f := range st.Past {
			if f.Archived && f.Scope == scope && Canonical(f.Value) == canon {
				p.Action, p.Existing = ActionDedup, f
				return p, nil
			}
		}
		n.Status, n.Archived = StatusHistorical, true
		n.RetiredAt = now
		p.Action, p.New = ActionArchive, n
		return p, nil
	}

	active := filter(st.Live, func(f *Fact) bool { return f.Status == StatusActive && f.Scope == scope })
	for _, f := range active {
		if Canonical(f.Value) == canon {
			p.Action, p.Existing = ActionDedup, f
			return p, nil
		}
	}
	states := filter(active, r.Stateful)

	var target *Fact
	switch {
	case in.Replaces != "":
		m := MatchItems(states, in.Replaces)
		switch {
		case len(m) == 0:
			return Plan{}, conflict("Nothing matching %s to replace in %s (that value isn't currently stored). Check the current value with check_before_act or history, and remember without replaces to add it.", policy.PyRepr(in.Replaces), r.Subject)
		case len(m) > 1:
			return Plan{}, invalid("replaces", "%s matches %d current values of %s (%s); pass the exact value to replace", policy.PyRepr(in.Replaces), len(m), r.Subject, quoteValues(m))
		}
		target = m[0]
	case r.Multi():
		if in.Kind == KindEvent {
			break
		}
		ident := ListIdentity(value)
		m := filter(states, func(f *Fact) bool { return ident != "" && ListIdentity(f.Value) == ident })
		if len(m) > 1 {
			return Plan{}, invalid("replaces", "%d current items of %s share the identity %s (%s); pass replaces with the exact value this one replaces", len(m), r.Subject, policy.PyRepr(ident), quoteValues(m))
		}
		if len(m) == 1 {
			target = m[0]
		}
	case in.Kind == KindEvent && !r.Declared:
		// Events are never superseded and supersede nothing (on a declared
		// single-valued slot an event is a change of state: the default).
	default:
		if len(states) > 0 {
			target = states[len(states)-1]
		}
	}

	if target == nil {
		p.Action = ActionAdd
		if !r.Multi() && r.Stateful(n) {
			for _, f := range st.Live {
				if f.Status == StatusActive && r.Stateful(f) && f.Scope != scope {
					p.Action = ActionCoexist
					break
				}
			}
		}
		switch {
		case in.TimeRef == TimeFuture:
			return held(p, st, n, ActionAdd, nil, HeldFuture, in, now), nil
		case p.Action == ActionCoexist && in.Confidence < AutoThreshold:
			return held(p, st, n, ActionAdd, nil, HeldLowConfidence(in.Confidence), in, now), nil
		}
		n.Status = StatusActive
		p.New = n
		return p, nil
	}

	switch {
	case in.TimeRef == TimeFuture:
		return held(p, st, n, ActionSupersede, target, HeldFuture, in, now), nil
	case r.Confirm() && !in.Trusted:
		return held(p, st, n, ActionSupersede, target, HeldConfirm, in, now), nil
	case in.Confidence < AutoThreshold:
		return held(p, st, n, ActionSupersede, target, HeldLowConfidence(in.Confidence), in, now), nil
	}
	if ok, why := st.Policy.Resolve(in.Source, target.Source); !ok {
		return held(p, st, n, ActionSupersede, target, why, in, now), nil
	}
	n.Status = StatusActive
	n.Supersedes = target.ID
	p.Action, p.New, p.Target = ActionSupersede, n, target
	return p, nil
}

func (o *Options) planForget(in Input, st State, now time.Time) (Plan, error) {
	r := o.Resolve(in.Subject)
	scope := scopeOf(in)
	p := Plan{Subject: r.Subject}
	states := filter(st.Live, func(f *Fact) bool {
		return f.Status == StatusActive && f.Scope == scope && r.Stateful(f)
	})
	var m []*Fact
	switch {
	case in.Value != "":
		m = MatchItems(states, in.Value)
	case len(states) <= 1:
		m = states
	default:
		if in.Said != "" {
			m = MatchItems(states, in.Said)
		}
		if len(m) != 1 {
			return Plan{}, invalid("value", "%s holds %d values (%s); pass value to say which one to remove", r.Subject, len(states), quoteValues(states))
		}
	}
	switch {
	case len(m) == 0:
		p.Action = ActionSkip
		return p, nil
	case len(m) > 1:
		return Plan{}, invalid("value", "%s matches %d current values of %s (%s); pass the exact value to remove", policy.PyRepr(in.Value), len(m), r.Subject, quoteValues(m))
	}
	target := m[0]
	p.Value = target.Value
	n := o.newFact(in, r, target.Value, now)
	n.Scope, n.Kind, n.Category = target.Scope, target.Kind, target.Category
	if n.Confidence < 0.9 {
		n.Confidence = 0.9 // a removal someone asked for is definite
	}
	if r.Confirm() && !in.Trusted {
		return held(p, st, n, ActionRetract, target, HeldConfirm, in, now), nil
	}
	n.Status, n.Tombstone = StatusHistorical, true
	n.Value = Tombstone(target.Value)
	n.Supersedes = target.ID
	n.RetiredAt = now
	p.Action, p.New, p.Target = ActionRetract, n, target
	return p, nil
}

// Tombstone is the value of a retraction's HISTORICAL row.
func Tombstone(v string) string { return "(retracted: " + v + ")" }

func (o *Options) planEdit(in Input, st State, now time.Time) (Plan, error) {
	t := st.Target
	if t == nil {
		return Plan{}, &policy.Error{Kind: policy.KindNotFound, Msg: NoMemory(in.Target)}
	}
	r := o.Resolve(t.Subject)
	p := Plan{Subject: t.Subject}
	if t.Status != StatusActive {
		what := "it is " + string(t.Status)
		if t.Open() {
			what = "it is a change awaiting approval; decide it with confirm_change or reject_change"
		}
		return Plan{}, conflict("#%d is not a current value, so it cannot be edited: %s. Edit the current value instead (history shows it).", t.ID, what)
	}
	value := NormalizeValue(in.Value, r.Declared && r.Slot.Verbatim)
	p.Value = value
	if Canonical(value) == Canonical(t.Value) {
		p.Action, p.Existing, p.Target = ActionDedup, t, t
		return p, nil
	}
	n := &Fact{
		Subject: t.Subject, Value: value, Scope: t.Scope, Kind: t.Kind,
		Confidence: t.Confidence, Source: t.Source, Said: "(edit) " + value,
		Category: t.Category, Metadata: t.Metadata, SetAt: now, SetBy: in.By,
	}
	if r.Confirm() && !in.Approver {
		return held(p, st, n, ActionSupersede, t, HeldConfirm, in, now), nil
	}
	n.Status = StatusActive
	n.Supersedes = t.ID
	p.Action, p.New, p.Target = ActionSupersede, n, t
	return p, nil
}
