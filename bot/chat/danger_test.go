package chat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/kv"
)

// TestDangerousApprovalNeedsItsConfirmation: an approval of an item that
// cannot be undone decides nothing without its confirmation step (the
// surface's, or the target typed); one from a card cut to fit is refused
// and sent to the console; what the approver was shown is recorded on
// the vote.
func TestDangerousApprovalNeedsItsConfirmation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id := e.request("delete_database", "default")
	it, _ := e.b.Items().Get(ctx, id)
	if it.Danger == nil || it.Danger.Target != "prod" || it.Danger.TargetLabel != "db" {
		t.Fatalf("danger: %+v, want target %q labelled %q", it.Danger, "prod", "db")
	}
	unconfirmed := chat.Decision{Surface: bot.SurfaceSlack, UserID: uSmith, ItemID: id, Verb: chat.Approve, Deliveries: []string{"slack:trigger:d1"}}
	for _, tt := range []struct {
		name    string
		confirm string
		says    string
	}{
		{"no confirmation", "", "takes a confirmation"},
		{"the wrong target", "staging", "What you typed is not the db"},
		{"the target with another case", "Prod", "What you typed is not the db"},
	} {
		d := unconfirmed
		d.Confirm = tt.confirm
		d.Deliveries = []string{"slack:trigger:" + tt.name}
		out := chat.Decide(ctx, e.b, d)
		if out.Status != chat.Invalid || out.Field != chat.ConfirmField || !strings.Contains(out.Reply, tt.says) || !strings.Contains(out.Reply, "To approve, type the db: prod") {
			t.Errorf("%s: %+v; want invalid on the confirm field, a reply with %q and %q", tt.name, out, tt.says, "To approve, type the db: prod")
		}
	}
	if it, _ := e.b.Items().Get(ctx, id); !it.Pending() {
		t.Fatalf("an unconfirmed approval decided: %+v, want it still pending", it)
	}

	// Cut to fit: refused, pointing at the console, even confirmed.
	cut := unconfirmed
	cut.Confirmed, cut.Deliveries = true, []string{"slack:trigger:cut"}
	cut.Seen = bot.SeenText(bot.SurfaceSlack, "a card", true)
	if out := chat.Decide(ctx, e.b, cut); out.Status != chat.Invalid || !strings.Contains(out.Reply, "cut to fit") || !strings.Contains(out.Reply, "web console") {
		t.Fatalf("a truncated card: %+v; want invalid, a reply with %q and %q", out, "cut to fit", "web console")
	}

	// Typed as a command: the confirm word and the target.
	caller := e.b.Chat().Caller(bot.SurfaceSlack, uSmith, nil)
	if reply := chat.Run(ctx, e.b, caller, bot.SurfaceSlack, uSmith, fmt.Sprintf("approve %d", id)); !strings.Contains(reply.Text, fmt.Sprintf("type `approve %d confirm prod`", id)) {
		t.Fatalf("approve without confirm: %q, want it to contain %q", reply.Text, fmt.Sprintf("type `approve %d confirm prod`", id))
	}
	if reply := chat.Run(ctx, e.b, caller, bot.SurfaceSlack, uSmith, fmt.Sprintf("approve %d confirm staging", id)); !strings.Contains(reply.Text, `"staging" is not the db`) {
		t.Fatalf("approve confirm with the wrong target: %q, want it to contain %q", reply.Text, `"staging" is not the db`)
	}
	if it, _ := e.b.Items().Get(ctx, id); !it.Pending() {
		t.Fatalf("a wrong confirmation decided: %+v, want it still pending", it)
	}

	// The confirmed click decides, and its vote records what was shown.
	ok := unconfirmed
	ok.Confirmed, ok.Deliveries = true, []string{"slack:trigger:ok"}
	ok.Seen = bot.SeenText(bot.SurfaceSlack, "the whole card", false)
	if out := chat.Decide(ctx, e.b, ok); out.Status != chat.Decided || out.Item.Status != "approved" {
		t.Fatalf("a confirmed approval: %+v, want decided and approved", out)
	}
	var votes []approvals.Vote
	_ = e.b.View(ctx, func(tx kv.Tx) error {
		rec, _ := bot.LoadItemRecord(tx, id)
		r, err := approvals.LoadRequest(tx, rec.Key)
		if r != nil {
			votes = r.Votes
		}
		return err
	})
	if len(votes) != 1 || votes[0].Seen == nil || votes[0].Seen.SHA256 != ok.Seen.SHA256 || votes[0].Seen.Surface != "slack" || votes[0].Seen.Truncated {
		t.Fatalf("votes: %+v; want one, seen on slack untruncated with hash %s", votes, ok.Seen.SHA256)
	}

	// A typed confirmation decides too.
	id2 := e.request("delete_database", "default")
	reply := chat.Run(ctx, e.b, caller, bot.SurfaceSlack, uSmith, fmt.Sprintf("approve %d confirm prod", id2))
	if it, _ := e.b.Items().Get(ctx, id2); it.Status != "approved" || !strings.Contains(reply.Text, "Now: deploy-bot may run delete_database once with these arguments, before") {
		t.Fatalf("approve confirm prod: %q, item %s; want approved and a reply with %q", reply.Text, it.Status, "Now: deploy-bot may run delete_database once with these arguments, before")
	}
}
