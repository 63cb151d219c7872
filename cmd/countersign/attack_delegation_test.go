package main

import (
	"time"

	"github.com/countersign/countersign/bot/bottest"
	"net/http"
	"strings"
	"testing"
)

// Attacks on delegation (policy/delegation.go, bot/delegations.go), played
// over the API against the real server and its bbolt file: every party is
// a stored principal with its own key, so nothing but the store and the
// one decision rule decides.

const attackDelegationConfig = `tools:
  - name: give_insulin
    category: mutating
    schema: {type: object, required: [units]}
    approvers: {principals: [alice]}
  - name: set_dose
    category: mutating
    schema: {type: object, required: [dose]}
    approvers: {principals: [alice, carol]}
    quorum: 2
  - name: order_medication
    category: mutating
    schema: {type: object, required: [dose_mg]}
    stages:
      - {name: prescriber, approvers: {principals: [alice]}}
      - {name: pharmacist, approvers: {principals: [carol]}}
`

// TestAttackDelegationReach: a delegation lends no more than either
// person may decide. Refused: an agent lending or taking approvals; a
// delegation to oneself in another letter case, or to a viewer; a chained delegation
// (alice to bob, bob to dave: dave gets nothing of alice's); a delegate
// approving their own request, or their delegator's own request; a
// delegate outside the request's space; a delegator's approval counted
// twice (the delegate's for her, then her own); a third person ending
// the delegation. Allowed: the delegate
// inside both people's rights, recorded as cast for the delegator.
func TestAttackDelegationReach(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackDelegationConfig)
	agent := e.CreateKey("ward_bot", "member", "--kind", "agent")
	alice := e.CreateKey("alice", "member", "--kind", "person")
	bob := e.CreateKey("bob", "member", "--kind", "person", "--scopes", "ward_a")
	carol := e.CreateKey("carol", "member", "--kind", "person")
	dave := e.CreateKey("dave", "member", "--kind", "person")
	e.CreateKey("vera", "viewer", "--kind", "person")
	e.Start()

	request := func(key, tool, space string, args map[string]any) string {
		t.Helper()
		r := e.MustOK(key, "confirm_action", map[string]any{"tool": tool, "arguments": args, "user_id": space})
		return r.Data["request_id"].(string)
	}
	status := func(rid string) string {
		t.Helper()
		return e.MustOK(carol, "action_status", map[string]any{"request_id": rid}).Data["status"].(string)
	}
	refused := func(what string, res toolResponse) {
		t.Helper()
		if res.Status != http.StatusForbidden && res.Status != http.StatusBadRequest {
			t.Errorf("%s: answered %d %s, want 403 or 400", what, res.Status, res.Raw)
		}
	}

	// An agent neither lends nor takes approvals.
	refused("an agent lending", e.Call(agent, "delegate_approvals", map[string]any{"to": "bob", "for": "4h"}))
	refused("a delegation to an agent", e.Call(alice, "delegate_approvals", map[string]any{"to": "ward_bot", "for": "4h"}))
	refused("a delegation to a viewer (no approve)", e.Call(alice, "delegate_approvals", map[string]any{"to": "vera", "for": "4h"}))
	refused("a delegation to oneself in capitals", e.Call(alice, "delegate_approvals", map[string]any{"to": "ALICE", "for": "4h"}))

	e.MustOK(alice, "delegate_approvals", map[string]any{"to": "bob", "for": "4h"})
	// bob lends his own approvals on; alice's are not passed to dave.
	e.MustOK(bob, "delegate_approvals", map[string]any{"to": "dave", "for": "4h"})
	rid := request(agent, "give_insulin", "ward_a", map[string]any{"units": 4})
	refused("a chained delegation (alice to bob to dave)", e.Call(dave, "approve_action", map[string]any{"request_id": rid}))
	if s := status(rid); s != "pending" {
		t.Fatalf("after dave's approval under a chain: %s, want pending", s)
	}

	// bob's own request of alice's tool: never approved by bob.
	own := request(bob, "give_insulin", "ward_a", map[string]any{"units": 5})
	refused("the delegate approving his own request", e.Call(bob, "approve_action", map[string]any{"request_id": own}))
	// alice's own request: her delegation lends nothing on it.
	hers := request(alice, "give_insulin", "ward_a", map[string]any{"units": 6})
	refused("the delegate approving his delegator's own request", e.Call(bob, "approve_action", map[string]any{"request_id": hers}))
	// Outside bob's scope: alice's rights reach it, bob's do not.
	other := request(agent, "give_insulin", "ward_b", map[string]any{"units": 7})
	if res := e.Call(bob, "approve_action", map[string]any{"request_id": other}); res.Status != http.StatusForbidden && res.Status != http.StatusNotFound {
		t.Errorf("the delegate outside his scope: answered %d %s, want 403 or 404", res.Status, res.Raw)
	}
	for _, id := range []string{own, hers, other} {
		if s := status(id); s != "pending" {
			t.Errorf("%s after a refused delegate: %s, want pending", id, s)
		}
	}

	// Nobody but alice, bob or an admin ends it (the approval below shows
	// it still runs).
	if res := e.Call(carol, "end_delegation", map[string]any{"from": "alice"}); res.Status != http.StatusForbidden {
		t.Errorf("carol ending alice's delegation: %d %s, want 403", res.Status, res.Raw)
	}
	// Inside both people's rights: bob approves for alice.
	ok := e.MustOK(bob, "approve_action", map[string]any{"request_id": rid})
	if s := status(rid); s != "approved" || !strings.Contains(ok.Raw, "for alice") {
		t.Fatalf("bob's approval for alice: %s (%s), want approved, for alice", s, ok.Raw)
	}

	// A quorum of two (alice, carol): bob's approval for alice, then
	// alice's own, count once; bob again counts nothing more.
	q := request(agent, "set_dose", "ward_a", map[string]any{"dose": "5mg"})
	e.MustOK(bob, "approve_action", map[string]any{"request_id": q})
	if res := e.Call(alice, "approve_action", map[string]any{"request_id": q}); res.Status != http.StatusForbidden {
		t.Errorf("alice approving after her delegate approved for her: %d %s, want 403", res.Status, res.Raw)
	}
	e.Call(bob, "approve_action", map[string]any{"request_id": q})
	e.Call(dave, "approve_action", map[string]any{"request_id": q})
	if s := status(q); s != "pending" {
		t.Fatalf("one person's approval counted twice: %s, want pending", s)
	}
	e.MustOK(carol, "approve_action", map[string]any{"request_id": q})
	if s := status(q); s != "approved" {
		t.Fatalf("after carol: %s, want approved", s)
	}
}

