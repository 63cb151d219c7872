package actiontools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/policy"
)

func sweepOpts() Options {
	return Options{
		RemindAfter: 10 * time.Minute, EscalateAfter: 20 * time.Minute,
		EscalationChannel: "oncall", EscalationRole: "admin",
	}
}

func (e *env) sweep(at time.Duration) bot.SweepReport {
	e.t.Helper()
	rep, err := e.b.Sweep(context.Background(), start.Add(at))
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func TestSweepRemindsEscalatesAndTimesOutOnce(t *testing.T) {
	e := newEnv(t, sweepOpts())
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	alice := e.principal("alice", policy.RoleMember, "person")
	d, _ := e.ok(agent, "confirm_action", destroyArgs(nil)) // 30m timeout
	id := d["request_id"].(string)
	m, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}}) // 15m
	decidedEarly, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	e.ok(alice, "approve_action", map[string]any{"request_id": decidedEarly["request_id"]})

	steps := []struct {
		at        time.Duration
		changed   int
		reminders int
		escalated int
		decided   int // including the early approval
	}{
		{5 * time.Minute, 0, 0, 0, 1},
		{10 * time.Minute, 2, 2, 0, 1},
		{10 * time.Minute, 0, 2, 0, 1}, // swept again: nothing new
		{14 * time.Minute, 0, 2, 0, 1},
		{15 * time.Minute, 1, 2, 0, 2}, // restart_service times out
		{20 * time.Minute, 1, 2, 1, 2},
		{25 * time.Minute, 0, 2, 1, 2},
		{30 * time.Minute, 1, 2, 1, 3},
		{31 * time.Minute, 0, 2, 1, 3},
		{48 * time.Hour, 0, 2, 1, 3},
	}
	for _, s := range steps {
		rep := e.sweep(s.at)
		if rep["actions"] != s.changed {
			t.Fatalf("sweep at +%s changed %d, want %d", s.at, rep["actions"], s.changed)
		}
		if r, x, dd := len(e.events("slack", bot.EventReminder)), len(e.events("slack", bot.EventEscalated)), len(e.events("slack", bot.EventDecided)); r != s.reminders || x != s.escalated || dd != s.decided {
			t.Fatalf("after +%s: %d reminders, %d escalations, %d decided; want %d %d %d", s.at, r, x, dd, s.reminders, s.escalated, s.decided)
		}
	}
	st, text := e.ok(agent, "action_status", map[string]any{"request_id": id})
	want := "denied by automatic policy: destructive action requires explicit human confirmation"
	if st["status"] != "expired" || st["reason"] != want || st["confirmed_by"] != "" || !strings.Contains(text, want) {
		t.Fatalf("timed out: %v %q, want status expired, an empty confirmed_by and reason %q, in the text too", st, text, want)
	}
	if st, _ := e.ok(agent, "action_status", map[string]any{"request_id": m["request_id"]}); st["reason"] != "denied by automatic policy: mutating action requires explicit human confirmation" {
		t.Fatalf("mutating timeout: %v, want reason %q", st, "denied by automatic policy: mutating action requires explicit human confirmation")
	}
	if esc := e.events("slack", bot.EventEscalated); esc[0].Note != "channel=oncall role=admin" {
		t.Fatalf("escalation note %q, want %q", esc[0].Note, "channel=oncall role=admin")
	}
	if got := e.audits("action_reminder"); len(got) != 2 || got[0].Principal != sweeperName {
		t.Fatalf("reminder audit: %+v, want 2, by %s", got, sweeperName)
	}
	if got := e.audits("action_escalated"); len(got) != 1 {
		t.Fatalf("escalation audit: %+v, want 1", got)
	}
	if got := e.audits("action_expired"); len(got) != 2 || !strings.Contains(got[0].Detail, "denied by automatic policy") {
		t.Fatalf("expiry audit: %+v, want 2, the first naming %q", got, "denied by automatic policy")
	}
	// Nothing decided is ever approved by the sweeper, and a late click
	// gets the recorded outcome.
	if be := e.fail(alice, "approve_action", map[string]any{"request_id": id}); be.Kind != bot.KindConflict || !strings.Contains(be.Msg, "expired unanswered") {
		t.Fatalf("approve after expiry: %v (kind %d), want KindConflict naming %q", be, be.Kind, "expired unanswered")
	}
	it, err := e.b.Items().Get(context.Background(), uint64(d["item_id"].(float64)))
	if err != nil || it.Status != "expired" || !strings.Contains(it.Reason, "denied by automatic policy") {
		t.Fatalf("item after expiry: %+v %v, want status expired, a reason naming %q and no error", it, err, "denied by automatic policy")
	}
}

