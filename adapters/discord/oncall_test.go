package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

// TestEscalationNamesWhoIsOnCall: an escalation addressed to an on-call
// rotation names the person on call in the thread (mentions stay off:
// named, never pinged), and says so when nobody is on call; the routing
// words never show.
func TestEscalationNamesWhoIsOnCall(t *testing.T) {
	e := newEnv(t)
	id := e.newItem(bot.KindAction, "ops", destructiveAction())
	e.drain()
	for _, note := range []string{"role=admin " + bot.OnCallNote("ops", "bob"), bot.OnCallNote("ops", "")} {
		if err := e.bot.Update(context.Background(), e.bot.SystemCall(e.clock.Now()), func(tx *bot.Tx) error {
			return tx.Emit(id, bot.EventEscalated, note)
		}); err != nil {
			t.Fatal(err)
		}
		e.drain()
	}
	thread := e.fake.CallsTo("POST", "channels/"+chOps+"/messages")
	if len(thread) != 3 {
		t.Fatalf("%d posts in ops, want the item and two escalation replies", len(thread))
	}
	for i, want := range []string{"Escalated to role admin. Escalated to the ops on-call, bob.", "Nobody is on call in ops now."} {
		c := fmt.Sprint(thread[i+1].JSON()["content"])
		if !strings.Contains(c, want) || strings.Contains(c, "oncall=") || strings.Contains(c, "person=") {
			t.Errorf("escalation reply %d: got %q, want it to say %q and no routing words", i+1, c, want)
		}
	}
}
