// Package memorytools registers the memory, safety-gate, memory-approval and
// reconciliation tools on a bot, the chat item kind of a memory proposal,
// and the sweep step that closes stale and expired proposals.
//
// Every handler runs its reads, its state change, its audit entry and the
// chat item events it causes in one c.Update transaction.
package memorytools

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/policy"
)

// tools holds what every handler needs.
type tools struct {
	b        *bot.Bot
	o        memory.Options
	critical map[string]bool // configured critical categories, lower-case
}

// Register adds the memory tools to b, the memory_change item kind, and the
// "memory" sweep step.
func Register(b *bot.Bot, o memory.Options) error {
	o = o.WithDefaults()
	if o.ProposalMaxAge < 0 {
		return errors.New("memory: proposal_max_age must not be negative")
	}
	if o.ProposalRetention < 0 {
		return errors.New("retention.memory_proposals: must not be negative (0 keeps closed proposals)")
	}
	t := &tools{b: b, o: o, critical: map[string]bool{}}
	for _, c := range o.CriticalCategories {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" {
			t.critical[c] = true
		}
	}
	b.Items().RegisterKind(bot.KindMemoryChange, itemSource{t})
	b.OnSweep("memory", t.sweep)
	b.OnSweep("retention_memory_proposals", t.pruneClosed)
	ro := bot.Annotations{ReadOnly: true}
	return b.Register(
		bot.Tool{Name: "remember", Capability: policy.CapWrite, Args: rememberArgs{}, Handler: t.remember,
			Description: "Store one structured fact. Reconciliation is deterministic: ADD, SUPERSEDE, DEDUP, COEXIST, ARCHIVE (time_ref past) or FLAG (held for a person: a change to a confirm slot, below confidence 0.7, future tense, or blocked by the space's reconcile policy). Answers 'Stored: [ACTION] subject = value'."},
		bot.Tool{Name: "forget", Capability: policy.CapWrite, Args: forgetArgs{}, Handler: t.forget,
			Description: "Retract a current value (kept in history with a '(retracted: value)' tombstone). On a list slot, value says which item. On a confirm slot the removal is queued for approval."},
		bot.Tool{Name: "update_memory", Capability: policy.CapWrite, Args: updateArgs{}, Handler: t.update,
			Description: "Human edit of one current fact: the old row is kept as SUPERSEDED and the new value gets a new id. On a confirm slot the edit applies only for a caller holding approve; anyone else gets a proposal."},
		bot.Tool{Name: "get_memory", Capability: policy.CapRead, Annotations: ro, Args: idArgs{}, Handler: t.get,
			Description: "Show one fact, current or retired, with its provenance."},
		bot.Tool{Name: "history", Capability: policy.CapRead, Annotations: ro, Args: historyArgs{}, Handler: t.history,
			Description: "Every value a subject has held, oldest to newest, with its status."},
		bot.Tool{Name: "list_memories", Capability: policy.CapRead, Annotations: ro, Args: pagedSpaceArgs{}, Handler: t.list,
			Description: "The space's active facts, then flagged ones, then the 20 most recently retired."},
		bot.Tool{Name: "recall", Capability: policy.CapRead, Annotations: ro, Args: recallArgs{}, Handler: t.recall,
			Description: "The active facts behind an answer to a question, ranked lexically (no model). Critical categories are always included; over the critical budget the read fails rather than drop any."},
		bot.Tool{Name: "check_before_act", Capability: policy.CapRead, Annotations: ro, Args: checkArgs{}, Handler: t.check,
			Description: "Before an irreversible action: SAFE, or BLOCKED with reasons (no active fact, flagged or awaiting approval, low confidence, stale, recently changed). Deterministic."},
		bot.Tool{Name: "safe_recall", Capability: policy.CapRead, Annotations: ro, Args: safeRecallArgs{}, Handler: t.safeRecall,
			Description: "recall for an answer the agent will act on: ANSWERED only if every fact behind it passes the safety policy; otherwise WITHHELD with reasons."},
		bot.Tool{Name: "pending_changes", Capability: policy.CapRead, Annotations: ro, Args: pagedSpaceArgs{}, Handler: t.pending,
			Description: "Changes held for a person (proposals on confirm slots and other flagged changes), awaiting confirm_change or reject_change."},
		bot.Tool{Name: "confirm_change", Capability: policy.CapApprove, Args: confirmArgs{}, Handler: t.confirm,
			Description: "Apply a pending change. The approver recorded is the authenticated caller; decided_by is only a note. A proposal whose target has changed since is stale and is closed instead. " +
				"To approve with changes, pass the value to confirm instead in value: it is checked like any value of the slot, and the proposed and approved values are both kept with their SHA-256."},
		bot.Tool{Name: "reject_change", Capability: policy.CapApprove, Args: decideArgs{}, Handler: t.reject,
			Description: "Discard a pending change; the current value is unchanged and the proposal is kept in history as HISTORICAL."},
		bot.Tool{Name: "set_reconcile_policy", Capability: policy.CapAdmin, Args: setPolicyArgs{}, Handler: t.setPolicy,
			Description: "Set how this space resolves conflicts between sources: RECENCY (default), AUTHORITY (with source ranks) or REVIEW. A source correcting its own fact always supersedes."},
		bot.Tool{Name: "get_reconcile_policy", Capability: policy.CapRead, Annotations: ro, Args: spaceArgs{}, Handler: t.getPolicy,
			Description: "Show this space's reconcile policy."},
	)
}

