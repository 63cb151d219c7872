package actiontools

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

// TestDirectoryGroupDecides: a tool whose approvers are a group only the
// directory provides. While the directory lists nobody in it, the card
// says so; once it lists ph_lee, ph_lee's approval counts and ph_kim's is
// refused as not among them. When the directory removes ph_lee, their
// approval stops counting in that transaction (audited, the card
// updated), and their next approval is refused. Deleting the group takes
// everyone's.
func TestDirectoryGroupDecides(t *testing.T) {
	e := newEnv(t, Options{Tools: append(testTools(), ToolSpec{Name: "dispense", Category: "mutating", Quorum: 2,
		Approvers: approvals.Approvers{Groups: []string{"pharmacists"}}})})
	agent := e.principal("ward_bot", policy.RoleAgent, "agent")
	lee := e.principal("ph_lee", policy.RoleMember, "person")
	kim := e.principal("ph_kim", policy.RoleMember, "person")
	ctx := context.Background()
	setGroup := func(members ...string) {
		t.Helper()
		if err := e.b.Update(ctx, e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
			return bot.PutDirectoryGroup(tx, bot.DirectoryGroup{Name: "Pharmacists", Members: members})
		}); err != nil {
			t.Fatal(err)
		}
	}
	noApprovers := func(id uint64) string {
		t.Helper()
		it, err := e.b.Items().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range it.Fields {
			if f.Label == "No approvers yet" {
				return f.Value
			}
		}
		return ""
	}

	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "dispense", "arguments": map[string]any{"drug": "warfarin"}})
	id, item := d["request_id"].(string), uint64(d["item_id"].(float64))
	if got := noApprovers(item); !strings.Contains(got, "lists nobody in group pharmacists now") {
		t.Fatalf("the card of a group nobody is in says %q, want that nobody is in it", got)
	}
	if be := e.fail(lee, "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckApprovers) {
		t.Fatalf("ph_lee before the directory lists them: %v, want refused by the approvers check", be)
	}

	setGroup("ph_lee")
	if got := noApprovers(item); got != "" {
		t.Fatalf("the card once the group has a member still says %q, want nothing", got)
	}
	if got, _ := e.ok(lee, "approve_action", map[string]any{"request_id": id}); got["status"] != "pending" {
		t.Fatalf("ph_lee's approval: %v, want counted (pending, 1 of 2)", got["status"])
	}
	if be := e.fail(kim, "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckApprovers) || !strings.Contains(be.Msg, "is not among them") {
		t.Fatalf("ph_kim, not in the group: %v, want refused by the approvers check", be)
	}
	updates := len(e.events("slack", bot.EventUpdated))

	setGroup("ph_kim")
	r := e.request(id)
	if got := r.Approvals(); len(got) != 0 || !strings.Contains(r.Votes[0].Void, "the directory removed them from the group Pharmacists") {
		t.Fatalf("after ph_lee left the group: counting %v, vote %+v; want none counting, and why", got, r.Votes[0])
	}
	if got := e.audits("group_votes_void"); len(got) != 1 || !strings.Contains(got[0].Detail, `"ph_lee" left the directory's group Pharmacists`) {
		t.Fatalf("group_votes_void entries: %+v, want 1 naming %q", got, `"ph_lee" left the directory's group Pharmacists`)
	}
	if n := len(e.events("slack", bot.EventUpdated)); n <= updates {
		t.Errorf("no card update queued when ph_lee's approval stopped counting (%d updates, %d before), want more than before", n, updates)
	}
	if be := e.fail(lee, "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckApprovers) {
		t.Fatalf("ph_lee after leaving the group: %v, want refused by the approvers check", be)
	}
	if got, _ := e.ok(kim, "approve_action", map[string]any{"request_id": id}); got["status"] != "pending" {
		t.Fatalf("ph_kim's approval: %v, want the first of two (pending)", got["status"])
	}

	// The directory deletes the group: ph_kim's approval goes too, and
	// the card says nobody is in it.
	if err := e.b.Update(ctx, e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
		return bot.DeleteDirectoryGroup(tx, "PHARMACISTS")
	}); err != nil {
		t.Fatal(err)
	}
	if got := e.request(id).Approvals(); len(got) != 0 {
		t.Fatalf("after the group was deleted, counting: %v, want none", got)
	}
	if got := noApprovers(item); !strings.Contains(got, "lists nobody in group pharmacists now") {
		t.Fatalf("the card once the group is deleted says %q, want it to say %q", got, "lists nobody in group pharmacists now")
	}
	if be := e.fail(kim, "approve_action", map[string]any{"request_id": id}); !errors.Is(be, policy.CheckApprovers) {
		t.Fatalf("ph_kim once the group is deleted: %v, want refused by the approvers check", be)
	}
}

// TestDirectoryGroupReviews: a break-glass review countersigned by a
// group only the directory provides: a member's countersignature counts;
// removed from the group, it stops counting at once, and the next one is
// refused.
func TestDirectoryGroupReviews(t *testing.T) {
	o := breakGlassOptions()
	o.BreakGlass.ReviewApprovers = approvals.Approvers{Groups: []string{"pharmacy_leads"}}
	e := newEnv(t, o)
	alice := e.principal("alice", policy.RoleMember, "person")
	dan := e.principal("dan", policy.RoleMember, "person")
	ctx := context.Background()
	setGroup := func(members ...string) {
		t.Helper()
		if err := e.b.Update(ctx, e.b.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
			return bot.PutDirectoryGroup(tx, bot.DirectoryGroup{Name: "pharmacy_leads", Members: members})
		}); err != nil {
			t.Fatal(err)
		}
	}
	setGroup("dan")
	d, _ := e.ok(alice, "confirm_action", map[string]any{"tool": "rollback_production", "arguments": map[string]any{"to": "v41"}, "dry_run": "redeploy v41"})
	id := d["request_id"].(string)
	e.ok(steppedUp(alice, e.clock.Now(), time.Minute), "approve_action", map[string]any{"request_id": id, "break_glass": true, "reason": "outage, nobody answers"})
	rid := map[string]any{"review_id": e.request(id).BreakGlass.Review}
	if _, text := e.ok(dan, "countersign_review", rid); !strings.HasPrefix(text, "Counted: 1 of 2 countersignatures: dan") {
		t.Fatalf("dan's countersignature: %q, want it to start with %q", text, "Counted: 1 of 2 countersignatures: dan")
	}
	setGroup()
	if got := e.review(rid["review_id"].(string)); got.Tally() != "0 of 2 countersignatures" || !strings.Contains(got.Votes[0].Void, "removed them from the group pharmacy_leads") {
		t.Fatalf("after dan left the group: %s, vote %+v; want %q and the vote void, naming %q", got.Tally(), got.Votes[0], "0 of 2 countersignatures", "removed them from the group pharmacy_leads")
	}
	if be := e.fail(dan, "countersign_review", rid); !errors.Is(be, policy.CheckApprovers) {
		t.Fatalf("dan after leaving the group: %v, want refused by the approvers check", be)
	}
}
