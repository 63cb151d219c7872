package memorytools

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// storedData is the structured answer of a write.
type storedData struct {
	Action     memory.Action  `json:"action"`
	MemoryID   uint64         `json:"memory_id,omitempty"` // the row written, or the one already holding it (DEDUP)
	Subject    string         `json:"subject"`
	Value      string         `json:"value,omitempty"`
	Status     memory.Status  `json:"status,omitempty"`
	Supersedes uint64         `json:"supersedes,omitempty"`
	Pending    bool           `json:"pending"` // a change held for a person
	Change     string         `json:"change,omitempty"`
	Held       string         `json:"held,omitempty"` // why it is held
	ItemID     uint64         `json:"item_id,omitempty"`
	Previous   *previousValue `json:"previous,omitempty"`
}

// previousValue is the value a write replaced or would replace.
type previousValue struct {
	MemoryID uint64 `json:"memory_id"`
	Value    string `json:"value"`
}

func dataOf(p memory.Plan) storedData {
	d := storedData{Action: p.Action, Subject: p.Subject, Value: p.Value}
	f := p.New
	if f == nil {
		f = p.Existing
	}
	if f != nil {
		d.MemoryID, d.Status, d.Supersedes, d.ItemID = f.ID, f.Status, f.Supersedes, f.ItemID
		if f.Open() {
			d.Pending, d.Change, d.Held = true, memory.ChangeVerb(f), f.Held
		}
	}
	if p.Target != nil {
		d.Previous = &previousValue{MemoryID: p.Target.ID, Value: p.Target.Value}
	}
	return d
}

// auditDetail is the audit entry of a write, e.g.
// "[fhir] SUPERSEDE active_medication #4 (replaces #1)".
func auditDetail(source string, p memory.Plan) string {
	var b strings.Builder
	if source != "" {
		fmt.Fprintf(&b, "[%s] ", memory.EscapeBreaks(source))
	}
	fmt.Fprintf(&b, "%s %s", p.Action, p.Subject)
	switch {
	case p.New != nil:
		fmt.Fprintf(&b, " #%d", p.New.ID)
		if p.Held {
			fmt.Fprintf(&b, " (held: %s", memory.ChangeVerb(p.New))
			if p.Target != nil {
				fmt.Fprintf(&b, " #%d", p.Target.ID)
			}
			b.WriteString(")")
		} else if p.Target != nil {
			fmt.Fprintf(&b, " (replaces #%d)", p.Target.ID)
		}
	case p.Existing != nil:
		fmt.Fprintf(&b, " (#%d)", p.Existing.ID)
	}
	return b.String()
}

// write runs one reconciled write: the state change, the proposal's chat
// item, and the audit entry, in one transaction.
func (t *tools) write(ctx context.Context, c *bot.Call, action string, in memory.Input) (memory.Plan, error) {
	in.By, in.ByID, in.ByName = c.Caller.String(), c.Caller.ID, c.Caller.Name
	var p memory.Plan
	err := c.Update(ctx, func(tx *bot.Tx) error {
		var err error
		if p, err = t.o.Write(tx, c.Space, in, c.Now); err != nil {
			return err
		}
		if p.Held && p.New != nil {
			if err := t.newItem(tx, c, p.New); err != nil {
				return err
			}
		}
		detail := auditDetail(in.Source, p)
		if in.Op == memory.OpEdit {
			detail = editDetail(in, p)
		}
		return tx.Audit(action, detail)
	})
	return p, wrap(err)
}

// trusted checks a claimed source: a trusted source may be written only by
// the key named after it or a caller holding approve. It reports whether
// the source is trusted.
func (t *tools) trusted(ctx context.Context, c *bot.Call, source string) (bool, error) {
	if !t.o.Trusted(source) {
		return false, nil
	}
	if !mayWriteAs(c, source) {
		return false, c.Deny(ctx, trustedDenial(source))
	}
	return true, nil
}

