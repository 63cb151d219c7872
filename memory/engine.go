package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// WithDefaults returns o with the documented defaults filled in: critical
// budget 200, recall context 40.
func (o Options) WithDefaults() Options {
	if o.CriticalBudget <= 0 {
		o.CriticalBudget = 200
	}
	if o.RecallContext <= 0 {
		o.RecallContext = 40
	}
	return o
}

// Trusted reports whether source is a trusted source (case-insensitive).
func (o *Options) Trusted(source string) bool {
	if source == "" {
		return false
	}
	for _, t := range o.TrustedSources {
		if strings.EqualFold(strings.TrimSpace(t), source) {
			return true
		}
	}
	return false
}

// NoMemory is the answer for an unknown fact id.
func NoMemory(id uint64) string { return fmt.Sprintf("No memory with id #%d.", id) }

// NotAwaiting is confirm_change's answer for an id that is not pending: it
// was decided already, or it went stale.
func NotAwaiting(id uint64) string {
	return fmt.Sprintf("#%d is not awaiting approval. It may have been decided already, or the value it would have replaced has since changed — in which case the proposal is stale and should be re-made against the current value.", id)
}

// NotAwaitingShort is reject_change's answer for an id that is not pending.
func NotAwaitingShort(id uint64) string { return fmt.Sprintf("#%d is not awaiting approval.", id) }

// Write reconciles one statement in tx and writes what it decided: the new
// row, the retired rival, the indexes. The returned plan's New (when not
// nil) carries its id.
func (o *Options) Write(tx kv.Tx, sp Space, in Input, now time.Time) (Plan, error) {
	if err := sp.Check(); err != nil {
		return Plan{}, invalid("", "%v", err)
	}
	var st State
	var err error
	var subject string
	if in.Op == OpEdit {
		if st.Target, err = Load(tx, sp, in.Target); err != nil {
			return Plan{}, err
		}
		if st.Target == nil {
			return Plan{}, &policy.Error{Kind: policy.KindNotFound, Msg: NoMemory(in.Target)}
		}
		subject = st.Target.Subject
	} else {
		subject = o.Resolve(in.Subject).Subject
	}
	if subject == "" {
		return Plan{}, invalid("subject", "must contain a letter or digit")
	}
	if st.Live, err = Live(tx, sp, subject); err != nil {
		return Plan{}, err
	}
	if in.TimeRef == TimePast {
		hist, err := History(tx, sp, subject)
		if err != nil {
			return Plan{}, err
		}
		st.Past = filter(hist, func(f *Fact) bool { return f.Archived })
	}
	if st.Policy, _, err = LoadPolicy(tx, sp); err != nil {
		return Plan{}, err
	}
	p, err := o.Plan(in, st, now)
	if err != nil {
		return Plan{}, err
	}
	if p.New == nil {
		return p, nil
	}
	id, err := nextID(tx, sp)
	if err != nil {
		return Plan{}, err
	}
	p.New.ID, p.New.Space = id, sp
	if err := putNew(tx, p.New); err != nil {
		return Plan{}, err
	}
	if !p.Held && p.Target != nil && (p.Action == ActionSupersede || p.Action == ActionRetract) {
		p.Target.Status, p.Target.RetiredAt = StatusSuperseded, now
		if err := put(tx, p.Target); err != nil {
			return Plan{}, err
		}
	}
	return p, nil
}

// AttachItem records the chat item shown for a proposal.
func AttachItem(tx kv.Tx, f *Fact, itemID uint64) error {
	f.ItemID = itemID
	return put(tx, f)
}

// Decider is who decides a proposal: the authenticated caller, and the
// notes it passed.
type Decider struct {
	By     string // "name [id]": the recorded approver
	Note   string // decided_by, only a note
	Reason string
	// Assurance is how By was authenticated for the decision.
	Assurance policy.Assurance
	// Value, when set on a confirmation, is the approver's edit: the value
	// to confirm instead of the one proposed (Confirm checks it like any
	// value of the slot).
	Value *string
}

// Decision is the outcome of confirming or rejecting a proposal.
type Decision struct {
	Proposal *Fact
	Target   *Fact      // the fact replaced or removed (nil for an ADD)
	Applied  Action     // SUPERSEDE, RETRACT or ADD when confirmed
	Closed   Resolution // stale or expired when it was closed instead
	Why      string     // why it was closed
}

