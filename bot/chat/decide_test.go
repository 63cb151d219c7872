package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// counting wraps a store and counts transactions and item loads (reads of
// the item record and of the action request behind it).
type counting struct {
	kv.Store
	mu                      sync.Mutex
	updates, views, records int
	requests                int
}

func (c *counting) Update(ctx context.Context, fn func(kv.Tx) error) error {
	c.mu.Lock()
	c.updates++
	c.mu.Unlock()
	return c.Store.Update(ctx, func(tx kv.Tx) error { return fn(countTx{tx, c}) })
}

func (c *counting) View(ctx context.Context, fn func(kv.Tx) error) error {
	c.mu.Lock()
	c.views++
	c.mu.Unlock()
	return c.Store.View(ctx, func(tx kv.Tx) error { return fn(countTx{tx, c}) })
}

// counts is a snapshot of a counting store's counters.
type counts struct{ updates, views, records, requests int }

func (c *counting) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counts{c.updates, c.views, c.records, c.requests}
}

func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates, c.views, c.records, c.requests = 0, 0, 0, 0
}

type countTx struct {
	kv.Tx
	c *counting
}

func (t countTx) Get(bucket string, key []byte) ([]byte, error) {
	t.c.mu.Lock()
	switch bucket {
	case "items":
		t.c.records++
	case "requests":
		t.c.requests++
	}
	t.c.mu.Unlock()
	return t.Tx.Get(bucket, key)
}

type env struct {
	t     *testing.T
	b     *bot.Bot
	store *counting
	agent *bot.Caller
	clock *bottest.Clock
}

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

const (
	uSmith  = "U0SMITH"  // dr_smith, member, every space
	uScoped = "U0SCOPED" // nurse_42, member, patient_42 only
	uViewer = "U0VIEW"   // vic, viewer
	uNobody = "U0NOBODY" // not mapped
)

