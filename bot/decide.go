package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// Decision is one person's decision on an item, typed: what every surface
// hands the core. Chat builds it from a click or a command, the console
// from a form; the tool API's decision tools (approve_action, deny_action,
// answer_question, confirm_change, reject_change) run the same handler
// with their arguments decoded from JSON at the API's edge.
type Decision struct {
	// ItemID is the item decided (#12).
	ItemID uint64
	// Approve is true for an approval (or an answer), false for a
	// rejection, a denial, or a declined question.
	Approve bool
	// Reason is the person's reason (a declined question's text).
	Reason string
	// Answers are a question's chosen options, as the options are written.
	Answers []string
	// Edit, with Approve, is the edited version to approve instead of the
	// one proposed (the item's Editable form): an action's whole arguments
	// (a JSON object), or a memory proposal's value (a JSON string). nil:
	// approve as proposed.
	Edit json.RawMessage
	// ArgsSHA256, with Approve on an action request, is the version of
	// the arguments the person approves: the deciding transaction refuses
	// it when another approver's edit has replaced them. "": not checked.
	ArgsSHA256 string
	// Grant, with Approve, is a standing grant made with the approval.
	Grant *GrantChoice
	// Seen is what the person was shown when deciding, recorded on the
	// vote; Facts, with it, the digest of the facts the card showed
	// (FactsDigestOf), checked against the facts as they stand.
	Seen  *Seen
	Facts string
	// Deliveries are the delivery's dedupe keys, recorded in the deciding
	// transaction: any one seen before ends the decision with
	// ErrDuplicate, nothing applied. Empty: no dedupe.
	Deliveries []string
	// Check, when set, runs in the deciding transaction on the item as it
	// stands before the decision, and may complete d from it (the version
	// the card showed). An error it returns ends the decision with
	// nothing written, and Decide returns it as it is.
	Check func(it Item, d *Decision) error
	// BreakGlass, with Approve, asks to approve one's own request as
	// break-glass (policy.BreakGlass): Reason is then mandatory.
	BreakGlass bool
}

// Decided is what Decide did: the decision tool's answer, and the item
// as it stands after the decision, read in the deciding transaction.
type Decided struct {
	Result Result
	// Item is the item after the decision (before it, when the decision
	// was refused or conflicted: what stands). Zero when Decide ended
	// before the item was read (a duplicate, no such item).
	Item Item
}

// ErrDuplicate ends a Decision whose delivery was seen before: nothing
// was applied again.
var ErrDuplicate = errors.New("bot: this delivery was seen before")

// ItemDecider is implemented by the item sources whose items a person
// decides: it maps a typed decision on rec to the decision tool and that
// tool's typed arguments (a pointer to its Args struct), so that chat,
// the console and the API are decided by one handler, with no JSON
// between them.
type ItemDecider interface {
	DecisionArgs(rec ItemRecord, d Decision) (tool string, args any, err error)
}