// ClosureReason reports whether an open proposal can no longer be
// confirmed: expired (older than ProposalMaxAge) or stale (the value it
// would replace is no longer ACTIVE, or for an ADD the slot has since been
// filled). It returns "" when the proposal still stands.
func (o *Options) ClosureReason(tx kv.Tx, f *Fact, now time.Time) (Resolution, string, error) {
	if o.ProposalMaxAge > 0 && !now.Before(f.ProposedAt.Add(o.ProposalMaxAge)) {
		return ResolvedExpired, fmt.Sprintf("nobody decided within %s", o.ProposalMaxAge), nil
	}
	if f.Supersedes != 0 {
		t, err := Load(tx, f.Space, f.Supersedes)
		if err != nil {
			return "", "", err
		}
		if t == nil {
			return ResolvedStale, fmt.Sprintf("#%d no longer exists", f.Supersedes), nil
		}
		if t.Status != StatusActive {
			return ResolvedStale, fmt.Sprintf("#%d is now %s", t.ID, t.Status), nil
		}
		return "", "", nil
	}
	live, err := Live(tx, f.Space, f.Subject)
	if err != nil {
		return "", "", err
	}
	r := o.Resolve(f.Subject)
	for _, a := range live {
		if a.Status != StatusActive || a.Scope != f.Scope {
			continue
		}
		switch {
		case Canonical(a.Value) == Canonical(f.Value):
			return ResolvedStale, fmt.Sprintf("#%d already holds that value", a.ID), nil
		case r.Multi() && ListIdentity(a.Value) != "" && ListIdentity(a.Value) == ListIdentity(f.Value):
			return ResolvedStale, fmt.Sprintf("#%d now holds that item", a.ID), nil
		case !r.Multi() && r.Stateful(a) && r.Stateful(f):
			return ResolvedStale, fmt.Sprintf("#%d has since set %s", a.ID, f.Subject), nil
		}
	}
	return "", "", nil
}

// EditedValue checks an approver's edit of open proposal f's value the
// way reconciliation treats any value of the slot, and returns it as it
// would be stored (NormalizeValue: whitespace normalised unless the slot
// is verbatim). A removal has no value to edit; the edited value must be
// a change (not the value it replaces, nor one already current in the
// scope) and, in a list slot, the same item as the one proposed (its
// ListIdentity: "apixaban 2.5mg" for "apixaban 5mg", never "rivaroxaban"),
// so an edit changes the detail, never which item is added or replaced. A
// value equal to the proposed one is returned as it is: no edit.
func (o *Options) EditedValue(tx kv.Tx, f *Fact, value string) (string, error) {
	if f.Pending == ActionRetract {
		return "", invalid("value", "#%d removes a value of %s: there is no value to edit. Confirm or reject the removal as it is", f.ID, f.Subject)
	}
	r := o.Resolve(f.Subject)
	v := NormalizeValue(value, r.Declared && r.Slot.Verbatim)
	if strings.TrimSpace(v) == "" {
		return "", invalid("value", "is empty: give the value to confirm, or reject #%d", f.ID)
	}
	if v == f.Value {
		return v, nil
	}
	var target *Fact
	if f.Supersedes != 0 {
		t, err := Load(tx, f.Space, f.Supersedes)
		if err != nil {
			return "", err
		}
		target = t
	}
	if target != nil && Canonical(target.Value) == Canonical(v) {
		return "", invalid("value", "%q is the current value of %s (#%d): confirming it would change nothing. Reject #%d to keep the current value", EscapeBreaks(v), f.Subject, target.ID, f.ID)
	}
	if r.Multi() && ListIdentity(f.Value) != ListIdentity(v) {
		return "", invalid("value", "#%d proposes the %s item of %s, and %q is another item: an edit changes the item's detail (a dose), not which item it is. Reject #%d and remember the other item instead", f.ID, EscapeBreaks(ListIdentity(f.Value)), f.Subject, EscapeBreaks(v), f.ID)
	}
	live, err := Live(tx, f.Space, f.Subject)
	if err != nil {
		return "", err
	}
	for _, a := range live {
		if a.Status != StatusActive || a.Scope != f.Scope || (target != nil && a.ID == target.ID) {
			continue
		}
		switch {
		case Canonical(a.Value) == Canonical(v):
			return "", invalid("value", "#%d already holds %q in %s: confirming it would store it twice. Reject #%d instead", a.ID, EscapeBreaks(v), f.Subject, f.ID)
		case r.Multi() && ListIdentity(v) != "" && ListIdentity(a.Value) == ListIdentity(v):
			return "", invalid("value", "#%d already holds the %s item of %s: edit that one instead, or reject #%d", a.ID, EscapeBreaks(ListIdentity(v)), f.Subject, f.ID)
		}
	}
	return v, nil
}

// Close closes an open proposal as stale or expired: HISTORICAL, with the
// resolution and why. The current value is untouched.
func Close(tx kv.Tx, f *Fact, res Resolution, why string, now time.Time) error {
	f.Status, f.Resolved, f.Reason = StatusHistorical, res, why
	f.RetiredAt, f.DecidedAt = now, now
	return put(tx, f)
}

func loadOpen(tx kv.Tx, sp Space, id uint64, notAwaiting string) (*Fact, error) {
	if err := sp.Check(); err != nil {
		return nil, invalid("", "%v", err)
	}
	f, err := Load(tx, sp, id)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, &policy.Error{Kind: policy.KindNotFound, Msg: notAwaiting}
	}
	if !f.Open() {
		return f, &policy.Error{Kind: policy.KindConflict, Msg: notAwaiting}
	}
	return f, nil
}

