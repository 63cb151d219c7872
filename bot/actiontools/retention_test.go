package actiontools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

// storedRequests returns the ids in the requests bucket.
func (e *env) storedRequests() map[string]bool {
	e.t.Helper()
	out := map[string]bool{}
	err := e.b.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend("requests", nil, nil, func(k, _ []byte) error { out[string(k)] = true; return nil })
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// count returns the number of keys in bucket.
func (e *env) count(bucket string) int {
	e.t.Helper()
	n := 0
	if err := e.b.View(context.Background(), func(tx kv.Tx) error {
		return tx.Ascend(bucket, nil, nil, func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) verifyChain() approvals.Report {
	e.t.Helper()
	if err := e.b.FlushAudit(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	rep, err := approvals.Verify(context.Background(), e.db, e.b.PublicKey())
	if err != nil {
		e.t.Fatal(err)
	}
	if !rep.Intact {
		e.t.Fatalf("the audit chain does not verify after the sweep: %+v, want it intact", rep)
	}
	return rep
}

// agedStore builds a store a year old: requests of every kind decided at
// start, action_id records, one request still pending, one decided
// recently.
func agedStore(t *testing.T, o Options) (e *env, old map[string]string, pending, recent string, agent *bot.Caller) {
	e = newEnv(t, o)
	agent = e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	u := func(m map[string]any) map[string]any { m["user_id"] = "u1"; return m }
	old = map[string]string{}

	d, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-1"}))
	e.ok(alice, "approve_action", map[string]any{"request_id": d["request_id"]})
	old["approved"] = d["request_id"].(string)
	d, _ = e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-2"}))
	e.ok(alice, "deny_action", map[string]any{"request_id": d["request_id"], "reason": "not today"})
	old["denied"] = d["request_id"].(string)
	d, _ = e.ok(agent, "confirm_action", map[string]any{"tool": "read_logs", "arguments": map[string]any{}, "action_id": "logs-1"})
	old["auto"] = d["request_id"].(string)
	d, _ = e.ok(agent, "ask_user", map[string]any{"question": "Which region?", "options": []string{"eu", "us"}})
	e.ok(alice, "answer_question", map[string]any{"request_id": d["request_id"], "answers": []string{"eu"}})
	old["answered"] = d["request_id"].(string)
	d, _ = e.ok(agent, "request_approval", u(map[string]any{"action": "delete the staging database"}))
	e.ok(agent, "record_approval", u(map[string]any{"action": "delete the staging database", "request_id": d["request_id"]}))
	old["consent"] = d["request_id"].(string)
	d, _ = e.ok(agent, "ask_user", map[string]any{"question": "Nobody answers this"})
	old["expired"] = d["request_id"].(string)
	e.clock.Advance(31 * time.Minute)                                         // past the default 30m timeout
	if _, err := e.b.Sweep(context.Background(), e.clock.Now()); err != nil { // the question expires
		t.Fatal(err)
	}

	// A year later: one request still pending (its 30m timeout not yet
	// reached), one decided a few minutes ago.
	e.clock.Advance(365 * 24 * time.Hour)
	p, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-3"}))
	pending = p["request_id"].(string)
	r, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-4"}))
	e.ok(alice, "approve_action", map[string]any{"request_id": r["request_id"]})
	recent = r["request_id"].(string)
	e.clock.Advance(5 * time.Minute)
	return e, old, pending, recent, agent
}

func TestRetentionDeletesOldClosedRequestsOnly(t *testing.T) {
	ret := Retention{Actions: 30 * 24 * time.Hour, Consents: 30 * 24 * time.Hour, Questions: 30 * 24 * time.Hour, ActionIDs: 7 * 24 * time.Hour}
	e, old, pending, recent, agent := agedStore(t, Options{Retention: ret})
	ctx := context.Background()
	itemsBefore := e.count("items")
	if _, err := e.b.Items().Get(ctx, uint64(e.request(old["approved"]).ItemID)); err != nil {
		t.Fatalf("the old item is missing before the sweep: %v", err)
	}
	oldItem := e.request(old["approved"]).ItemID
	pendingItem := e.request(pending).ItemID

	rep, err := e.b.Sweep(ctx, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep["retention_requests"] != len(old) {
		t.Fatalf("retention_requests deleted %d, want %d (%v)", rep["retention_requests"], len(old), rep)
	}
	left := e.storedRequests()
	for what, id := range old {
		if left[id] {
			t.Errorf("the %s request %s closed a year ago is still stored, want it deleted", what, id)
		}
		if be := e.fail(agent, "action_status", map[string]any{"request_id": id}); be.Kind != bot.KindNotFound {
			t.Errorf("action_status of the deleted %s request: %v (kind %d), want KindNotFound", what, be, be.Kind)
		}
	}
	if !left[pending] || !left[recent] || len(left) != 2 {
		t.Fatalf("left %v, want exactly the pending %s and the recent %s", left, pending, recent)
	}
	// The pending request is untouched: still pending, its item open.
	if r := e.request(pending); r.Status != approvals.StatusPending {
		t.Fatalf("pending request became %s, want %s", r.Status, approvals.StatusPending)
	}
	if it, err := e.b.Items().Get(ctx, pendingItem); err != nil || !it.Pending() {
		t.Fatalf("pending item after the sweep: %+v %v, want it pending and no error", it, err)
	}
	if open, _ := e.b.Items().Pending(ctx, 10); len(open) != 1 || open[0].ID != pendingItem {
		t.Fatalf("open items after the sweep: %+v, want only the pending item %d", open, pendingItem)
	}
	// Their chat items went with them.
	if _, err := e.b.Items().Get(ctx, oldItem); err != bot.ErrNoItem {
		t.Fatalf("the deleted request's item: %v, want %v", err, bot.ErrNoItem)
	}
	// approved, denied, answered, consent, expired question; the
	// auto-approved request never had an item.
	if got := e.count("items"); got != itemsBefore-5 {
		t.Fatalf("items %d -> %d, want 5 fewer", itemsBefore, got)
	}
	// The action_id records of deleted requests are gone; the pending
	// request's still answers with the same request.
	if n := e.count("request_keys"); n != 2 {
		t.Fatalf("%d action_id records left, want 2 (pending and recent)", n)
	}
	again, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-3"}))
	if again["request_id"] != pending {
		t.Fatalf("the pending request's action_id now names %v, want %s", again["request_id"], pending)
	}
	// The sweep said what it deleted, and the chain verifies.
	var named string
	for _, a := range e.audits(bot.ActionRetentionPruned) {
		named += a.Detail + "\n"
	}
	for what, id := range old {
		if !strings.Contains(named, id) {
			t.Errorf("no retention_pruned entry names the %s request %s:\n%s", what, id, named)
		}
	}
	if !strings.Contains(named, "retention.action_requests 720h0m0s") {
		t.Errorf("the audit does not say which setting deleted them, want %q in it:\n%s", "retention.action_requests 720h0m0s", named)
	}
	e.verifyChain()

	// A second sweep at the same time deletes nothing.
	rep, err = e.b.Sweep(ctx, e.clock.Now())
	if err != nil || rep["retention_requests"] != 0 || rep["retention_action_ids"] != 0 {
		t.Fatalf("second sweep: %v %v, want nothing deleted and no error", rep, err)
	}
}

func TestRetentionZeroKeepsEverything(t *testing.T) {
	e, old, _, _, _ := agedStore(t, Options{})
	before := e.storedRequests()
	keys := e.count("request_keys")
	rep, err := e.b.Sweep(context.Background(), e.clock.Now().Add(100*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep["retention_requests"] != 0 || rep["retention_action_ids"] != 0 {
		t.Fatalf("zero retention deleted: %v, want no requests and no action ids deleted", rep)
	}
	after := e.storedRequests()
	for _, id := range old {
		if !after[id] {
			t.Fatalf("%s was deleted with retention 0, want it kept", id)
		}
	}
	if len(after) != len(before) || e.count("request_keys") != keys {
		t.Fatalf("requests %d -> %d, action ids %d -> %d; want both unchanged", len(before), len(after), keys, e.count("request_keys"))
	}
}

func TestRetentionActionIDsExpireBeforeTheirRequests(t *testing.T) {
	// Requests kept for ever, action_id records for a week.
	e, old, pending, _, agent := agedStore(t, Options{Retention: Retention{ActionIDs: 7 * 24 * time.Hour}})
	rep, err := e.b.Sweep(context.Background(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep["retention_action_ids"] != 3 || rep["retention_requests"] != 0 {
		t.Fatalf("sweep: %v (want the three old action_id records forgotten, no request deleted)", rep)
	}
	if !e.storedRequests()[old["approved"]] {
		t.Fatal("the request was deleted with its action_id record")
	}
	// The same action_id now starts a new request that a person decides
	// again: never the old approval.
	d, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-1"}))
	if d["request_id"] == old["approved"] || d["status"] != "pending" {
		t.Fatalf("a forgotten action_id answered %v, want a new pending request, not %s", d, old["approved"])
	}
	if again, _ := e.ok(agent, "confirm_action", destroyArgs(map[string]any{"action_id": "drop-prod-3"})); again["request_id"] != pending {
		t.Fatalf("the pending request's action_id was forgotten: %v, want request_id %s", again, pending)
	}
	e.verifyChain()
}

func TestRetentionIndexesRequestsClosedBeforeItExisted(t *testing.T) {
	e, old, pending, recent, _ := agedStore(t, Options{})
	// A store from before the retention index: drop its entries.
	err := e.db.Update(context.Background(), func(tx kv.Tx) error {
		for _, b := range []string{"request_closed", "request_closed_keys"} {
			var keys [][]byte
			if err := tx.Ascend(b, nil, nil, func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil }); err != nil {
				return err
			}
			for _, k := range keys {
				if err := tx.Delete(b, k); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.opts.Retention = Retention{Actions: 30 * 24 * time.Hour, Consents: 30 * 24 * time.Hour, Questions: 30 * 24 * time.Hour, ActionIDs: 7 * 24 * time.Hour}
	e.restart()
	rep, err := e.b.Sweep(context.Background(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rep["retention_requests"] != len(old) {
		t.Fatalf("deleted %d, want %d", rep["retention_requests"], len(old))
	}
	if left := e.storedRequests(); len(left) != 2 || !left[pending] || !left[recent] {
		t.Fatalf("left %v, want exactly the pending %s and the recent %s", left, pending, recent)
	}
	e.verifyChain()
}

func TestRetentionDeletesInBoundedBatches(t *testing.T) {
	e := newEnv(t, Options{Retention: Retention{Actions: time.Hour}})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	n := bot.RetentionBatch*2 + 7
	for i := 0; i < n; i++ {
		e.ok(agent, "confirm_action", map[string]any{"tool": "read_logs", "arguments": map[string]any{"i": i}})
	}
	e.clock.Advance(2 * time.Hour)
	rep, err := e.b.Sweep(context.Background(), e.clock.Now())
	if err != nil || rep["retention_requests"] != n {
		t.Fatalf("sweep: %v %v, want %d deleted", rep, err, n)
	}
	if left := e.count("requests"); left != 0 {
		t.Fatalf("%d requests left, want 0", left)
	}
	if got := e.count("request_closed"); got != 0 {
		t.Fatalf("%d retention-index entries left, want 0", got)
	}
	// Three transactions (256 + 256 + 7), each audited with its head.
	heads := 0
	for _, a := range e.audits(bot.ActionRetentionPruned) {
		if strings.Contains(a.Detail, "; ids 1-") {
			heads++
		}
	}
	if heads != 3 {
		t.Fatalf("%d deletion batches audited, want 3", heads)
	}
	e.verifyChain()
}
