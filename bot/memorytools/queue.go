package memorytools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// pendingLines loads the space's open proposals with their targets' values.
func pendingLines(tx kv.Tx, sp memory.Space) ([]memory.PendingLine, error) {
	open, err := memory.OpenProposals(tx, sp)
	if err != nil {
		return nil, err
	}
	lines := make([]memory.PendingLine, 0, len(open))
	for _, f := range open {
		// Current is the value the proposal was made against: the
		// target's, or the snapshot taken when proposed if the target is
		// gone. A target no longer ACTIVE makes the proposal stale, and it
		// is listed as such with that value (the sweeper's rule).
		l := memory.PendingLine{Fact: f, Current: f.Target, TargetActive: true}
		if f.Supersedes != 0 {
			t, err := memory.Load(tx, sp, f.Supersedes)
			if err != nil {
				return nil, err
			}
			if t != nil {
				l.Current = t.Value
			}
			l.TargetActive = t != nil && t.Status == memory.StatusActive
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// pendingData is one proposal in pending_changes' structured answer.
type pendingData struct {
	MemoryID uint64 `json:"memory_id"`
	Change   string `json:"change"` // REPLACE, REMOVE or ADD
	Subject  string `json:"subject"`
	Current  string `json:"current,omitempty"`
	Proposed string `json:"proposed,omitempty"`
	Target   uint64 `json:"target,omitempty"`
	Said     string `json:"said,omitempty"`
	Source   string `json:"source,omitempty"`
	Held     string `json:"held"`
	// Stale: Current is no longer current; the proposal can no longer be
	// approved, and the sweeper closes it.
	Stale      bool   `json:"stale,omitempty"`
	ProposedBy string `json:"proposed_by"`
	ProposedAt string `json:"proposed_at"`
	ItemID     uint64 `json:"item_id,omitempty"`
}

func (t *tools) pending(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*pagedSpaceArgs)
	after, _ := args.after() // checked by Validate
	var lines []memory.PendingLine
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		lines, err = pendingLines(tx, c.Space)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	total := len(lines)
	sort.Slice(lines, func(i, j int) bool { return lines[i].Fact.ID < lines[j].Fact.ID })
	for len(lines) > 0 && lines[0].Fact.ID <= after {
		lines = lines[1:]
	}
	next := ""
	if len(lines) > args.limit() {
		lines = lines[:args.limit()]
		next = strconv.FormatUint(lines[len(lines)-1].Fact.ID, 10)
	}
	data := make([]pendingData, len(lines))
	for i, l := range lines {
		f := l.Fact
		d := pendingData{
			MemoryID: f.ID, Change: memory.ChangeVerb(f), Subject: f.Subject, Current: l.Current,
			Target: f.Supersedes, Said: f.Said, Source: f.Source, Held: f.Held,
			ProposedBy: f.Proposer(), ProposedAt: f.ProposedAt.UTC().Format(time.RFC3339), ItemID: f.ItemID,
			Stale: l.Stale(),
		}
		if f.Pending != memory.ActionRetract {
			d.Proposed = f.Value
		}
		data[i] = d
	}
	return bot.Result{Text: memory.RenderPending(lines) + moreLine("pending_changes", next), Data: map[string]any{"count": total, "changes": data, "next_cursor": next}}, nil
}

// decisionData is the structured answer of confirm_change and reject_change.
type decisionData struct {
	MemoryID  uint64        `json:"memory_id"`
	Outcome   string        `json:"outcome"` // approved or rejected
	Applied   memory.Action `json:"applied,omitempty"`
	Subject   string        `json:"subject"`
	Value     string        `json:"value"`
	Status    memory.Status `json:"status"`
	Target    uint64        `json:"target,omitempty"`
	DecidedBy string        `json:"decided_by"`
	// Assurance is how the decider was authenticated for the decision
	// (an action's votes record the same).
	Assurance policy.Assurance `json:"assurance,omitempty"`
	Note      string           `json:"note,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	// Edited: approved with changes. Value is then the approved value,
	// ProposedValue the one proposed, each with its SHA-256.
	Edited         bool   `json:"edited,omitempty"`
	EditedBy       string `json:"edited_by,omitempty"`
	ProposedValue  string `json:"proposed_value,omitempty"`
	ProposedSHA256 string `json:"proposed_sha256,omitempty"`
	ApprovedSHA256 string `json:"approved_sha256,omitempty"`
}

// changedDetail is the audit suffix of a proposal approved with changes: both
// values' hashes and the editor ("" when unedited).
func changedDetail(f *memory.Fact) string {
	if !f.Edited {
		return ""
	}
	return fmt.Sprintf(" with changes by %s: proposed %s (sha256 %s) -> approved %s (sha256 %s)",
		f.EditedBy, strconv.Quote(memory.EscapeBreaks(f.ProposedValue)), f.ProposedSHA256, strconv.Quote(memory.EscapeBreaks(f.Value)), f.ApprovedSHA256)
}

// valueChanges is an edited proposal's Changes for the item view, nil
// when unedited.
func valueChanges(f *memory.Fact) *bot.Changes {
	if !f.Edited {
		return nil
	}
	return &bot.Changes{By: f.EditedBy,
		Diff:           []bot.Change{{Field: bot.ShowValue(f.Subject), From: bot.ShowValue(f.ProposedValue), To: bot.ShowValue(f.Value)}},
		ProposedSHA256: f.ProposedSHA256, ApprovedSHA256: f.ApprovedSHA256}
}

// mayDecide applies the one decision rule (policy.Decide) to the caller
// deciding proposal id in tx: it returns the refusal, or nil. A
// proposal that is missing or no longer open is not refused here: the
// decision that follows answers "not awaiting approval", whoever asks.
func mayDecide(tx kv.Tx, c *bot.Call, sp memory.Space, id uint64) (*policy.Refusal, error) {
	f, err := memory.Load(tx, sp, id)
	if err != nil || f == nil || !f.Open() {
		return nil, err
	}
	return c.Caller.MayDecide(policy.Decidable{
		Ref:         fmt.Sprintf("#%d", f.ID),
		RequesterID: f.ProposerID, RequesterName: f.ProposerName, RequesterDisplay: f.Proposer(),
		SpaceUserID: f.Space.UserID,
	}), nil
}

// decisionNote is the audit suffix of a decision's notes.
func decisionNote(note, reason string) string {
	s := ""
	if note != "" {
		s += " (decided_by note: " + memory.EscapeBreaks(note) + ")"
	}
	if reason != "" {
		s += " reason: " + memory.EscapeBreaks(reason)
	}
	return s
}

func (t *tools) confirm(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*confirmArgs)
	sp := c.Space
	d := memory.Decider{By: c.Caller.String(), Note: args.DecidedBy, Reason: args.Reason, Value: args.Value, Assurance: c.Caller.Assurance(0, c.Now)}
	var dec memory.Decision
	var refusal *policy.Refusal
	err := c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		if refusal, err = mayDecide(tx, c, sp, args.MemoryID); err != nil {
			return err
		}
		if refusal != nil {
			return tx.Refuse(refusal)
		}
		if dec, err = t.o.Confirm(tx, sp, args.MemoryID, d, c.Now); err != nil {
			return err
		}
		f := dec.Proposal
		if err := decided(tx, f); err != nil {
			return err
		}
		if dec.Closed != "" {
			return tx.Audit("confirm_change", fmt.Sprintf("#%d %s %s: %s; not applied (confirm attempted by %s)", f.ID, upper(dec.Closed), f.Subject, dec.Why, c.Caller))
		}
		return tx.Audit("confirm_change", fmt.Sprintf("#%d %s %s by %s", f.ID, dec.Applied, f.Subject, c.Caller)+changedDetail(f)+decisionNote(args.DecidedBy, args.Reason)+args.Seen.note())
	})
	if err != nil {
		return bot.Result{}, wrap(err)
	}
	if refusal != nil {
		return bot.Result{}, bot.Refused(refusal)
	}
	f := dec.Proposal
	if dec.Closed != "" {
		return bot.Result{}, &bot.Error{Kind: bot.KindConflict, Msg: memory.NotAwaiting(args.MemoryID), Data: map[string]any{
			"memory_id": f.ID, "status": f.Status, "resolved": f.Resolved, "why": dec.Why,
		}}
	}
	value := f.Value
	if dec.Applied == memory.ActionRetract {
		value = dec.Target.Value
	}
	data := decisionData{
		MemoryID: f.ID, Outcome: "approved", Applied: dec.Applied, Subject: f.Subject, Value: value,
		Status: f.Status, Target: f.Supersedes, DecidedBy: f.DecidedBy, Assurance: f.Assurance, Note: f.Note, Reason: f.Reason,
		Edited: f.Edited, EditedBy: f.EditedBy, ProposedValue: f.ProposedValue, ProposedSHA256: f.ProposedSHA256, ApprovedSHA256: f.ApprovedSHA256,
	}
	text := fmt.Sprintf("Approved #%d: %s %s = %s", f.ID, dec.Applied, f.Subject, memory.EscapeBreaks(value))
	if f.Edited {
		text = fmt.Sprintf("Approved #%d with changes: %s %s = %s (proposed: %s)", f.ID, dec.Applied, f.Subject, memory.EscapeBreaks(value), memory.EscapeBreaks(f.ProposedValue))
	}
	return bot.Result{Text: text, Data: data}, nil
}

func upper(r memory.Resolution) string {
	switch r {
	case memory.ResolvedStale:
		return "STALE"
	case memory.ResolvedExpired:
		return "EXPIRED"
	}
	return string(r)
}

func (t *tools) reject(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*decideArgs)
	d := memory.Decider{By: c.Caller.String(), Note: args.DecidedBy, Reason: args.Reason, Assurance: c.Caller.Assurance(0, c.Now)}
	var dec memory.Decision
	var refusal *policy.Refusal
	err := c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		if refusal, err = mayDecide(tx, c, c.Space, args.MemoryID); err != nil {
			return err
		}
		if refusal != nil {
			return tx.Refuse(refusal)
		}
		if dec, err = t.o.Reject(tx, c.Space, args.MemoryID, d, c.Now); err != nil {
			return err
		}
		f := dec.Proposal
		if err := decided(tx, f); err != nil {
			return err
		}
		return tx.Audit("reject_change", fmt.Sprintf("#%d REJECT %s %s by %s", f.ID, memory.ChangeVerb(f), f.Subject, c.Caller)+decisionNote(args.DecidedBy, args.Reason)+args.Seen.note())
	})
	if err != nil {
		return bot.Result{}, wrap(err)
	}
	if refusal != nil {
		return bot.Result{}, bot.Refused(refusal)
	}
	f := dec.Proposal
	data := decisionData{
		MemoryID: f.ID, Outcome: "rejected", Subject: f.Subject, Value: f.Value, Status: f.Status,
		Target: f.Supersedes, DecidedBy: f.DecidedBy, Assurance: f.Assurance, Note: f.Note, Reason: f.Reason,
	}
	return bot.Result{Text: fmt.Sprintf("Discarded #%d. The current value is unchanged.", f.ID), Data: data}, nil
}

// itemStatus is a proposal's status as chat shows it.
func itemStatus(f *memory.Fact) string {
	switch f.Resolved {
	case "":
		if f.Open() {
			return "pending"
		}
		return "closed"
	case memory.ResolvedConfirmed:
		return "approved"
	}
	return string(f.Resolved) // rejected, stale, expired
}

// itemSource renders memory proposals as chat items and maps chat decisions
// to confirm_change / reject_change.
type itemSource struct{ t *tools }

var (
	_ bot.ItemSource  = itemSource{}
	_ bot.ItemEditor  = itemSource{}
	_ bot.SeenTaker   = itemSource{}
	_ bot.ItemDecider = itemSource{}
)

// TakesSeen reports that confirm_change and reject_change record what the
// decider was shown (in the decision's audit entry).
func (itemSource) TakesSeen(k bot.ItemKind) bool { return k == bot.KindMemoryChange }

// View renders a proposal's current state.
func (s itemSource) View(tx kv.Tx, rec bot.ItemRecord) (bot.Item, error) {
	id, err := strconv.ParseUint(rec.Key, 10, 64)
	if err != nil {
		return bot.Item{}, fmt.Errorf("memory item %d: bad key %q", rec.ID, rec.Key)
	}
	sp := rec.Space
	f, err := memory.Load(tx, sp, id)
	if err != nil {
		return bot.Item{}, err
	}
	if f == nil {
		return bot.Item{}, fmt.Errorf("memory item %d: no memory #%d in %s", rec.ID, id, sp)
	}
	// current is the value the proposal was made against: the target's
	// value (or, if the target is gone, the snapshot taken when proposed).
	current := f.Target
	if f.Supersedes != 0 {
		t, err := memory.Load(tx, sp, f.Supersedes)
		if err != nil {
			return bot.Item{}, err
		}
		if t != nil {
			current = t.Value
		}
	}
	proposed, curShown := f.Value, current
	if f.Edited {
		proposed = f.ProposedValue
	}
	switch {
	case f.Pending == memory.ActionRetract:
		proposed = "(removed)"
	case f.Supersedes == 0:
		curShown = "(none)"
	}
	resolved := s.t.o.Resolve(f.Subject)
	it := bot.Item{
		Kind: bot.KindMemoryChange, Title: changeTitle(f, current, sp),
		Requester: f.Proposer(), CreatedAt: f.ProposedAt, Status: itemStatus(f),
		Reason: f.Reason, Sensitive: resolved.Slot.Sensitive,
		Effect: changeEffect(f, current, sp, resolved.Multi()),
		Fields: []bot.Field{
			{Label: "Current value", Value: curShown},
			{Label: "Proposed value", Value: proposed},
			{Label: "Said", Value: f.Said},
			{Label: "Source", Value: f.Source},
			{Label: "Confidence", Value: policy.Conf(f.Confidence)},
		},
		Details: []bot.Field{
			{Label: "Memory", Value: fmt.Sprintf("#%d", f.ID)},
			{Label: "Space", Value: sp.Label()},
			{Label: "Subject", Value: f.Subject},
			{Label: "Change", Value: memory.ChangeTitle(f, current, true)},
			{Label: "Proposed by", Value: f.Proposer()},
		},
	}
	switch {
	case f.Gated():
		it.Asked = fmt.Sprintf("Every change to %s waits for a person: it is a confirm slot of the slot schema.", f.Subject)
	case f.Held != "":
		it.Asked = "Held for a person: " + f.Held + "."
		it.Fields = append(it.Fields, bot.Field{Label: "Held because", Value: f.Held})
	}
	if f.Edited {
		it.Fields = append(it.Fields, bot.Field{Label: "Approved value", Value: f.Value})
	}
	if f.DecidedBy != "" {
		it.Details = append(it.Details, bot.Field{Label: "Decided by", Value: f.DecidedBy})
	}
	it.Changes = valueChanges(f)
	if f.Open() && f.Pending != memory.ActionRetract {
		cur, _ := json.Marshal(f.Value)
		it.Editable = &bot.Editable{Kind: bot.EditValue, Current: cur}
	}
	if s.t.o.ProposalMaxAge > 0 {
		it.ExpiresAt = f.ProposedAt.Add(s.t.o.ProposalMaxAge)
	}
	if f.Resolved == memory.ResolvedConfirmed || f.Resolved == memory.ResolvedRejected {
		it.DecidedBy = []string{f.DecidedBy}
		if f.Assurance != "" {
			it.DecidedVia = []string{f.Assurance.Label()}
		}
	}
	if f.Resolved != "" {
		it.DecidedAt = f.DecidedAt
	}
	return it, nil
}

// whose names a space's owner in running text: "patient_42's", with the
// agent or run of a narrower space after it.
func whose(sp memory.Space) string {
	w := sp.UserID + "'s"
	if sp.AgentID != "" {
		w += " (agent " + sp.AgentID + ")"
	}
	if sp.RunID != "" {
		w += " (run " + sp.RunID + ")"
	}
	return w
}

// forWhom says who reads the value: every agent of a user's space, or the
// one agent (and run) of a narrower one.
func forWhom(sp memory.Space) string {
	switch {
	case sp.AgentID == "" && sp.RunID == "":
		return "for every agent"
	case sp.RunID == "":
		return "for agent " + sp.AgentID
	}
	return "for run " + sp.RunID
}

// changeTitle is a proposal's first line in plain words: "patient_42's
// active_medication: warfarin 5mg daily → apixaban 5mg twice daily".
func changeTitle(f *memory.Fact, current string, sp memory.Space) string {
	cur, val := memory.EscapeBreaks(current), memory.EscapeBreaks(f.Value)
	switch {
	case f.Pending == memory.ActionRetract:
		return fmt.Sprintf("Remove %s from %s %s", cur, whose(sp), f.Subject)
	case f.Supersedes == 0:
		return fmt.Sprintf("Record %s as %s %s", val, whose(sp), f.Subject)
	}
	return fmt.Sprintf("%s %s: %s → %s", whose(sp), f.Subject, cur, val)
}

// changeEffect is what approving the proposal does, computed from the
// proposal (never from what the agent said): "apixaban 5mg twice daily
// becomes patient_42's active_medication for every agent, replacing
// warfarin 5mg daily; nothing is ordered or run." Once approved: what it
// did.
func changeEffect(f *memory.Fact, current string, sp memory.Space, multi bool) string {
	cur, val := memory.EscapeBreaks(current), memory.EscapeBreaks(f.Value)
	const nothingRuns = "; nothing is ordered or run."
	switch {
	case f.Open():
	case f.Resolved == memory.ResolvedConfirmed && f.Pending == memory.ActionRetract:
		return fmt.Sprintf("%s was removed from %s %s %s.", cur, whose(sp), f.Subject, forWhom(sp))
	case f.Resolved == memory.ResolvedConfirmed:
		return fmt.Sprintf("%s is %s %s %s.", val, whose(sp), f.Subject, forWhom(sp))
	case f.Resolved != "":
		return fmt.Sprintf("Nothing changed: %s %s stays as it was.", whose(sp), f.Subject)
	default:
		return ""
	}
	switch {
	case f.Pending == memory.ActionRetract:
		return fmt.Sprintf("%s is removed from %s %s %s", cur, whose(sp), f.Subject, forWhom(sp)) + nothingRuns
	case f.Supersedes == 0 && multi:
		return fmt.Sprintf("%s is added to %s %s %s", val, whose(sp), f.Subject, forWhom(sp)) + nothingRuns
	case f.Supersedes == 0:
		return fmt.Sprintf("%s becomes %s %s %s", val, whose(sp), f.Subject, forWhom(sp)) + nothingRuns
	}
	return fmt.Sprintf("%s becomes %s %s %s, replacing %s", val, whose(sp), f.Subject, forWhom(sp), cur) + nothingRuns
}

// DecisionCall maps a chat decision to confirm_change or reject_change.
func (s itemSource) DecisionCall(rec bot.ItemRecord, approve bool, reason string, _ []string) (string, map[string]any, error) {
	id, err := strconv.ParseUint(rec.Key, 10, 64)
	if err != nil {
		return "", nil, fmt.Errorf("memory item %d: bad key %q", rec.ID, rec.Key)
	}
	tool := "reject_change"
	if approve {
		tool = "confirm_change"
	}
	args := map[string]any{"memory_id": id, "user_id": rec.Space.UserID}
	if rec.Space.AgentID != "" {
		args["agent_id"] = rec.Space.AgentID
	}
	if rec.Space.RunID != "" {
		args["run_id"] = rec.Space.RunID
	}
	if reason != "" {
		args["reason"] = reason
	}
	return tool, args, nil
}

// EditCall maps an approval with an edited value (a JSON string) to
// confirm_change with value, the call an API client makes.
func (s itemSource) EditCall(rec bot.ItemRecord, edit json.RawMessage, reason string) (string, map[string]any, error) {
	var v string
	if err := json.Unmarshal(edit, &v); err != nil {
		return "", nil, bot.Invalid("value", "#%d is a memory change: its edit is the value to confirm, a string", rec.ID)
	}
	tool, args, err := s.DecisionCall(rec, true, reason, nil)
	if err != nil {
		return "", nil, err
	}
	args["value"] = v
	return tool, args, nil
}

// DecisionArgs maps a typed decision to confirm_change (with the edited
// value, a JSON string, when d.Edit is set) or reject_change with their
// typed arguments (bot.ItemDecider).
func (s itemSource) DecisionArgs(rec bot.ItemRecord, d bot.Decision) (string, any, error) {
	id, err := strconv.ParseUint(rec.Key, 10, 64)
	if err != nil {
		return "", nil, fmt.Errorf("memory item %d: bad key %q", rec.ID, rec.Key)
	}
	var seen *seenArgs
	if d.Seen != nil {
		seen = &seenArgs{SHA256: d.Seen.SHA256, Surface: d.Seen.Surface, Truncated: d.Seen.Truncated}
	}
	if !d.Approve {
		return "reject_change", &decideArgs{Space: rec.Space, MemoryID: id, Reason: d.Reason, Seen: seen}, nil
	}
	a := &confirmArgs{Space: rec.Space, MemoryID: id, Reason: d.Reason, Seen: seen}
	if d.Edit != nil {
		var v string
		if err := json.Unmarshal(d.Edit, &v); err != nil {
			return "", nil, bot.Invalid("value", "#%d is a memory change: its edit is the value to confirm, a string", rec.ID)
		}
		a.Value = &v
	}
	return "confirm_change", a, nil
}

// Sweep batch bounds: how many open proposals one transaction examines,
// and how many it closes.
const (
	sweepScan  = 1024
	sweepClose = 256
)

// sweep closes open proposals that went stale (their target is no longer
// ACTIVE) or expired (older than ProposalMaxAge): HISTORICAL with the
// resolution, audited as the system, the chat item's decided event queued,
// in bounded transactions.
func (t *tools) sweep(ctx context.Context, now time.Time) (int, error) {
	c := t.b.SystemCall(now)
	var after []byte
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var (
			closed []*memory.Fact
			next   []byte
			more   bool
		)
		err := c.Update(ctx, func(tx *bot.Tx) error {
			var err error
			closed, next, more, err = t.o.SweepOpen(tx, after, now, sweepScan, sweepClose)
			if err != nil {
				return err
			}
			for _, f := range closed {
				if err := decided(tx, f); err != nil {
					return err
				}
				detail := fmt.Sprintf("#%d %s %s: %s", f.ID, upper(f.Resolved), f.Subject, f.Reason)
				if _, err := tx.AuditAs(c.Caller.String(), f.Space, "memory_sweep", detail); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += len(closed)
		if !more || next == nil {
			return total, nil
		}
		after = next
	}
}