// LoadOpen returns proposal id if it is open; otherwise an policy.KindNotFound or
// policy.KindConflict error with confirm_change's "not awaiting approval" wording.
func LoadOpen(tx kv.Tx, sp Space, id uint64) (*Fact, error) {
	return loadOpen(tx, sp, id, NotAwaiting(id))
}

// Confirm applies an open proposal. A proposal that is stale or expired is
// closed instead (Decision.Closed set, no error): the caller commits the
// closure and then reports it as a conflict.
func (o *Options) Confirm(tx kv.Tx, sp Space, id uint64, d Decider, now time.Time) (Decision, error) {
	f, err := LoadOpen(tx, sp, id)
	if err != nil {
		return Decision{Proposal: f}, err
	}
	res, why, err := o.ClosureReason(tx, f, now)
	if err != nil {
		return Decision{}, err
	}
	if res != "" {
		if err := Close(tx, f, res, why, now); err != nil {
			return Decision{}, err
		}
		return Decision{Proposal: f, Closed: res, Why: why}, nil
	}
	if d.Value != nil {
		v, err := o.EditedValue(tx, f, *d.Value)
		if err != nil {
			return Decision{}, err
		}
		if v != f.Value {
			f.ProposedValue, f.ProposedSHA256 = f.Value, ValueSHA256(f.Value)
			f.Value, f.ApprovedSHA256 = v, ValueSHA256(v)
			f.Edited, f.EditedBy = true, d.By
		}
	}
	dec := Decision{Proposal: f, Applied: f.Pending}
	if f.Supersedes != 0 {
		t, err := Load(tx, sp, f.Supersedes)
		if err != nil {
			return Decision{}, err
		}
		t.Status, t.RetiredAt = StatusSuperseded, now
		if err := put(tx, t); err != nil {
			return Decision{}, err
		}
		dec.Target = t
	}
	switch f.Pending {
	case ActionRetract:
		f.Status, f.Tombstone, f.RetiredAt = StatusHistorical, true, now
		f.Value = Tombstone(dec.Target.Value)
	default: // SUPERSEDE, ADD
		f.Status = StatusActive
	}
	f.SetAt = now
	f.Resolved, f.DecidedBy, f.DecidedAt, f.Assurance = ResolvedConfirmed, d.By, now, d.Assurance
	f.Note, f.Reason = d.Note, d.Reason
	return dec, put(tx, f)
}

// Reject discards an open proposal: it is kept as HISTORICAL and the
// current value is unchanged. A proposal whose target has changed since may
// still be rejected: discarding it is always safe.
func (o *Options) Reject(tx kv.Tx, sp Space, id uint64, d Decider, now time.Time) (Decision, error) {
	f, err := loadOpen(tx, sp, id, NotAwaitingShort(id))
	if err != nil {
		return Decision{Proposal: f}, err
	}
	f.Status, f.RetiredAt = StatusHistorical, now
	f.Resolved, f.DecidedBy, f.DecidedAt, f.Assurance = ResolvedRejected, d.By, now, d.Assurance
	f.Note, f.Reason = d.Note, d.Reason
	return Decision{Proposal: f}, put(tx, f)
}

// SweepOpen examines up to maxScan open proposals after key after (nil: from
// the start) and closes, as stale or expired, up to maxClose of them. It
// returns the closed proposals, the key to resume after, and whether any
// remain to examine.
func (o *Options) SweepOpen(tx kv.Tx, after []byte, now time.Time, maxScan, maxClose int) ([]*Fact, []byte, bool, error) {
	var from []byte
	if after != nil {
		from = append(bytes.Clone(after), 0) // the smallest key after `after`
	}
	type entry struct {
		key []byte
		sp  Space
		id  uint64
	}
	var batch []entry
	more := false
	err := tx.Ascend(bucketOpen, from, nil, func(k, v []byte) error {
		if len(batch) >= maxScan {
			more = true
			return kv.ErrStop
		}
		var e openEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return err
		}
		batch = append(batch, entry{key: bytes.Clone(k), sp: e.Space, id: e.ID})
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	var closed []*Fact
	var last []byte
	for _, e := range batch {
		if len(closed) >= maxClose {
			more = true
			break
		}
		last = e.key
		f, err := Load(tx, e.sp, e.id)
		if err != nil {
			return nil, nil, false, err
		}
		if f == nil || !f.Open() {
			// The index outlived its proposal: repair it.
			if err := tx.Delete(bucketOpen, e.key); err != nil {
				return nil, nil, false, err
			}
			continue
		}
		res, why, err := o.ClosureReason(tx, f, now)
		if err != nil {
			return nil, nil, false, err
		}
		if res == "" {
			continue
		}
		if err := Close(tx, f, res, why, now); err != nil {
			return nil, nil, false, err
		}
		closed = append(closed, f)
	}
	return closed, last, more, nil
}
