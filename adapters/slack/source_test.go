package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// testBucket holds the test items' own state, as a domain package would.
const testBucket = "slacktest_items"

// testItem is the state of an item kind owned by the tests, so the adapter
// is tested without the memory or approvals packages.
type testItem struct {
	Title     string      `json:"title"`
	Fields    []bot.Field `json:"fields"`
	Requester string      `json:"requester"` // principal name
	ExpiresAt time.Time   `json:"expires_at,omitzero"`
	Status    string      `json:"status"`
	DecidedBy []string    `json:"decided_by,omitempty"`
	DecidedAt time.Time   `json:"decided_at,omitzero"`
	Reason    string      `json:"reason,omitempty"`
	Answers   []string    `json:"answers,omitempty"`
	Sensitive bool        `json:"sensitive,omitempty"`
	Options   []string    `json:"options,omitempty"`
	Multi     bool        `json:"multi,omitempty"`
	Quorum    int         `json:"quorum,omitempty"`
	Approvals []string    `json:"approvals,omitempty"`
	Decisions int         `json:"decisions"` // how many times a decision was applied
	// Edits: Arguments (an action's) or Value (a memory change's) may be
	// edited while pending; Proposed* keep what was proposed, EditedBy who
	// changed it.
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	Value         string          `json:"value,omitempty"`
	ProposedArgs  json.RawMessage `json:"proposed_args,omitempty"`
	ProposedValue string          `json:"proposed_value,omitempty"`
	EditedBy      string          `json:"edited_by,omitempty"`
	// Danger marks an item that cannot be undone (its view's Danger).
	Danger  *bot.Danger `json:"danger,omitempty"`
	Details []bot.Field `json:"details,omitempty"`
}

// testSource is the ItemSource of every test kind.
type testSource struct{}

func loadTestItem(tx kv.Tx, id uint64) (*testItem, error) {
	b, err := tx.Get(testBucket, kv.U64(id))
	if err != nil || b == nil {
		return nil, err
	}
	var t testItem
	return &t, json.Unmarshal(b, &t)
}

func saveTestItem(tx kv.Tx, id uint64, t *testItem) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return tx.Put(testBucket, kv.U64(id), b)
}

func (testSource) View(tx kv.Tx, rec bot.ItemRecord) (bot.Item, error) {
	t, err := loadTestItem(tx, rec.ID)
	if err != nil || t == nil {
		return bot.Item{}, fmt.Errorf("test item %d: %v", rec.ID, err)
	}
	it := bot.Item{
		Title: t.Title, Fields: t.Fields, ExpiresAt: t.ExpiresAt, Status: t.Status,
		DecidedBy: t.DecidedBy, DecidedAt: t.DecidedAt, Reason: t.Reason,
		Sensitive: t.Sensitive, Options: t.Options, Multi: t.Multi, Danger: t.Danger, Details: t.Details,
	}
	if t.Requester != "" {
		it.Requester = t.Requester + " [prin_" + t.Requester + "]"
	}
	if t.Status == "pending" {
		switch {
		case t.Arguments != nil:
			it.Editable = &bot.Editable{Kind: bot.EditArguments, Current: t.Arguments}
		case t.Value != "":
			cur, _ := json.Marshal(t.Value)
			it.Editable = &bot.Editable{Kind: bot.EditValue, Current: cur}
		}
	}
	if t.EditedBy != "" {
		c := &bot.Changes{By: t.EditedBy}
		if t.ProposedArgs != nil {
			c.Diff, c.More = bot.DiffArgs(t.ProposedArgs, t.Arguments)
		} else {
			c.Diff = []bot.Change{{Field: "value", From: bot.ShowValue(t.ProposedValue), To: bot.ShowValue(t.Value)}}
		}
		it.Changes = c
	}
	if t.Quorum > 1 && t.Status == "pending" {
		it.Tally = fmt.Sprintf("%d of %d approvals: %s", len(t.Approvals), t.Quorum, strings.Join(t.Approvals, ", "))
	}
	return it, nil
}

func (testSource) DecisionCall(rec bot.ItemRecord, approve bool, reason string, answers []string) (string, map[string]any, error) {
	return "test_decide", map[string]any{"item_id": rec.ID, "approve": approve, "reason": reason, "answers": answers}, nil
}

// EditCall maps an approval with an edit to test_decide with arguments
// or value, as the real sources map it to approve_action/confirm_change.
func (testSource) EditCall(rec bot.ItemRecord, edit json.RawMessage, reason string) (string, map[string]any, error) {
	args := map[string]any{"item_id": rec.ID, "approve": true, "reason": reason}
	var v string
	if json.Unmarshal(edit, &v) == nil {
		args["value"] = v
	} else {
		args["arguments"] = edit
	}
	return "test_decide", args, nil
}

type decideArgs struct {
	ItemID    uint64         `json:"item_id" jsonschema:"the item"`
	Approve   bool           `json:"approve" jsonschema:"approve or reject"`
	Reason    string         `json:"reason,omitempty" jsonschema:"why"`
	Answers   []string       `json:"answers,omitempty" jsonschema:"chosen options"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"edited arguments"`
	Value     *string        `json:"value,omitempty" jsonschema:"edited value"`
}