func newEnv(t *testing.T) *env {
	t.Helper()
	store := &counting{Store: bottest.OpenStore(t)}
	clock := bottest.NewClock(t0)
	b := testbot.New(t, bot.Options{Store: store, Now: clock.Now, Sinks: []string{"slack"}})
	if _, err := actiontools.Register(b, actiontools.Options{Tools: []actiontools.ToolSpec{
		{Name: "delete_database", Category: "destructive", Timeout: 30 * time.Minute},
		{Name: "rollback", Category: "destructive", Quorum: 2},
		{Name: "set_dose", Category: "mutating"},
	}}); err != nil {
		t.Fatal(err)
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{
		{Name: "dr_smith", Role: policy.RoleMember, Slack: uSmith, Discord: "D0SMITH"},
		{Name: "nurse_42", Role: policy.RoleMember, Slack: uScoped, Scopes: []string{"patient_42"}},
		{Name: "vic", Role: policy.RoleViewer, Slack: uViewer},
		{Name: "jo", Role: policy.RoleMember, Slack: "U0JO"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	e := &env{t: t, b: b, store: store, clock: clock}
	e.agent = &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "deploy-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}
	return e
}

// request makes an action request in space and returns its item id.
func (e *env) request(tool, space string) uint64 {
	e.t.Helper()
	raw, _ := json.Marshal(map[string]any{"tool": tool, "arguments": map[string]any{"db": "prod"}, "summary": "drop prod", "dry_run": "DROP", "user_id": space})
	res, err := e.b.Call(context.Background(), e.agent, "confirm_action", raw)
	if err != nil {
		e.t.Fatal(err)
	}
	var d struct {
		ItemID uint64 `json:"item_id"`
	}
	b, _ := json.Marshal(res.Data)
	_ = json.Unmarshal(b, &d)
	if d.ItemID == 0 {
		e.t.Fatalf("no item: %s, want an item_id", b)
	}
	return d.ItemID
}

func (e *env) audits(action string) []approvals.Entry {
	e.t.Helper()
	var out []approvals.Entry
	err := e.b.View(context.Background(), func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 1 << 20})
		for _, x := range es {
			if x.Action == action {
				out = append(out, x)
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// click is a Slack button press: an Approve comes after the platform's
// confirm dialog (Confirmed), which a dangerous item's button carries.
func click(user string, id uint64, verb chat.Verb, delivery string) chat.Decision {
	return chat.Decision{Surface: bot.SurfaceSlack, UserID: user, ItemID: id, Verb: verb, Deliveries: []string{"slack:trigger:" + delivery}, Confirmed: verb == chat.Approve}
}

func TestDecide(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.request("delete_database", "patient_42")

	// Unmapped: refused, audited as the chat identity, nothing revealed.
	out := chat.Decide(ctx, e.b, click(uNobody, id, chat.Approve, "t1"))
	if out.Status != chat.Refused || out.Item.ID != 0 || !strings.Contains(out.Reply, "not mapped to a Countersign principal") {
		t.Fatalf("unmapped: %+v; want refused, no item, a reply with %q", out, "not mapped to a Countersign principal")
	}
	// A viewer: the one rule refuses (capability), audited by the tool.
	out = chat.Decide(ctx, e.b, click(uViewer, id, chat.Approve, "t2"))
	if out.Status != chat.Refused || !strings.Contains(out.Reply, "requires the 'approve' capability") {
		t.Fatalf("viewer: %+v; want refused, a reply with %q", out, "requires the 'approve' capability")
	}
	// A rejection needs a reason; nothing recorded.
	if out = chat.Decide(ctx, e.b, click(uSmith, id, chat.Reject, "t3")); out.Status != chat.Invalid || !strings.Contains(out.Reply, "A reason is required") {
		t.Fatalf("reject without reason: %+v; want invalid, a reply with %q", out, "A reason is required")
	}
	// Approve.
	out = chat.Decide(ctx, e.b, click(uSmith, id, chat.Approve, "t4"))
	if out.Status != chat.Decided || out.Item.Status != "approved" || out.Reply != "" || out.Caller.Name != "dr_smith" {
		t.Fatalf("approve: %+v; want decided, approved by dr_smith, no reply", out)
	}
	// The same delivery again: a duplicate, answered with the recorded
	// outcome, applied once.
	out = chat.Decide(ctx, e.b, click(uSmith, id, chat.Approve, "t4"))
	want := "#1 was already approved by dr_smith [U0SMITH] at 2026-03-02 08:00 UTC. Nothing was changed."
	if out.Status != chat.Duplicate || out.Reply != want {
		t.Fatalf("duplicate: %+v; want duplicate, reply %q", out, want)
	}
	// A new click on the decided item: the recorded outcome, not a
	// "may be stale" guess (issue 14.4).
	out = chat.Decide(ctx, e.b, click("U0JO", id, chat.Approve, "t5"))
	if out.Status != chat.Closed || out.Reply != want {
		t.Fatalf("late click: %+v; want closed, reply %q", out, want)
	}
	if n := len(e.audits("action_approved")); n != 1 {
		t.Fatalf("approved %d times, want 1", n)
	}
	if n := len(e.audits("access_denied")); n != 2 {
		t.Fatalf("%d refusals audited, want 2 (unmapped, viewer)", n)
	}
	// No such item.
	if out = chat.Decide(ctx, e.b, click(uSmith, 999, chat.Approve, "t6")); out.Status != chat.NotFound {
		t.Fatalf("missing: %+v, want not found", out)
	}
}

// TestDecideOutOfScope: a person scoped to patient_42 deciding a
// patient_99 item is refused privately and audited as that person, and is
// not shown the item, decided or not.
func TestDecideOutOfScope(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.request("delete_database", "patient_99")
	for i, verb := range []chat.Verb{chat.Approve, chat.Reject} {
		d := click(uScoped, id, verb, "s"+string(rune('0'+i)))
		d.Reason = "no"
		out := chat.Decide(ctx, e.b, d)
		if out.Status != chat.Refused || out.Item.ID != 0 || out.Reply != "Access denied: #1 belongs to a memory space outside your assigned scope." {
			t.Fatalf("%s out of scope: %+v; want refused, no item, reply %q", verb, out, "Access denied: #1 belongs to a memory space outside your assigned scope.")
		}
	}
	if out := chat.Prepare(ctx, e.b, click(uScoped, id, chat.Reject, "s9")); out.Status != chat.Refused {
		t.Fatalf("prepare out of scope: %+v, want refused", out)
	}
	got := e.audits("access_denied")
	if len(got) != 3 || got[0].Principal != "nurse_42 [U0SCOPED]" || got[0].UserID != "patient_99" {
		t.Fatalf("refusals audited: %+v; want 3, the first by %q in %q", got, "nurse_42 [U0SCOPED]", "patient_99")
	}
	// Decided by someone else, it stays hidden from the scoped person.
	chat.Decide(ctx, e.b, click(uSmith, id, chat.Approve, "s4"))
	if out := chat.Decide(ctx, e.b, click(uScoped, id, chat.Approve, "s5")); out.Status != chat.Refused || strings.Contains(out.Reply, "dr_smith") {
		t.Fatalf("decided item shown out of scope: %+v; want refused, no %q in the reply", out, "dr_smith")
	}
	// In scope, the same person decides.
	in := e.request("delete_database", "patient_42")
	if out := chat.Decide(ctx, e.b, click(uScoped, in, chat.Approve, "s6")); out.Status != chat.Decided {
		t.Fatalf("in scope: %+v, want decided", out)
	}
}

func TestDecideQuorumAndExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.request("rollback", "default")
	out := chat.Decide(ctx, e.b, click(uSmith, id, chat.Approve, "q1"))
	if out.Status != chat.Counted || !strings.Contains(out.Reply, "still needs others") || !strings.Contains(out.Reply, "1 of 2 approvals: dr_smith") {
		t.Fatalf("first of two: %+v; want counted, a reply with %q and %q", out, "still needs others", "1 of 2 approvals: dr_smith")
	}
	if out = chat.Decide(ctx, e.b, click("U0JO", id, chat.Approve, "q2")); out.Status != chat.Decided || out.Item.Status != "approved" {
		t.Fatalf("second of two: %+v; want decided and approved", out)
	}
	// Past expires_at, a click is answered with the recorded expiry.
	late := e.request("delete_database", "default")
	e.clock.Advance(31 * time.Minute)
	out = chat.Decide(ctx, e.b, click(uSmith, late, chat.Approve, "q3"))
	if out.Status != chat.Closed || !strings.HasPrefix(out.Reply, "#2 was already expired at 2026-03-02 08:31 UTC. Nothing was changed.\nReason: denied by automatic policy") {
		t.Fatalf("after expiry: %+v; want closed, a reply starting %q", out, "#2 was already expired at 2026-03-02 08:31 UTC. Nothing was changed.\nReason: denied by automatic policy")
	}
}

// TestDecisionCost measures what one approval costs in store
// transactions and item loads (reads of the item record and of the action
// request behind it), through chat.Decide as each surface calls it and
// through the tool API's approve_action, against the sequence the Slack
// adapter ran before the typed decision (dedupe per delivery id, load the
// item, load its record again to decide, decide, reload). Each must take at
// most 2 transactions and read the item once: bot.Decide does the dedupe,
// the checks, the decision and the item's new state in one transaction.
func TestDecisionCost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	deliveries := []string{"slack:envelope:e1", "slack:trigger:t1"} // Socket Mode: two dedupe keys

	old := e.request("delete_database", "default")
	e.store.reset()
	for _, id := range deliveries {
		if _, err := e.b.Deliveries().First(ctx, id+"-old"); err != nil {
			t.Fatal(err)
		}
	}
	caller := e.b.Chat().Caller(bot.SurfaceSlack, uSmith, nil)
	if _, err := e.b.Items().Get(ctx, old); err != nil {
		t.Fatal(err)
	}
	var key string // the old DecideItem: load the record, then the tool call
	if err := e.b.View(ctx, func(tx kv.Tx) error {
		rec, err := bot.LoadItemRecord(tx, old)
		key = rec.Key
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Call(ctx, caller, "approve_action", fmt.Appendf(nil, `{"request_id":%q}`, key)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Items().Get(ctx, old); err != nil {
		t.Fatal(err)
	}
	before := e.store.snapshot()
	t.Logf("before (the adapter's old sequence): %d transactions (%d writes, %d reads), %d item-record and %d request loads",
		before.updates+before.views, before.updates, before.views, before.records, before.requests)

	e.store.reset()
	e.request("delete_database", "default")
	agent := e.store.snapshot()
	t.Logf("an agent's confirm_action: %d transactions (%d writes, %d reads)", agent.updates+agent.views, agent.updates, agent.views)
	if agent.updates+agent.views > 2 {
		t.Errorf("an agent's confirm_action costs %d transactions, want at most 2", agent.updates+agent.views)
	}

	web := &bot.Caller{Principal: bot.Principal{ID: "web:dr_smith", Name: "dr_smith", Role: policy.RoleMember, Kind: "person"}, Surface: "web"}
	tests := []struct {
		name   string
		decide func(id uint64) error
	}{
		{"a Slack click", func(id uint64) error {
			return want(chat.Decide(ctx, e.b, chat.Decision{Surface: bot.SurfaceSlack, UserID: uSmith, Deliveries: deliveries, ItemID: id, Verb: chat.Approve, Confirmed: true}), chat.Decided)
		}},
		{"a Discord click", func(id uint64) error {
			return want(chat.Decide(ctx, e.b, chat.Decision{Surface: bot.SurfaceDiscord, UserID: "D0SMITH", Deliveries: []string{fmt.Sprintf("discord:%d", id)}, ItemID: id, Verb: chat.Approve, Confirmed: true}), chat.Decided)
		}},
		{"a console approval", func(id uint64) error {
			return want(chat.Decide(ctx, e.b, chat.Decision{Surface: "web", UserID: web.ID, Caller: web, Deliveries: []string{fmt.Sprintf("web:%s:n%d", web.ID, id)}, ItemID: id, Verb: chat.Approve, Confirm: "prod"}), chat.Decided)
		}},
		{"an API approval", func(id uint64) error {
			var reqID string
			if err := e.b.View(ctx, func(tx kv.Tx) error {
				rec, err := bot.LoadItemRecord(tx, id)
				reqID = rec.Key
				return err
			}); err != nil {
				return err
			}
			e.store.reset()
			_, err := e.b.Call(ctx, web, "approve_action", fmt.Appendf(nil, `{"request_id":%q}`, reqID))
			return err
		}},
	}
	for i, tt := range tests {
		id := e.request("delete_database", "default")
		if i > 0 {
			deliveries = []string{fmt.Sprintf("slack:envelope:e%d", i+1)}
		}
		e.store.reset()
		if err := tt.decide(id); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := e.store.snapshot()
		t.Logf("%s: %d transactions (%d writes, %d reads), %d item-record and %d request loads",
			tt.name, got.updates+got.views, got.updates, got.views, got.records, got.requests)
		if got.updates+got.views > 2 || got.records > 1 || got.requests > 1 {
			t.Errorf("%s costs %d transactions, %d item-record and %d request loads; want at most 2 transactions and one load of each", tt.name, got.updates+got.views, got.records, got.requests)
		}
	}
}

// want is nil when out has status st, else an error saying what it was.
func want(out chat.Outcome, st chat.Status) error {
	if out.Status != st {
		return fmt.Errorf("status %d (reply %q), want %d", out.Status, out.Reply, st)
	}
	return nil
}

// TestEditDecisionCost: approving with changes costs what a plain approval
// costs in store transactions and loads: the edit goes through the same
// decision (one dedupe, one item load, the tool's one transaction, the
// reload), not a second path around it.
func TestEditDecisionCost(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	measure := func(edit bool, n int) counts {
		id := e.request("set_dose", "default")
		e.store.reset()
		d := chat.Decision{Surface: bot.SurfaceSlack, UserID: uSmith, Deliveries: []string{fmt.Sprintf("slack:trigger:cost-%d", n)}, ItemID: id, Verb: chat.Approve, Confirmed: true}
		if edit {
			d.Arguments = json.RawMessage(`{"db":"staging"}`)
		}
		out := chat.Decide(ctx, e.b, d)
		if out.Status != chat.Decided {
			t.Fatalf("decide (edit %v): %+v, want decided", edit, out)
		}
		if edit && (out.Item.Changes == nil || !strings.Contains(chat.WithChanges(out.Item), "db prod → staging")) {
			t.Fatalf("the edited item says %q, want changes with %q", chat.WithChanges(out.Item), "db prod → staging")
		}
		return e.store.snapshot()
	}
	plain, edited := measure(false, 1), measure(true, 2)
	t.Logf("approve: %d transactions (%d writes), %d item-record and %d request loads; approve with changes: %d transactions (%d writes), %d item-record and %d request loads",
		plain.updates+plain.views, plain.updates, plain.records, plain.requests, edited.updates+edited.views, edited.updates, edited.records, edited.requests)
	if edited.updates+edited.views > plain.updates+plain.views || edited.records+edited.requests > plain.records+plain.requests {
		t.Fatalf("an edit costs %d transactions and %d loads, want at most a plain approval's %d and %d", edited.updates+edited.views, edited.records+edited.requests, plain.updates+plain.views, plain.records+plain.requests)
	}
}