func TestSweepWakesLongPollAndDrainsInBatches(t *testing.T) {
	e := newEnv(t, Options{})
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	// One request through the tool, 299 more written directly in one
	// transaction (300 fsynced tool calls would only slow the test).
	d, _ := e.ok(agent, "confirm_action", map[string]any{"tool": "format_disk"})
	proto := e.request(d["request_id"].(string))
	ids := []string{proto.ID}
	err := e.b.Update(context.Background(), e.b.SystemCall(start), func(tx *bot.Tx) error {
		ids = ids[:1] // the function may run more than once: assign, never accumulate
		for range 299 {
			r := *proto
			id, err := approvals.NewRequestID(approvals.KindActionRequest)
			if err != nil {
				return err
			}
			r.ID, r.DueAt = id, time.Time{}
			if r.ItemID, err = tx.NewItem(bot.KindAction, id, bot.Space{UserID: "default"}, "default", time.Time{}); err != nil {
				return err
			}
			if err := approvals.PutRequest(tx, &r, r.ExpiresAt); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		res, err := e.b.Call(context.Background(), agent, "action_status", []byte(`{"request_id":"`+ids[299]+`","wait_seconds":60}`))
		if err != nil {
			got <- err.Error()
			return
		}
		got <- asMap(t, res.Data)["status"].(string)
	}()
	waitFor(t, func() bool { return e.s.waits.pendingWaiters() == 1 })
	if rep := e.sweep(29 * time.Minute); rep["actions"] != 0 {
		t.Fatalf("swept early: %v, want no actions", rep)
	}
	if rep := e.sweep(30 * time.Minute); rep["actions"] != 300 {
		t.Fatalf("swept %d, want all 300 in batches of 256", rep["actions"])
	}
	if s := <-got; s != "expired" {
		t.Fatalf("the long poll saw %q, want expired", s)
	}
	if rep := e.sweep(31 * time.Minute); rep["actions"] != 0 {
		t.Fatalf("swept twice: %v, want no actions the second time", rep)
	}
}

// TestDeadlinesSurviveRestart closes the store with requests pending and
// opens it again: the deadline index is on disk, so the sweep after the
// restart times them out.
func TestDeadlinesSurviveRestart(t *testing.T) {
	e := newEnv(t, sweepOpts())
	agent := e.principal("deploy-bot", policy.RoleAgent, "agent")
	d, _ := e.ok(agent, "confirm_action", destroyArgs(nil))
	id := d["request_id"].(string)
	e.sweep(10 * time.Minute) // the reminder, before the restart
	e.restart()
	if r := e.request(id); r.Status != "pending" || !r.ExpiresAt.Equal(start.Add(30*time.Minute)) || r.RemindedAt.IsZero() {
		t.Fatalf("after restart: %+v, want pending, expiring at %v, reminded", r, start.Add(30*time.Minute))
	}
	if rep := e.sweep(10 * time.Minute); rep["actions"] != 0 {
		t.Fatalf("the reminder was sent again after the restart: %v, want no actions", rep)
	}
	e.sweep(45 * time.Minute)
	if r := e.request(id); r.Status != "expired" {
		t.Fatalf("after restart and deadline: %s, want expired", r.Status)
	}
	if n := len(e.events("slack", bot.EventReminder)); n != 1 {
		t.Fatalf("%d reminders, want 1", n)
	}
}
