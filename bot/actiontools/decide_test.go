package actiontools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

func TestWhoMayDecide(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	viewer := e.principal("vic", policy.RoleViewer, "person")
	robot := e.principal("robot", policy.RoleMember, "agent")
	svc := e.principal("ci", policy.RoleAdmin, "service")
	scoped := e.principal("bob", policy.RoleMember, "person", "patient_7")
	secops := e.principal("secops", policy.RoleMember, "person")

	d, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	id := d["request_id"].(string)
	refusals := []struct {
		who  *bot.Caller
		want string
	}{
		{agent, "requires the 'approve' capability"}, // bot.Call: an agent key never approves
		{viewer, "requires the 'approve' capability"},
		{robot, "is an agent principal"},
		{svc, "is a service principal"},
		{scoped, "outside your assigned scope"},
	}
	for _, r := range refusals {
		be := e.fail(r.who, "approve_action", map[string]any{"request_id": id})
		if be.Kind != bot.KindDenied || !strings.Contains(be.Msg, r.want) {
			t.Fatalf("%s: %v, want a 403 with %q", r.who, be, r.want)
		}
	}
	// Only the tool's approvers: isolate_host names secops alone.
	iso, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "isolate_host", "arguments": map[string]any{"host": "db-1"}, "dry_run": "block all traffic to db-1"})
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": iso["request_id"]}); be.Kind != bot.KindDenied || !strings.Contains(be.Msg, "decided by principals secops") {
		t.Fatalf("alice on isolate_host: %v (kind %d), want KindDenied naming %q", be, be.Kind, "decided by principals secops")
	}
	if got, _ := e.ok(secops, "approve_action", map[string]any{"request_id": iso["request_id"]}); got["status"] != "approved" {
		t.Fatalf("secops: %v, want status approved", got)
	}
	// A member who requested cannot decide their own request.
	mine, _ := e.ok(alice, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": mine["request_id"]}); be.Kind != bot.KindDenied || !strings.Contains(be.Msg, "never decided by its own requester") {
		t.Fatalf("self-approval: %v (kind %d), want KindDenied naming %q", be, be.Kind, "never decided by its own requester")
	}
	// The same person from a chat account is still the requester.
	aliceChat := &bot.Caller{Principal: bot.Principal{ID: "chat:alice", Name: "alice", Role: policy.RoleMember, Kind: "person"}, Surface: "slack", ChatID: "U0123ABC"}
	if be := e.fail(aliceChat, "approve_action", map[string]any{"request_id": mine["request_id"]}); be.Kind != bot.KindDenied {
		t.Fatalf("self-approval from chat: %v (kind %d), want KindDenied", be, be.Kind)
	}
	// Every refusal is audited (the capability ones by bot.Call).
	if n := len(e.audits("access_denied")); n != len(refusals)+3 {
		t.Fatalf("%d refusals audited, want %d", n, len(refusals)+3)
	}
	if e.request(id).Status != "pending" {
		t.Fatal("a refused decision changed the request")
	}
	// Unknown and malformed ids.
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": "req_ffffffffffffffff"}); be.Kind != bot.KindNotFound {
		t.Fatalf("unknown id: %v (kind %d), want KindNotFound", be, be.Kind)
	}
	if be := e.fail(alice, "deny_action", map[string]any{"request_id": "req 1"}); be.Kind != bot.KindInvalid || be.Field != "request_id" {
		t.Fatalf("malformed id: %v (kind %d), want KindInvalid on field request_id", be, be.Kind)
	}

	// A chat decision goes through the same path: DecideItem -> approve_action.
	got, err := e.b.DecideItem(context.Background(), &bot.Caller{Principal: bot.Principal{ID: "chat:dr_smith", Name: "dr_smith", Role: policy.RoleMember, Kind: "person"}, Surface: "slack", ChatID: "U0999"}, uint64(d["item_id"].(float64)), true, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if gd := asMap(t, got.Data); gd["status"] != "approved" || gd["confirmed_by"] != "dr_smith [U0999]" {
		t.Fatalf("chat approval = %v, want status approved and confirmed_by %q", gd, "dr_smith [U0999]")
	}
}