func (t *tools) remember(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*rememberArgs)
	source := strings.TrimSpace(args.Source)
	trusted, err := t.trusted(ctx, c, source)
	if err != nil {
		return bot.Result{}, err
	}
	meta, cat, err := metadataOf(args.Metadata)
	if err != nil {
		return bot.Result{}, err
	}
	conf := memory.DefaultConfidence
	if args.Confidence != nil {
		conf = *args.Confidence
	}
	in := memory.Input{
		Op: memory.OpRemember, Subject: args.Subject, Value: args.Value, Said: args.Text,
		Confidence: conf, Source: source, Kind: kindOf(args.Kind), Scope: scopeOf(args.Scope),
		TimeRef: timeRefOf(args.TimeRef), Category: cat, Metadata: meta,
		Replaces: args.Replaces, Trusted: trusted,
	}
	p, err := t.write(ctx, c, "remember", in)
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{Text: memory.RenderStored(p.Action, p.Subject, p.Value), Data: dataOf(p)}, nil
}

func kindOf(s string) memory.Kind {
	if s == "event" {
		return memory.KindEvent
	}
	return memory.KindState
}

func scopeOf(s string) string {
	if f := memory.Fold(s); f != "" {
		return f
	}
	return memory.DefaultScope
}

func timeRefOf(s string) memory.TimeRef {
	switch s {
	case "past":
		return memory.TimePast
	case "future":
		return memory.TimeFuture
	}
	return memory.TimeCurrent
}

func (t *tools) forget(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*forgetArgs)
	source := strings.TrimSpace(args.Source)
	trusted, err := t.trusted(ctx, c, source)
	if err != nil {
		return bot.Result{}, err
	}
	in := memory.Input{
		Op: memory.OpForget, Subject: args.Subject, Value: args.Value, Said: args.Text,
		Confidence: memory.DefaultConfidence, Source: source, Scope: scopeOf(args.Scope), Trusted: trusted,
	}
	p, err := t.write(ctx, c, "forget", in)
	if err != nil {
		return bot.Result{}, err
	}
	var text string
	switch p.Action {
	case memory.ActionSkip:
		text = memory.NothingToRetract
	case memory.ActionRetract:
		text = memory.RenderRetracted(p.Subject, p.Target.Value)
	default: // FLAG (queued removal) or DEDUP (already queued)
		text = memory.RenderStored(p.Action, p.Subject, p.Value)
	}
	return bot.Result{Text: text, Data: dataOf(p)}, nil
}

func editDetail(in memory.Input, p memory.Plan) string {
	old := ""
	if p.Target != nil {
		old = p.Target.Value
	}
	switch {
	case p.Action == memory.ActionDedup && p.Existing != nil && p.Existing.Open():
		return fmt.Sprintf("#%d DEDUP %s (already proposed as #%d)", in.Target, p.Subject, p.Existing.ID)
	case p.Action == memory.ActionDedup:
		return fmt.Sprintf("#%d unchanged: %s", in.Target, memory.Truncate(policy.PyRepr(old), 80))
	case p.Held:
		return fmt.Sprintf("#%d -> #%d held for approval (%s): %s -> %s", in.Target, p.New.ID, p.Subject, memory.Truncate(policy.PyRepr(old), 80), memory.Truncate(policy.PyRepr(p.Value), 80))
	}
	return fmt.Sprintf("#%d -> #%d %s: %s -> %s", in.Target, p.New.ID, p.Subject, memory.Truncate(policy.PyRepr(old), 80), memory.Truncate(policy.PyRepr(p.Value), 80))
}

