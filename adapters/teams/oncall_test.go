package teams

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/bot/bottest/testbot"
	"github.com/countersign/countersign/policy"
)

// TestEscalationMentionsWhoIsOnCall: an escalation addressed to an
// on-call rotation names the person on call and mentions their Teams
// account (from the config's mapping, never from the item), its words
// escaped as Markdown like every reply's; a person on
// call without a Teams account is named only.
func TestEscalationMentionsWhoIsOnCall(t *testing.T) {
	b := testbot.New(t, bot.Options{Store: bottest.OpenStore(t)})
	dir, err := bot.NewDirectory([]bot.ChatPrincipal{
		{Name: "bob", Role: policy.RoleMember, Teams: "0000AAAA-0000-0000-0000-000000000002"},
		{Name: "carol", Role: policy.RoleMember},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Chat().SetDirectory(dir)
	a := &Adapter{bot: b}
	it := bot.Item{ID: 7}
	msg, ents := a.replyText(it, bot.Note{Type: bot.EventEscalated, OnCall: "ops", Person: "bob"})
	if !strings.Contains(msg, `Escalated to the ops on\-call, bob\. <at>bob</at>`) {
		t.Errorf("reply %q: want bob named and mentioned", msg)
	}
	if len(ents) != 1 || ents[0].Mentioned == nil || ents[0].Mentioned.ID != "0000aaaa-0000-0000-0000-000000000002" || ents[0].Text != "<at>bob</at>" {
		t.Errorf("mentions %+v: want bob's Entra object id once", ents)
	}
	msg, ents = a.replyText(it, bot.Note{Type: bot.EventEscalated, OnCall: "ops", Person: "carol"})
	if !strings.Contains(msg, `Escalated to the ops on\-call, carol\.`) || strings.Contains(msg, "<at>") || len(ents) != 0 {
		t.Errorf("carol, who has no Teams account: %q %+v; want her named, not mentioned", msg, ents)
	}
}
