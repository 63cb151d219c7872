package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/actiontools"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/policy"
)

const (
	uAlice = "U0ALICE" // alice, member, an approver of transfer
	uBob   = "U0BOB"   // bob, member, not an approver of transfer
	uCarol = "U0CAROL" // carol, member, an approver of transfer
	uWard  = "U0WARD"  // ward, member, scoped to patient_7
)

func newDelegationEnv(t *testing.T) *env {
	t.Helper()
	clock := bottest.NewClock(t0)
	b := testbot.New(t, bot.Options{Store: bottest.OpenStore(t), Now: clock.Now, Sinks: []string{"slack"}})
	if _, err := actiontools.Register(b, actiontools.Options{Tools: []actiontools.ToolSpec{
		{Name: "transfer", Category: "mutating", Quorum: 2, Approvers: policy.Approvers{Principals: []string{"alice", "carol"}}},
		{Name: "set_dose", Category: "mutating", Approvers: policy.Approvers{Principals: []string{"carol"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{
		{Name: "alice", Role: policy.RoleMember, Slack: uAlice},
		{Name: "bob", Role: policy.RoleMember, Slack: uBob},
		{Name: "carol", Role: policy.RoleMember, Slack: uCarol},
		{Name: "ward", Role: policy.RoleMember, Slack: uWard, Scopes: []string{"patient_7"}},
		{Name: "vic", Role: policy.RoleViewer, Slack: uViewer},
		{Name: "root", Role: policy.RoleAdmin, Slack: "U0ROOT"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	e := &env{t: t, b: b, clock: clock}
	e.agent = &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "pay-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}
	return e
}

func (e *env) say(user, text string) string {
	e.t.Helper()
	return chat.Run(context.Background(), e.b, e.b.Chat().Caller(bot.SurfaceSlack, user, nil), bot.SurfaceSlack, user, text).Text
}

// updated counts the queued "updated" events of each item for Slack.
func (e *env) updated() map[uint64]int {
	e.t.Helper()
	evs, err := e.b.Outbox().Due(context.Background(), "slack", e.clock.Now().Add(time.Hour), 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[uint64]int{}
	for _, ev := range evs {
		if ev.Type == bot.EventUpdated {
			out[ev.ItemID]++
		}
	}
	return out
}

func (e *env) item(id uint64) bot.Item {
	e.t.Helper()
	it, err := e.b.Items().Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

func fieldOf(it bot.Item, label string) string {
	for _, f := range it.Fields {
		if f.Label == label {
			return f.Value
		}
	}
	return ""
}

// TestDelegateCommand: alice lends her approvals to bob by a chat
// command; the card says so; bob's approval counts for alice (and says
// so in the tally and decided_by); alice's own would count twice and is
// refused; carol's completes the quorum; every step is audited.
func TestDelegateCommand(t *testing.T) {
	e := newDelegationEnv(t)
	ctx := context.Background()
	id := e.request("transfer", "patient_42")

	if out := chat.Decide(ctx, e.b, click(uBob, id, chat.Approve, "b0")); out.Status != chat.Refused || !strings.Contains(out.Reply, "not among them") {
		t.Fatalf("bob before any delegation: %+v, want refused as no approver", out)
	}
	other := e.request("set_dose", "patient_42") // alice may not decide it
	before := e.updated()
	reply := e.say(uAlice, "/countersign delegate <@U0BOB> until 18:00")
	if !strings.HasPrefix(reply, "Delegated: bob decides in your name until 2026-03-02 18:00 UTC") {
		t.Fatalf("delegate reply: %q, want it to start with %q", reply, "Delegated: bob decides in your name until 2026-03-02 18:00 UTC")
	}
	it, err := e.b.Items().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fieldOf(it, "Delegated"), "alice, away; delegated to bob until 2026-03-02 18:00 UTC"; got != want {
		t.Fatalf("card line: got %q, want %q", got, want)
	}
	if got := e.updated(); got[id] != before[id]+1 || got[other] != before[other] {
		t.Fatalf("card updates queued by the delegation: #%d %d -> %d, #%d %d -> %d; want one for #%d, none for #%d (alice may not decide it)",
			id, before[id], got[id], other, before[other], got[other], id, other)
	}
	if got := fieldOf(e.item(other), "Delegated"); got != "" {
		t.Fatalf("a card alice may not decide shows %q, want no Delegated line", got)
	}
	if got := e.audits("delegation_set"); len(got) != 1 || !strings.Contains(got[0].Detail, "alice lends their approvals to bob until 2026-03-02 18:00 UTC") {
		t.Fatalf("delegation_set audits: %+v; want one with %q", got, "alice lends their approvals to bob until 2026-03-02 18:00 UTC")
	}

	out := chat.Decide(ctx, e.b, click(uBob, id, chat.Approve, "b1"))
	if out.Status != chat.Counted || out.Item.Tally != "1 of 2 approvals: bob for alice" {
		t.Fatalf("bob for alice: status %v tally %q reply %q, want counted, 1 of 2 approvals: bob for alice", out.Status, out.Item.Tally, out.Reply)
	}
	out = chat.Decide(ctx, e.b, click(uAlice, id, chat.Approve, "a1"))
	if out.Status != chat.Refused || !strings.Contains(out.Reply, "bob approved req_") || !strings.Contains(out.Reply, "would count twice") {
		t.Fatalf("alice after bob approved for her: %+v, want refused (counts twice)", out)
	}
	out = chat.Decide(ctx, e.b, click(uCarol, id, chat.Approve, "c1"))
	if out.Status != chat.Decided || out.Item.Status != "approved" {
		t.Fatalf("carol: %+v, want approved", out)
	}
	if got := strings.Join(out.Item.DecidedBy, ", "); got != "bob [U0BOB] for alice, carol [U0CAROL]" {
		t.Fatalf("decided_by: got %q, want %q", got, "bob [U0BOB] for alice, carol [U0CAROL]")
	}
	if got := fieldOf(out.Item, "Delegated"); got != "" {
		t.Fatalf("a decided card still shows %q, want no Delegated line", got)
	}

	// `delegate` shows what runs, to either side.
	if got := e.say(uBob, "delegate"); !strings.Contains(got, "Lent to you: alice, away; delegated to bob") {
		t.Fatalf("bob's delegate: %q, want it to contain %q", got, "Lent to you: alice, away; delegated to bob")
	}
	// bob may hand it back; then he decides only what he may himself.
	if got := e.say(uBob, "delegate off alice"); !strings.HasPrefix(got, "Ended: alice no longer lends their approvals to bob.") {
		t.Fatalf("bob hands it back: %q, want it to start with %q", got, "Ended: alice no longer lends their approvals to bob.")
	}
	id2 := e.request("transfer", "patient_42")
	if out := chat.Decide(ctx, e.b, click(uBob, id2, chat.Approve, "b2")); out.Status != chat.Refused {
		t.Fatalf("bob after handing back: %+v, want refused", out)
	}
	if got := e.audits("delegation_ended"); len(got) != 1 || !strings.Contains(got[0].Detail, "alice no longer lends their approvals to bob") {
		t.Fatalf("delegation_ended audits: %+v; want one with %q", got, "alice no longer lends their approvals to bob")
	}
}

// TestDelegationEnds: a suspension of the delegator ends the delegation
// at once, voids the approvals cast for them, and is audited; a window
// past its end lends nothing; the delegate's own scope bounds what they
// decide.
func TestDelegationEnds(t *testing.T) {
	e := newDelegationEnv(t)
	ctx := context.Background()
	id := e.request("transfer", "patient_42")
	if got := e.say(uAlice, "delegate <@U0BOB|bob> for 2h"); !strings.HasPrefix(got, "Delegated: bob") {
		t.Fatalf("delegate: %q, want it to start with %q", got, "Delegated: bob")
	}
	if out := chat.Decide(ctx, e.b, click(uBob, id, chat.Approve, "b1")); out.Status != chat.Counted {
		t.Fatalf("bob for alice: %+v, want counted", out)
	}
	if _, recorded, err := e.b.Chat().SuspendAccount(ctx, bot.SurfaceSlack, uAlice, "the Slack account was deactivated"); err != nil || !recorded {
		t.Fatalf("suspend alice: recorded = %v, %v; want true", recorded, err)
	}
	it, _ := e.b.Items().Get(ctx, id)
	if it.Tally != "0 of 2 approvals" || fieldOf(it, "Delegated") != "" {
		t.Fatalf("after alice's suspension: tally %q, card line %q; want 0 of 2 approvals and none", it.Tally, fieldOf(it, "Delegated"))
	}
	if got := e.audits("delegation_ended"); len(got) != 1 || !strings.Contains(got[0].Detail, "alice was suspended from approving") {
		t.Fatalf("delegation_ended audits: %+v; want one with %q", got, "alice was suspended from approving")
	}
	if out := chat.Decide(ctx, e.b, click(uBob, id, chat.Approve, "b2")); out.Status != chat.Refused {
		t.Fatalf("bob after alice's suspension: %+v, want refused", out)
	}

	// carol lends hers to ward, who is scoped to patient_7 only.
	if got := e.say(uCarol, "delegate ward until 2026-03-02 12:00"); !strings.HasPrefix(got, "Delegated: ward") {
		t.Fatalf("delegate to ward: %q, want it to start with %q", got, "Delegated: ward")
	}
	if out := chat.Decide(ctx, e.b, click(uWard, id, chat.Approve, "w1")); out.Status != chat.Refused {
		t.Fatalf("ward outside his scope: %+v, want refused", out)
	}
	id7 := e.request("transfer", "patient_7")
	if out := chat.Decide(ctx, e.b, click(uWard, id7, chat.Approve, "w2")); out.Status != chat.Counted {
		t.Fatalf("ward in his scope, for carol: %+v, want counted", out)
	}
	e.clock.Set(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	id7b := e.request("transfer", "patient_7")
	if out := chat.Decide(ctx, e.b, click(uWard, id7b, chat.Approve, "w3")); out.Status != chat.Refused {
		t.Fatalf("ward after the window: %+v, want refused", out)
	}
	// The sweep records its end once, and the cards are updated.
	for i, want := range []int{1, 0} {
		rep, err := e.b.Sweep(ctx, e.clock.Now())
		if err != nil || rep["delegations"] != want {
			t.Fatalf("sweep %d: %v %v, want %d delegation ended", i+1, rep, err, want)
		}
	}
	if got := e.audits("delegation_ended"); len(got) != 2 || !strings.Contains(got[0].Detail, "carol no longer lends their approvals to ward: its time came (2026-03-02 12:00 UTC)") {
		t.Fatalf("delegation_ended audits: %+v; want 2, the first with %q", got, "carol no longer lends their approvals to ward: its time came (2026-03-02 12:00 UTC)")
	}
}

// TestDelegateRefusals: what cannot be delegated says why, and records
// nothing.
func TestDelegateRefusals(t *testing.T) {
	e := newDelegationEnv(t)
	for _, tt := range []struct {
		user, text, want string
	}{
		{uAlice, "delegate alice until 18:00", "cannot delegate your approvals to yourself"},
		{uAlice, "delegate nobody_here until 18:00", `no person named "nobody_here"`},
		{uAlice, "delegate bob for 15d", "at most 14 days"},
		{uAlice, "delegate vic until 18:00", "the role viewer does not hold approve"},
		{uViewer, "delegate bob until 18:00", "Access denied: you cannot delegate your approvals"},
		{uAlice, "delegate <@U0NOBODY> until 18:00", "I don't know who"},
		{uAlice, "delegate bob until teatime", "Usage: `delegate @bob until 18:00`"},
		{uAlice, "delegate off", "You have no delegation running"},
		{uBob, "delegate off alice", "alice has no delegation running"},
	} {
		if got := e.say(tt.user, tt.text); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q\ngot  %q\nwant it to contain %q", tt.user, tt.text, got, tt.want)
		}
	}
	if got := e.audits("delegation_set"); len(got) != 0 {
		t.Fatalf("refused delegations audited as set: %+v, want none", got)
	}
	if got := e.audits("access_denied"); len(got) != 1 || got[0].Principal != "vic [U0VIEW]" || !strings.Contains(got[0].Detail, "delegate: Access denied: you cannot delegate your approvals") {
		t.Fatalf("the viewer's refused delegation is not audited as theirs: %+v; want one by %q with %q", got, "vic [U0VIEW]", "delegate: Access denied: you cannot delegate your approvals")
	}
	// A delegate who is away too takes nothing: not passed on.
	if got := e.say(uBob, "delegate carol until 18:00"); !strings.HasPrefix(got, "Delegated") {
		t.Fatalf("bob to carol: %q, want it to start with %q", got, "Delegated")
	}
	if got := e.say(uAlice, "delegate bob until 18:00"); !strings.Contains(got, "bob is away too") {
		t.Fatalf("alice to bob, who is away: %q, want it to contain %q", got, "bob is away too")
	}
	// Only the two people or an admin end a delegation.
	_, err := e.b.Delegations().End(context.Background(), e.b.Chat().Caller(bot.SurfaceSlack, uAlice, nil), "bob", "")
	var be *bot.Error
	if !errors.As(err, &be) || be.Kind != bot.KindDenied {
		t.Fatalf("alice ending bob's delegation: %v, want KindDenied", err)
	}
	if got := e.audits("access_denied"); len(got) != 2 || got[0].Principal != "alice [U0ALICE]" {
		t.Fatalf("alice's refused end is not audited: %+v; want 2, the first by %q", got, "alice [U0ALICE]")
	}
	// An admin ends anyone's.
	if got := e.say("U0ROOT", "delegate off bob"); !strings.HasPrefix(got, "Ended: bob no longer lends their approvals to carol.") {
		t.Fatalf("the admin's delegate off bob: %q, want it to start with %q", got, "Ended: bob no longer lends their approvals to carol.")
	}
	if got := e.audits("delegation_ended"); len(got) != 1 || !strings.Contains(got[0].Detail, "ended from slack by root [U0ROOT]") {
		t.Fatalf("the admin's end is not audited: %+v; want one with %q", got, "ended from slack by root [U0ROOT]")
	}
}