// Decide takes decision d on an item for caller, in one store transaction:
// the delivery's dedupe, the item read once, d.Check, then the decision
// tool the item's source maps it to (DecisionArgs), run with typed
// arguments through the same checks as Call (capability, arguments,
// scope, then the handler, whose one decision rule refuses and audits),
// and the item's state after. A refusal's audit entry commits with the
// transaction; an error from d.Check, a failure, or a duplicate rolls all
// of it back. The rate limit charges one token, as for a Call.
func (b *Bot) Decide(ctx context.Context, caller *Caller, d Decision) (out Decided, err error) {
	start := time.Now()
	caller = b.withGroups(caller) // the groups it belongs to now, as in Call
	c := &Call{bot: b, Caller: caller, Now: b.now(), Tool: &Tool{Name: decideCall}}
	var span Span
	defer func() {
		b.observe(ctx, caller, c.Tool.Name, start, c, err)
		endCall(span, c, err)
	}()
	if b.tracer != nil {
		ctx, span = b.startCall(ctx, caller, "decide")
	}
	if caller == nil {
		return Decided{}, Errorf(KindUnauthenticated, "Access denied: authentication required. Provide a valid API key (Authorization: Bearer %s…).", KeyPrefix)
	}
	if err := b.pay(ctx, caller); err != nil {
		return Decided{}, err
	}
	var (
		res      Result
		herr     error
		deferred []func()
		rec      *ItemRecord
		later    any // the arguments of a source without ItemDecider
	)
	err = b.Update(ctx, c, func(tx *Tx) error {
		out, res, herr, deferred, later = Decided{}, Result{}, nil, nil, nil
		tx.Tx = newMemoTx(tx.Tx)
		if len(d.Deliveries) > 0 {
			first, err := firstIn(tx.Tx, b.now(), d.Deliveries)
			if err != nil {
				return err
			}
			if !first {
				return ErrDuplicate
			}
		}
		var err error
		if rec, err = LoadItemRecord(tx, d.ItemID); err != nil {
			return err
		}
		if rec == nil {
			return ErrNoItem
		}
		it, err := b.viewOf(tx, rec)
		if err != nil {
			return err
		}
		out.Item = it
		dd := d
		if d.Check != nil {
			if err := d.Check(it, &dd); err != nil {
				return err
			}
		}
		name, args, typed, err := b.decisionArgs(*rec, dd)
		if err != nil {
			return err
		}
		*c = Call{bot: b, Tool: b.tools[name], Caller: c.Caller, Now: c.Now} // c.Caller: as this transaction read it (a suspension)
		if span.s != nil {
			span.s.SetName("execute_tool " + name)
			span.s.SetAttributes(attrTool.String(name))
		}
		if !typed {
			// Its handler may not keep to the call's transactions: run
			// it once this one (the dedupe) has committed.
			later = args
			return nil
		}
		c.tx = tx
		res, herr = b.callTyped(ctx, c, args)
		deferred, c.tx = c.deferred, nil
		if c.failed != nil {
			// A transaction of the handler failed: nothing of it may
			// commit (a Call would have rolled that one back).
			return c.failed
		}
		if herr == nil || KindOf(herr) != KindInternal {
			if out.Item, err = b.viewOf(tx, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if later != nil {
		res, herr = b.callTyped(ctx, c, later)
		if herr == nil || KindOf(herr) != KindInternal {
			if it, err := b.Items().Get(ctx, rec.ID); err == nil {
				out.Item = it
			}
		}
	}
	for _, f := range deferred {
		f()
	}
	out.Result = res
	return out, herr
}

// decisionArgs maps d on rec to its decision tool and typed arguments:
// the item source's DecisionArgs, or, for a source that only maps
// decisions to JSON-shaped calls (DecisionCall, EditCall), those calls
// decoded as the API decodes them.
//
// typed reports an ItemDecider: its decision tools keep to the call's
// transactions (Call.Update, Call.View), so Decide runs them in its own.
func (b *Bot) decisionArgs(rec ItemRecord, d Decision) (name string, args any, typed bool, err error) {
	src, ok := b.kinds[rec.Kind]
	if !ok {
		return "", nil, false, fmt.Errorf("item %d: no source for kind %s", rec.ID, rec.Kind)
	}
	if td, ok := src.(ItemDecider); ok {
		name, args, err := td.DecisionArgs(rec, d)
		if err == nil && b.tools[name] == nil {
			err = fmt.Errorf("item %d: decision tool %s is not registered", rec.ID, name)
		}
		return name, args, true, err
	}
	var m map[string]any
	if d.Edit != nil {
		ed, ok := src.(ItemEditor)
		if !ok {
			return "", nil, false, Invalid("edit", "item #%d (%s) cannot be edited: approve or reject it as it is", rec.ID, rec.Kind)
		}
		name, m, err = ed.EditCall(rec, d.Edit, d.Reason)
	} else {
		name, m, err = src.DecisionCall(rec, d.Approve, d.Reason, d.Answers)
	}
	if err != nil {
		return "", nil, false, err
	}
	extra := map[string]any{}
	if d.Grant != nil {
		extra["grant"] = d.Grant.arg()
	}
	if d.ArgsSHA256 != "" {
		extra["args_sha256"] = d.ArgsSHA256
	}
	if st, ok := src.(SeenTaker); ok && d.Seen != nil && d.Edit == nil && st.TakesSeen(rec.Kind) {
		seen := d.Seen.arg()
		if d.Facts != "" {
			seen["facts"] = d.Facts
		}
		extra["seen"] = seen
	}
	for k, v := range extra {
		if _, taken := m[k]; !taken {
			m[k] = v
		}
	}
	t, ok := b.tools[name]
	if !ok {
		return "", nil, false, fmt.Errorf("item %d: decision tool %s is not registered", rec.ID, name)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", nil, false, err
	}
	args, err = t.args.decode(raw)
	return name, args, false, err
}

// callTyped runs c's tool with typed arguments (a pointer to the tool's
// Args struct): the checks of Call after its JSON decoding.
func (b *Bot) callTyped(ctx context.Context, c *Call, args any) (Result, error) {
	t := c.Tool
	if !policy.Grants(c.Caller.Role, t.Capability) {
		c.Space, _ = spaceOf(args)
		msg := policy.DenyCapability(t.Name, t.Capability, c.Caller.Role)
		return Result{}, b.deny(ctx, c, &policy.Refusal{Check: policy.CheckCapability, Message: msg})
	}
	if v, ok := args.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return Result{}, err
		}
	}
	return b.run(ctx, c, args)
}

// AfterCommit runs f once the call's transaction has committed: at once
// for a call whose Update has returned, after the deciding transaction
// for a decision that runs inside one (Decide). A handler wakes waiters
// with it, so that no waiter reads the state before it is durable.
func (c *Call) AfterCommit(f func()) {
	if c.tx == nil {
		f()
		return
	}
	c.deferred = append(c.deferred, f)
}

// firstIn is Deliveries.First in tx.
func firstIn(tx kv.Tx, now time.Time, ids []string) (bool, error) {
	first := true
	for _, id := range ids {
		v, err := tx.Get(bucketDeliveries, []byte(id))
		if err != nil {
			return false, err
		}
		if v != nil {
			first = false
			continue
		}
		if err := tx.Put(bucketDeliveries, []byte(id), kv.U64(uint64(now.Unix()))); err != nil {
			return false, err
		}
		if err := deliveries.Add(tx, now, []byte(id)); err != nil {
			return false, err
		}
	}
	return first && len(ids) > 0, nil
}

// memoTx remembers what one transaction read and wrote by key, so that a
// decision reads its item once however many steps look at it (the view
// before, the handler, the view after). It is used for one run of one
// transaction function and forgotten with it.
type memoTx struct {
	kv.Tx
	m map[string][]byte // bucket NUL key -> value; a nil value: known absent
}

func newMemoTx(tx kv.Tx) *memoTx {
	if m, ok := tx.(*memoTx); ok {
		return m
	}
	return &memoTx{Tx: tx, m: map[string][]byte{}}
}

func memoKey(bucket string, key []byte) string { return bucket + "\x00" + string(key) }

// Get returns the remembered value, or reads and remembers it.
func (t *memoTx) Get(bucket string, key []byte) ([]byte, error) {
	k := memoKey(bucket, key)
	if v, ok := t.m[k]; ok {
		if v == nil {
			return nil, nil
		}
		return append([]byte(nil), v...), nil
	}
	v, err := t.Tx.Get(bucket, key)
	if err != nil {
		return nil, err
	}
	t.m[k] = v
	if v == nil {
		return nil, nil
	}
	return append([]byte(nil), v...), nil
}

// Put writes through and remembers the value.
func (t *memoTx) Put(bucket string, key, value []byte) error {
	if err := t.Tx.Put(bucket, key, value); err != nil {
		delete(t.m, memoKey(bucket, key))
		return err
	}
	t.m[memoKey(bucket, key)] = append([]byte{}, value...)
	return nil
}

// Delete deletes through and remembers the key as absent.
func (t *memoTx) Delete(bucket string, key []byte) error {
	if err := t.Tx.Delete(bucket, key); err != nil {
		delete(t.m, memoKey(bucket, key))
		return err
	}
	t.m[memoKey(bucket, key)] = nil
	return nil
}

// Finally forwards to the store's transaction (kv.Finisher).
func (t *memoTx) Finally(key string, newHook func() kv.PreCommit) (kv.PreCommit, bool) {
	return kv.Finally(t.Tx, key, newHook)
}