// wrap gives a recall's critical overflow its conflict kind and detail;
// memory's other errors already are *bot.Error (policy.Error, the one error
// type), and anything else passes through (and is internal).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var be *bot.Error
	if errors.As(err, &be) {
		return err
	}
	var ce *memory.CriticalOverflowError
	if errors.As(err, &ce) {
		return &bot.Error{Kind: bot.KindConflict, Msg: ce.Error(), Data: map[string]any{
			"critical_facts": ce.Count, "critical_budget": ce.Budget, "critical_categories": ce.Categories,
		}}
	}
	return err
}

// trustedDenial is the refusal for a caller claiming a trusted source it is
// not bound to.
func trustedDenial(source string) string {
	return fmt.Sprintf("Access denied: '%s' is a trusted source (trusted_sources), so its changes skip the confirmation gate. Only a key named '%s', or a person with the 'approve' capability, may write as it.", source, source)
}

// mayWriteAs reports whether the caller may write as a trusted source: its
// principal is named after the source (the integration's own key), or it
// may decide a change in the call's space under the one decision rule
// (policy.Decide: a person holding approve, the space in scope),
// since a trusted write skips the confirmation a person would give.
func mayWriteAs(c *bot.Call, source string) bool {
	return strings.EqualFold(c.Caller.Name, source) || mayApprove(c, "a write as '"+source+"'")
}

// mayApprove reports whether the caller may decide a change of its own
// making in the call's space (a trusted-source write, an edit of a confirm
// slot that applies at once): the one decision rule, with no requester.
func mayApprove(c *bot.Call, ref string) bool {
	return c.Caller.MayDecide(policy.Decidable{Ref: ref, SpaceUserID: c.Space.UserID}) == nil
}

// newItem creates the chat item of a proposal in tx and records its id on
// the proposal.
func (t *tools) newItem(tx *bot.Tx, c *bot.Call, f *memory.Fact) error {
	ch := t.o.Resolve(f.Subject).Slot.Channel
	var expires time.Time // as the item shows it (itemSource.View)
	if t.o.ProposalMaxAge > 0 {
		expires = f.ProposedAt.Add(t.o.ProposalMaxAge)
	}
	id, err := tx.NewItem(bot.KindMemoryChange, strconv.FormatUint(f.ID, 10), f.Space, ch, expires)
	if err != nil {
		return err
	}
	return memory.AttachItem(tx, f, id)
}

// decided emits the decided event of a proposal's chat item, if it has one.
func decided(tx *bot.Tx, f *memory.Fact) error {
	if f.ItemID == 0 {
		return nil
	}
	return tx.Emit(f.ItemID, bot.EventDecided, "")
}

// truncate80 cuts a question for the audit detail.
func truncate80(s string) string { return memory.EscapeBreaks(memory.Truncate(s, 80)) }

// criticalSet is a call's critical categories: its own when it gives
// critical_categories (even empty), else the configured ones.
func (t *tools) criticalSet(perCall *string) map[string]bool {
	if perCall == nil {
		out := make(map[string]bool, len(t.critical))
		for c := range t.critical {
			out[c] = true
		}
		return out
	}
	// Seed 000: the per-call critical_categories overrides the configured
	// set for this call; an explicit empty value means none.
	out := map[string]bool{}
	for _, c := range strings.Split(*perCall, ",") {
		if c = strings.ToLower(strings.TrimSpace(c)); c != "" {
			out[c] = true
		}
	}
	return out
}