// validDBName is the test tool's schema for the db_name argument.
func validDBName(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return s != ""
}

// registerTestKinds installs the test item kinds and their decision tool:
// approve capability, requester ≠ approver (audited through c.Deny), one
// decision once, quorum.
func registerTestKinds(b *bot.Bot) error {
	for _, k := range []bot.ItemKind{bot.KindMemoryChange, bot.KindAction, bot.KindConsent, bot.KindQuestion} {
		b.Items().RegisterKind(k, testSource{})
	}
	return b.Register(bot.Tool{
		Name: "test_decide", Description: "decide a test item", Capability: policy.CapApprove, Args: decideArgs{},
		Handler: func(ctx context.Context, c *bot.Call, args any) (bot.Result, error) {
			a := args.(*decideArgs)
			var t *testItem
			if err := c.View(ctx, func(tx kv.Tx) error {
				var err error
				t, err = loadTestItem(tx, a.ItemID)
				return err
			}); err != nil {
				return bot.Result{}, err
			}
			if t == nil {
				return bot.Result{}, bot.Errorf(bot.KindNotFound, "No item #%d.", a.ItemID)
			}
			if a.Arguments != nil {
				if n, ok := a.Arguments["db_name"].(string); !ok || !validDBName(n) {
					return bot.Result{}, bot.Invalid("arguments.db_name", "must be lowercase letters and underscores, such as orders_staging")
				}
			}
			if strings.EqualFold(t.Requester, c.Caller.Name) {
				return bot.Result{}, c.Deny(ctx, fmt.Sprintf("Access denied: #%d was requested by %s; a requester cannot decide their own request.", a.ItemID, t.Requester))
			}
			var res bot.Result
			err := c.Update(ctx, func(tx *bot.Tx) error {
				t, err := loadTestItem(tx, a.ItemID)
				if err != nil {
					return err
				}
				if t.Status != "pending" {
					return bot.Errorf(bot.KindConflict, "#%d is not awaiting approval.", a.ItemID)
				}
				who := c.Caller.String()
				if slices.Contains(t.Approvals, who) {
					return bot.Errorf(bot.KindConflict, "You already approved #%d.", a.ItemID)
				}
				if a.Arguments != nil {
					edited, err := json.Marshal(a.Arguments)
					if err != nil {
						return err
					}
					if t.ProposedArgs == nil {
						t.ProposedArgs = t.Arguments
					}
					t.Arguments, t.EditedBy = edited, who
				}
				if a.Value != nil {
					if t.ProposedValue == "" {
						t.ProposedValue = t.Value
					}
					t.Value, t.EditedBy = *a.Value, who
				}
				event := bot.EventDecided
				switch {
				case !a.Approve:
					t.Status, t.Reason = "rejected", a.Reason
				case len(a.Answers) > 0:
					t.Status, t.Answers = "answered", a.Answers
				default:
					t.Approvals = append(t.Approvals, who)
					if len(t.Approvals) < t.Quorum {
						event = bot.EventUpdated
					} else {
						t.Status = "approved"
					}
				}
				if event == bot.EventDecided {
					t.DecidedBy = append(t.DecidedBy, who)
					t.DecidedAt = c.Now
					t.Decisions++
				}
				if err := saveTestItem(tx, a.ItemID, t); err != nil {
					return err
				}
				if err := tx.Audit("test_decide", fmt.Sprintf("#%d %s", a.ItemID, t.Status)); err != nil {
					return err
				}
				res = bot.Result{Text: fmt.Sprintf("#%d %s", a.ItemID, t.Status)}
				return tx.Emit(a.ItemID, event, "")
			})
			return res, err
		},
	})
}

// createTestItem records a pending item as a domain package would: its own
// state and the item (with its "created" outbox event) in one transaction.
func createTestItem(ctx context.Context, b *bot.Bot, kind bot.ItemKind, channel string, t testItem) (uint64, error) {
	if t.Status == "" {
		t.Status = "pending"
	}
	var id uint64
	err := b.Update(ctx, b.SystemCall(b.Now()), func(tx *bot.Tx) error {
		var err error
		id, err = tx.NewItem(kind, "test", bot.Space{UserID: "default"}, channel, time.Time{})
		if err != nil {
			return err
		}
		return saveTestItem(tx, id, &t)
	})
	return id, err
}

// emitNote queues a reminder or escalation for item id.
func emitNote(ctx context.Context, b *bot.Bot, id uint64, typ, note string) error {
	return b.Update(ctx, b.SystemCall(b.Now()), func(tx *bot.Tx) error { return tx.Emit(id, typ, note) })
}

// testItemState reads the test state of item id.
func testItemState(ctx context.Context, b *bot.Bot, id uint64) (testItem, error) {
	var t *testItem
	err := b.View(ctx, func(tx kv.Tx) error {
		var err error
		t, err = loadTestItem(tx, id)
		return err
	})
	if err == nil && t == nil {
		err = fmt.Errorf("no test item %d", id)
	}
	if err != nil {
		return testItem{}, err
	}
	return *t, nil
}
