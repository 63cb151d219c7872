package chat_test

import (
	"context"
	"errors"
	"fmt"
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

// TestDecideStepUpAnswersWithALink: approving an item that requires
// step-up from chat (a button, or `approve <id>` typed) is refused by the
// one rule, audited, the item stays pending, and the private reply carries
// a one-time step-up link minted for the person and the item; rejecting
// needs no step-up; without the console the reply says why there is no link.
func TestDecideStepUpAnswersWithALink(t *testing.T) {
	ctx := context.Background()
	clock := bottest.NewClock(t0)
	b := testbot.New(t, bot.Options{Store: bottest.OpenStore(t), Now: clock.Now, Sinks: []string{"slack"}})
	if _, err := actiontools.Register(b, actiontools.Options{
		Tools:  []actiontools.ToolSpec{{Name: "delete_database", Category: "destructive"}},
		StepUp: actiontools.StepUpSpec{Within: 5 * time.Minute, Categories: []string{"destructive"}},
	}); err != nil {
		t.Fatal(err)
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{{Name: "dr_smith", Role: policy.RoleMember, Slack: uSmith}})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	e := &env{t: t, b: b, clock: clock}
	e.agent = &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "deploy-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}

	// Without a console: refused, and the reply says there is no link.
	id := e.request("delete_database", "ops")
	out := chat.Decide(ctx, b, click(uSmith, id, chat.Approve, "nolink"))
	if out.Status != chat.Refused || !strings.Contains(out.Reply, "could not make you a link") || !strings.Contains(out.Reply, "stays pending") {
		t.Fatalf("without a console: %+v; want refused, a reply with %q and %q", out, "could not make you a link", "stays pending")
	}

	var minted []string
	b.WebLinks().SetStepUp(func(c *bot.Caller, item uint64) (string, error) {
		minted = append(minted, fmt.Sprintf("%s #%d", c.Name, item))
		return fmt.Sprintf("https://cs.example/ui/stepup?t=tok-%d", len(minted)), nil
	})
	out = chat.Decide(ctx, b, click(uSmith, id, chat.Approve, "d1"))
	want := fmt.Sprintf("Step-up required: approving #%d needs a fresh sign-in at your identity provider. Approve it in the console after signing in again: https://cs.example/ui/stepup?t=tok-1 (one use, for you only, valid 5 minutes). Nothing was recorded; #%d stays pending.", id, id)
	if out.Status != chat.Refused || out.Reply != want || !out.Item.Pending() {
		t.Fatalf("a click on a step-up item: %+v\nwant reply %q", out, want)
	}
	if len(minted) != 1 || minted[0] != fmt.Sprintf("dr_smith #%d", id) {
		t.Fatalf("links minted: %v, want one for dr_smith and #%d", minted, id)
	}
	reply := chat.Run(ctx, b, b.Chat().Caller(bot.SurfaceSlack, uSmith, nil), bot.SurfaceSlack, uSmith, fmt.Sprintf("approve %d confirm prod", id))
	if !strings.Contains(reply.Text, "https://cs.example/ui/stepup?t=tok-2") || !reply.Private {
		t.Fatalf("/countersign approve on a step-up item: %+v; want a private reply with %q", reply, "https://cs.example/ui/stepup?t=tok-2")
	}
	denied := e.audits("access_denied")
	if len(denied) != 3 || !strings.Contains(denied[1].Detail, "Access denied: step-up required") {
		t.Fatalf("refusals audited: %+v; want 3, the second with %q", denied, "Access denied: step-up required")
	}
	if it, err := b.Items().Get(ctx, id); err != nil || !it.Pending() {
		t.Fatalf("after the refusals: %+v %v; want the item still pending", it, err)
	}
	// Rejecting needs no step-up.
	d := click(uSmith, id, chat.Reject, "d3")
	d.Reason = "not now"
	if out := chat.Decide(ctx, b, d); out.Status != chat.Decided {
		t.Fatalf("reject: %+v, want decided", out)
	}
	// A person who cannot get a link is told why.
	id2 := e.request("delete_database", "ops")
	b.WebLinks().SetStepUp(func(*bot.Caller, uint64) (string, error) {
		return "", errors.New("dr_smith has no single sign-on identity")
	})
	if out := chat.Decide(ctx, b, click(uSmith, id2, chat.Approve, "d4")); out.Status != chat.Refused || !strings.Contains(out.Reply, "no single sign-on identity") {
		t.Fatalf("no link possible: %+v; want refused, a reply with %q", out, "no single sign-on identity")
	}
}

// TestPrepareEditStepUpAnswersWithTheLink: Edit & approve on an item that
// requires step-up opens no form from chat (its submission would be
// refused): the person gets privately the reply an Approve click gets,
// the one-time step-up link, the refusal is audited, and nothing changes.
func TestPrepareEditStepUpAnswersWithTheLink(t *testing.T) {
	ctx := context.Background()
	clock := bottest.NewClock(t0)
	b := testbot.New(t, bot.Options{Store: bottest.OpenStore(t), Now: clock.Now, Sinks: []string{"slack"}})
	if _, err := actiontools.Register(b, actiontools.Options{
		Tools:  []actiontools.ToolSpec{{Name: "restart_service", Category: "mutating"}, {Name: "scale_service", Category: "mutating"}},
		StepUp: actiontools.StepUpSpec{Within: 5 * time.Minute, Tools: []string{"restart_service"}},
	}); err != nil {
		t.Fatal(err)
	}
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{{Name: "dr_smith", Role: policy.RoleMember, Slack: uSmith, Discord: "111"}})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	n := 0
	b.WebLinks().SetStepUp(func(c *bot.Caller, item uint64) (string, error) {
		n++
		return fmt.Sprintf("https://cs.example/ui/stepup?t=tok-%d", n), nil
	})
	e := &env{t: t, b: b, clock: clock}
	e.agent = &bot.Caller{Principal: bot.Principal{ID: "prin_agent", Name: "deploy-bot", Role: policy.RoleAgent, Kind: "agent"}, Surface: "http"}

	id := e.request("restart_service", "ops")
	approve := chat.Decide(ctx, b, click(uSmith, id, chat.Approve, "a1"))
	for surface, user := range map[string]string{bot.SurfaceSlack: uSmith, bot.SurfaceDiscord: "111"} {
		d := click(user, id, chat.Approve, "e-"+surface)
		d.Surface = surface
		out := chat.PrepareEdit(ctx, b, d)
		want := strings.Replace(approve.Reply, "tok-1", fmt.Sprintf("tok-%d", n), 1)
		if out.Status != chat.Refused || out.Reply != want || !strings.HasPrefix(out.Reply, "Step-up required: approving #") {
			t.Fatalf("%s: Edit & approve on a step-up item: %+v\nwant the Approve click's reply %q", surface, out, want)
		}
	}
	edits := 0
	for _, a := range e.audits("access_denied") {
		if strings.Contains(a.Detail, fmt.Sprintf("edit #%d refused: step-up required", id)) {
			edits++
		}
	}
	if edits != 2 {
		t.Fatalf("%d refused edits audited, want 2: %+v", edits, e.audits("access_denied"))
	}
	if it, err := b.Items().Get(ctx, id); err != nil || !it.Pending() || it.Changes != nil {
		t.Fatalf("after the refused edits: %+v %v; want the item still pending, without changes", it, err)
	}
	// A tool without step-up still opens the form.
	other := e.request("scale_service", "ops")
	if out := chat.PrepareEdit(ctx, b, click(uSmith, other, chat.Approve, "e3")); out.Status != chat.Ready {
		t.Fatalf("Edit & approve without step-up: %+v, want ready", out)
	}
}