func (t *tools) update(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*updateArgs)
	in := memory.Input{
		Op: memory.OpEdit, Target: args.MemoryID, Value: args.NewValue,
		Approver: mayApprove(c, fmt.Sprintf("#%d", args.MemoryID)),
	}
	p, err := t.write(ctx, c, "update_memory", in)
	if err != nil {
		return bot.Result{}, err
	}
	old := p.Target.Value
	var text string
	switch {
	case p.Action == memory.ActionDedup && p.Existing != nil && p.Existing.Open():
		text = fmt.Sprintf("Already awaiting approval as #%d: %s → %s.", p.Existing.ID, policy.PyRepr(old), policy.PyRepr(p.Existing.Value))
	case p.Action == memory.ActionDedup:
		text = fmt.Sprintf("No change: #%d already holds %s.", args.MemoryID, policy.PyRepr(old))
	case p.Held:
		text = fmt.Sprintf("Queued #%d for approval: %s → %s. The current value stands until someone confirms it (%s is a confirm slot).", p.New.ID, policy.PyRepr(old), policy.PyRepr(p.Value), p.Subject)
	default:
		text = fmt.Sprintf("Updated #%d: %s → %s (now #%d; old kept in history).", args.MemoryID, policy.PyRepr(old), policy.PyRepr(p.Value), p.New.ID)
	}
	return bot.Result{Text: memory.EscapeBreaks(text), Data: dataOf(p)}, nil
}

// factData is the structured form of one fact.
type factData struct {
	memory.Provenance
	Metadata  map[string]any `json:"metadata,omitempty"`
	Proposal  *proposalData  `json:"proposal,omitempty"`
	Archived  bool           `json:"archived,omitempty"`
	Tombstone bool           `json:"tombstone,omitempty"`
}

// proposalData is the held-change part of a fact.
type proposalData struct {
	Change     string `json:"change"` // REPLACE, REMOVE or ADD
	Status     string `json:"status"` // pending, approved, rejected, stale, expired
	Held       string `json:"held,omitempty"`
	Target     uint64 `json:"target,omitempty"`
	ProposedBy string `json:"proposed_by"`
	ProposedAt string `json:"proposed_at"`
	DecidedBy  string `json:"decided_by,omitempty"`
	Assurance  string `json:"assurance,omitempty"` // how the decider was authenticated
	Note       string `json:"note,omitempty"`
	Reason     string `json:"reason,omitempty"`
	ItemID     uint64 `json:"item_id,omitempty"`
}

func toFactData(f *memory.Fact) factData {
	d := factData{Provenance: f.Provenance(), Metadata: f.MetadataMap(), Archived: f.Archived, Tombstone: f.Tombstone}
	if f.IsProposal() {
		d.Proposal = &proposalData{
			Change: memory.ChangeVerb(f), Status: itemStatus(f), Held: f.Held, Target: f.Supersedes,
			ProposedBy: f.Proposer(), ProposedAt: f.ProposedAt.UTC().Format("2006-01-02T15:04:05Z07:00"),
			DecidedBy: f.DecidedBy, Assurance: string(f.Assurance), Note: f.Note, Reason: f.Reason, ItemID: f.ItemID,
		}
	}
	return d
}

func factsData(fs []*memory.Fact) []factData {
	out := make([]factData, len(fs))
	for i, f := range fs {
		out[i] = toFactData(f)
	}
	return out
}

func (t *tools) get(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*idArgs)
	var f *memory.Fact
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		f, err = memory.Load(tx, c.Space, args.MemoryID)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	if f == nil {
		return bot.Result{}, bot.Errorf(bot.KindNotFound, "%s", memory.NoMemory(args.MemoryID))
	}
	return bot.Result{Text: memory.RenderFact(f), Data: toFactData(f)}, nil
}

func (t *tools) history(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*historyArgs)
	subject := t.o.Resolve(args.Subject).Subject
	after, _ := args.after() // checked by Validate
	var facts []*memory.Fact
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		facts, err = memory.History(tx, c.Space, subject)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].ID < facts[j].ID })
	page, next := pageFacts(facts, after, args.limit())
	return bot.Result{
		Text: memory.RenderHistory(subject, page) + moreLine("history", next),
		Data: map[string]any{"subject": subject, "facts": factsData(page), "next_cursor": next},
	}, nil
}

// listRetired is how many retired facts list_memories shows.
const listRetired = 20