func TestQuorumAndDenial(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	bob := e.principal("bob", policy.RoleMember, "person")
	carol := e.principal("carol", policy.RoleMember, "person")
	args := map[string]any{"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "dry_run": "redeploy v41 to 12 hosts"}

	d, _ := e.ok(agent, "confirm_action", args)
	id := d["request_id"]
	first, text := e.ok(alice, "approve_action", map[string]any{"request_id": id})
	if first["status"] != "pending" || first["tally"] != "1 of 2 approvals: alice" || !strings.Contains(text, "Counted") {
		t.Fatalf("first approval = %v %q, want status pending, tally %q and a text naming %q", first, text, "1 of 2 approvals: alice", "Counted")
	}
	if again, text := e.ok(alice, "approve_action", map[string]any{"request_id": id}); again["tally"] != "1 of 2 approvals: alice" || !strings.Contains(text, "already counted") {
		t.Fatalf("the same approver twice: %v %q, want tally %q and a text naming %q", again, text, "1 of 2 approvals: alice", "already counted")
	}
	if n := len(e.events("slack", bot.EventUpdated)); n != 1 {
		t.Fatalf("%d updated events, want 1 for the counted vote", n)
	}
	second, text := e.ok(bob, "approve_action", map[string]any{"request_id": id})
	if second["status"] != "approved" || second["confirmed_by"] != fmt.Sprintf("alice [%s], bob [%s]", alice.ID, bob.ID) || !strings.Contains(text, "confirmed by") {
		t.Fatalf("quorum reached: %v %q, want status approved, confirmed_by %q and a text naming %q", second, text, fmt.Sprintf("alice [%s], bob [%s]", alice.ID, bob.ID), "confirmed by")
	}
	be := e.fail(carol, "deny_action", map[string]any{"request_id": id, "reason": "too late"})
	if be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "already approved by alice") || asMap(t, be.Data)["status"] != "approved" {
		t.Fatalf("late deny: %v %v (kind %d), want KindConflict naming %q with status approved", be, be.Data, be.Kind, "already approved by alice")
	}
	if same, _ := e.ok(bob, "approve_action", map[string]any{"request_id": id}); same["status"] != "approved" {
		t.Fatalf("identical retry by a winner: %v, want status approved", same)
	}

	// One deny denies, and the reason reaches the agent.
	d2, _ := e.ok(agent, "confirm_action", args)
	e.ok(alice, "approve_action", map[string]any{"request_id": d2["request_id"]})
	denied, _ := e.ok(bob, "deny_action", map[string]any{"request_id": d2["request_id"], "reason": "the v41 migration is not reversible"})
	if denied["status"] != "denied" || denied["confirmed_by"] != "" {
		t.Fatalf("deny = %v, want status denied and an empty confirmed_by", denied)
	}
	st, text := e.ok(agent, "action_status", map[string]any{"request_id": d2["request_id"]})
	if st["reason"] != "the v41 migration is not reversible" || !strings.Contains(text, "the v41 migration is not reversible") || !strings.Contains(text, "do not work around") {
		t.Fatalf("the agent sees: %v %q, want reason %q, in the text too, and a text naming %q", st, text, "the v41 migration is not reversible", "do not work around")
	}
	if be := e.fail(carol, "approve_action", map[string]any{"request_id": d2["request_id"]}); be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "denied by bob") {
		t.Fatalf("approve after deny: %v (kind %d), want KindConflict naming %q", be, be.Kind, "denied by bob")
	}
	if got := e.audits("action_approved", "action_denied"); len(got) != 2 {
		t.Fatalf("%d decision audit entries, want 2", len(got))
	}
	if got := e.audits("action_vote"); len(got) != 2 {
		t.Fatalf("%d vote audit entries, want 2", len(got))
	}
	if n := len(e.events("slack", bot.EventDecided)); n != 2 {
		t.Fatalf("%d decided events, want 2", n)
	}
}