// TestAttackDelegationStages: one person approves at most one stage, and
// a delegation does not get around it. bob approves the prescriber stage
// for alice; then neither bob (carol lends him her approvals) nor alice
// (carol lends them to her, once alice is back) may approve the
// pharmacist stage: each already signed off the first, bob as himself and
// alice through bob. carol's own approval completes it.
func TestAttackDelegationStages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, attackDelegationConfig)
	agent := e.CreateKey("ward_bot", "member", "--kind", "agent")
	alice := e.CreateKey("alice", "member", "--kind", "person")
	bob := e.CreateKey("bob", "member", "--kind", "person")
	carol := e.CreateKey("carol", "member", "--kind", "person")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "order_medication", "arguments": map[string]any{"dose_mg": 50}}).Data["request_id"].(string)
	status := func() toolResponse { return e.MustOK(carol, "action_status", map[string]any{"request_id": rid}) }

	e.MustOK(alice, "delegate_approvals", map[string]any{"to": "bob", "for": "4h"})
	first := e.MustOK(bob, "approve_action", map[string]any{"request_id": rid})
	if !strings.Contains(first.Raw, "for alice") {
		t.Fatalf("bob's prescriber approval: %s, want cast for alice", first.Raw)
	}
	e.MustOK(carol, "delegate_approvals", map[string]any{"to": "bob", "for": "4h"})
	if res := e.Call(bob, "approve_action", map[string]any{"request_id": rid}); res.Status != http.StatusForbidden {
		t.Errorf("bob approving the second stage for carol: %d %s, want 403", res.Status, res.Raw)
	}
	e.MustOK(alice, "end_delegation", map[string]any{})
	e.MustOK(carol, "delegate_approvals", map[string]any{"to": "alice", "for": "4h"})
	if res := e.Call(alice, "approve_action", map[string]any{"request_id": rid}); res.Status != http.StatusForbidden {
		t.Errorf("alice approving the second stage for carol: %d %s, want 403", res.Status, res.Raw)
	}
	if st := status(); st.Data["status"] != "pending" {
		t.Fatalf("after the refused second-stage approvals: %v, want pending", st.Data["status"])
	}
	e.MustOK(carol, "end_delegation", map[string]any{})
	e.MustOK(carol, "approve_action", map[string]any{"request_id": rid})
	if st := status(); st.Data["status"] != "approved" {
		t.Fatalf("after carol's own approval: %v, want approved", st.Data["status"])
	}
}

// TestAttackDelegationWindow: a delegation counts from its start until
// its end, its end excluded, on the server's clock: one asked to end in
// the past, or to run longer than 14 days, is refused; bob's approval for
// alice one second before the end counts, and his attempt at the end
// itself (before any sweep) is refused.
func TestAttackDelegationWindow(t *testing.T) {
	t.Parallel()
	clock := bottest.NewClock(time.Now().UTC().Truncate(time.Second))
	e := newTestEnv(t, attackDelegationConfig)
	e.clock = clock.Now
	agent := e.CreateKey("ward_bot", "member", "--kind", "agent")
	alice := e.CreateKey("alice", "member", "--kind", "person")
	bob := e.CreateKey("bob", "member", "--kind", "person")
	e.Start()
	for name, args := range map[string]map[string]any{
		"an end in the past":  {"to": "bob", "until": clock.Now().Add(-time.Minute).Format(time.RFC3339)},
		"more than 14 days":   {"to": "bob", "for": "337h"},
		"an end at this time": {"to": "bob", "until": clock.Now().Format(time.RFC3339)},
	} {
		if res := e.Call(alice, "delegate_approvals", args); res.Status != http.StatusBadRequest {
			t.Errorf("%s: answered %d %s, want 400", name, res.Status, res.Raw)
		}
	}
	e.MustOK(alice, "delegate_approvals", map[string]any{"to": "bob", "for": "1h"})
	ask := func() string {
		return e.MustOK(agent, "confirm_action", map[string]any{"tool": "give_insulin", "arguments": map[string]any{"units": 2}}).Data["request_id"].(string)
	}
	clock.Advance(time.Hour - time.Second) // the requests expire unanswered after 30 minutes: asked now
	before, at := ask(), ask()
	e.MustOK(bob, "approve_action", map[string]any{"request_id": before})
	clock.Advance(time.Second)
	if res := e.Call(bob, "approve_action", map[string]any{"request_id": at}); res.Status != http.StatusForbidden {
		t.Errorf("bob's approval at the delegation's end: %d %s, want 403", res.Status, res.Raw)
	}
	for rid, want := range map[string]string{before: "approved", at: "pending"} {
		if st := e.MustOK(alice, "action_status", map[string]any{"request_id": rid}).Data["status"]; st != want {
			t.Errorf("%s: %v, want %s", rid, st, want)
		}
	}
}