// list answers list_memories: the live facts (active, then flagged) by id,
// a page at a time, and on the first page the most recent retired ones.
func (t *tools) list(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*pagedSpaceArgs)
	after, _ := args.after() // checked by Validate
	var page, retired []*memory.Fact
	var more bool
	err := c.View(ctx, func(tx kv.Tx) error {
		sp := c.Space
		var err error
		// One page of live facts in id order, read from the store a page
		// at a time: a large space is never held whole.
		if page, more, err = memory.LivePage(tx, sp, after, args.limit()); err != nil {
			return err
		}
		if after > 0 {
			return nil
		}
		retired, err = memory.RecentRetired(tx, sp, listRetired)
		return err
	})
	if err != nil {
		return bot.Result{}, err
	}
	next := ""
	if more && len(page) > 0 {
		next = strconv.FormatUint(page[len(page)-1].ID, 10)
	}
	var active, flagged []*memory.Fact
	for _, f := range page {
		if f.Status == memory.StatusActive {
			active = append(active, f)
		} else {
			flagged = append(flagged, f)
		}
	}
	return bot.Result{
		Text: memory.RenderList(active, flagged, retired) + moreLine("list_memories", next),
		Data: map[string]any{"active": factsData(active), "flagged": factsData(flagged), "retired": factsData(retired), "next_cursor": next},
	}, nil
}

// recallData is the structured answer of recall and safe_recall.
type recallData struct {
	Facts           []recalledData `json:"facts"`
	FlaggedSubjects []string       `json:"flagged_subjects,omitempty"`
	ActiveFacts     int            `json:"active_facts"`
	Whole           bool           `json:"whole_space"`
}

type recalledData struct {
	factData
	Score    int  `json:"score"`
	Critical bool `json:"critical"`
}

func toRecallData(r memory.Recall) recallData {
	d := recallData{Facts: []recalledData{}, FlaggedSubjects: r.FlaggedSubjects, ActiveFacts: r.Active, Whole: r.Whole}
	for _, x := range r.Facts {
		d.Facts = append(d.Facts, recalledData{factData: toFactData(x.Fact), Score: x.Score, Critical: x.Critical})
	}
	return d
}

// runRecall selects the context of a question in a read transaction and
// audits the read (durably, or queued: see bot.ReadAudit) before it is
// answered; verdict (when not nil) computes the gate's verdict for the audit
// detail. A critical overflow is audited as REFUSED and then returned as a
// conflict. A read whose audit entry cannot be recorded returns the
// *bot.UnrecordedError: its answer must not be given.
func (t *tools) runRecall(ctx context.Context, c *bot.Call, action, question string, perCall *string, limit *int, verdict func(memory.Recall) policy.Verdict) (memory.Recall, error) {
	req := memory.RecallRequest{
		Question: question, Critical: t.criticalSet(perCall),
		Context: t.o.RecallContext, Budget: t.o.CriticalBudget,
	}
	if limit != nil && *limit < req.Context {
		req.Context = *limit // never above the configured bound
	}
	var r memory.Recall
	var refused error
	var detail string
	err := c.View(ctx, func(tx kv.Tx) error {
		var err error
		r, err = memory.RecallSpace(tx, c.Space, req)
		var ce *memory.CriticalOverflowError
		if errors.As(err, &ce) {
			refused = err
			detail = truncate80(question) + ": REFUSED (critical overflow)"
			return nil
		}
		if err != nil {
			return err
		}
		detail = truncate80(question)
		if verdict != nil {
			detail += ": " + string(verdict(r))
		}
		return nil
	})
	if err != nil {
		return memory.Recall{}, err
	}
	if err := c.AuditRead(ctx, action, detail); err != nil {
		return memory.Recall{}, err
	}
	return r, wrap(refused)
}

func (t *tools) recall(ctx context.Context, c *bot.Call, a any) (bot.Result, error) {
	args := a.(*recallArgs)
	r, err := t.runRecall(ctx, c, "recall", args.Question, args.CriticalCategories, args.Limit, nil)
	if reason, ok := bot.Unrecorded(err); ok {
		// A read that cannot be recorded is not answered.
		return bot.Result{}, bot.Errorf(bot.KindRateLimited, "recall refused: %s", reason)
	}
	if err != nil {
		return bot.Result{}, err
	}
	return bot.Result{Text: memory.RenderRecall(r), Data: toRecallData(r)}, nil
}