// TestConcurrentDecisions races 100 approvers on one request: exactly one
// outcome, one decision audit entry, one decided event; every loser gets
// the recorded outcome as a 409.
func TestConcurrentDecisions(t *testing.T) {
	for _, quorum := range []int{1, 3} {
		t.Run(fmt.Sprintf("quorum %d", quorum), func(t *testing.T) {
			e := newEnv(t, Options{Tools: []ToolSpec{{Name: "drop_table", Category: "destructive", Quorum: quorum}}})
			agent := e.principal("etl-bot", policy.RoleAgent, "agent")
			members := make([]*bot.Caller, 100)
			for i := range members {
				members[i] = e.principal(fmt.Sprintf("m%03d", i), policy.RoleMember, "person")
			}
			d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "drop_table", "arguments": map[string]any{"t": "x"}, "dry_run": "drop x"})
			id := d["request_id"].(string)
			done := make(chan struct{})
			waitErr := make(chan error, 1)
			go func() {
				_, err := e.b.Call(context.Background(), agent, "action_status", []byte(`{"request_id":"`+id+`","wait_seconds":60}`))
				waitErr <- err
				close(done)
			}()

			type result struct {
				status string
				err    error
			}
			results := make(chan result, len(members))
			var wg sync.WaitGroup
			for i, m := range members {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tool := "approve_action"
					if quorum == 1 && i%2 == 1 {
						tool = "deny_action"
					}
					res, err := e.b.Call(context.Background(), m, tool, []byte(`{"request_id":"`+id+`","reason":"r"}`))
					if err != nil {
						results <- result{err: err}
						return
					}
					results <- result{status: asMap(t, res.Data)["status"].(string)}
				}()
			}
			wg.Wait()
			close(results)
			decided, counted, conflicts := 0, 0, 0
			for r := range results {
				var be *bot.Error
				switch {
				case r.err == nil && r.status == "pending":
					counted++
				case r.err == nil:
					decided++
				case errors.As(r.err, &be) && be.Kind == bot.KindConflict:
					conflicts++
				default:
					t.Fatalf("unexpected answer: %v, want a result or a KindConflict error", r.err)
				}
			}
			if decided != 1 || counted != quorum-1 || conflicts != 100-quorum {
				t.Fatalf("decided %d counted %d conflicts %d; want 1, %d, %d", decided, counted, conflicts, quorum-1, 100-quorum)
			}
			if got := e.audits("action_approved", "action_denied"); len(got) != 1 {
				t.Fatalf("%d decision audit entries, want exactly 1", len(got))
			}
			if n := len(e.events("slack", bot.EventDecided)); n != 1 {
				t.Fatalf("%d decided events, want 1", n)
			}
			<-done
			if err := <-waitErr; err != nil {
				t.Fatalf("the long poll: %v", err)
			}
			if n := e.s.waits.pendingWaiters(); n != 0 {
				t.Fatalf("%d waiter entries left behind, want 0", n)
			}
		})
	}
}

func TestLongPoll(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	id := d["request_id"].(string)

	type answer struct {
		data map[string]any
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := e.b.Call(context.Background(), agent, "action_status", []byte(`{"request_id":"`+id+`","wait_seconds":60}`))
		if err != nil {
			got <- answer{err: err}
			return
		}
		raw, _ := json.Marshal(res.Data)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		got <- answer{data: m}
	}()
	waitFor(t, func() bool { return e.s.waits.pendingWaiters() == 1 })
	e.ok(alice, "approve_action", map[string]any{"request_id": id})
	a := <-got
	if a.err != nil || a.data["status"] != "approved" || a.data["confirmed_by"] != "alice ["+alice.ID+"]" {
		t.Fatalf("long poll = %v, %v, want status approved, confirmed_by %q and no error", a.data, a.err, "alice ["+alice.ID+"]")
	}

	// A cancelled call returns at once with the context's error.
	d2, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := e.b.Call(ctx, agent, "action_status", []byte(`{"request_id":"`+d2["request_id"].(string)+`","wait_seconds":60}`))
		errc <- err
	}()
	waitFor(t, func() bool { return e.s.waits.pendingWaiters() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled long poll: %v, want context.Canceled", err)
	}
	if n := e.s.waits.pendingWaiters(); n != 0 {
		t.Fatalf("%d waiters left after cancel, want 0", n)
	}
	// Without wait_seconds it answers at once; a bad wait is a 400.
	if st, _ := e.ok(agent, "action_status", map[string]any{"request_id": d2["request_id"]}); st["status"] != "pending" {
		t.Fatalf("status = %v, want status pending", st)
	}
	if be := e.fail(agent, "action_status", map[string]any{"request_id": d2["request_id"], "wait_seconds": 61}); be.Field != "wait_seconds" {
		t.Fatalf("wait 61: %v, want an error on field wait_seconds", be)
	}
	// A principal scoped elsewhere cannot read it.
	scoped := e.principal("nurse-bot", policy.RoleAgent, "agent", "patient_7")
	if be := e.fail(scoped, "action_status", map[string]any{"request_id": d2["request_id"]}); be.Kind != bot.KindDenied {
		t.Fatalf("out of scope: %v (kind %d), want KindDenied", be, be.Kind)
	}
}

// waitFor polls cond until it holds or a deadline passes. It waits for an
// asynchronous event; it asserts nothing about speed.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSamePartyMatchesSamePrincipal keeps approvals' requester match the
// one of the decision rule (policy.SamePrincipal).
func TestSamePartyMatchesSamePrincipal(t *testing.T) {
	ids := []string{"", "prin_1", "prin_2", "chat:alice"}
	names := []string{"", "alice", "Alice", "bob"}
	for _, aID := range ids {
		for _, aName := range names {
			for _, bID := range ids {
				for _, bName := range names {
					a := approvals.Party{ID: aID, Name: aName}
					b := approvals.Party{ID: bID, Name: bName}
					if got, want := a.Same(b), policy.SamePrincipal(aID, aName, bID, bName); got != want {
						t.Errorf("Same(%q %q, %q %q) = %v, want %v as policy.SamePrincipal", aID, aName, bID, bName, got, want)
					}
				}
			}
		}
	}
}
