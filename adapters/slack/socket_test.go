package slack

import (
	"fmt"
	"github.com/countersign/countersign/adapters/slack/slacktest"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/bot/chat"
	"github.com/countersign/countersign/internal/logtest"
)

func socketEnv(t *testing.T) *env {
	return newEnv(t, func(o *Options) {
		o.Mode, o.AppToken, o.SigningSecret = ModeSocket, "xapp-test", ""
		o.PingInterval = 5 * time.Second // the fake pings every 100 ms
	})
}

// ackOf returns the frames the bot sent for envelope.
func ackOf(f *slacktest.Server, envelope string) []map[string]any {
	var out []map[string]any
	for _, a := range f.Acks() {
		if a["envelope_id"] == envelope {
			out = append(out, a)
		}
	}
	return out
}

func TestSocketModeClickIsAcknowledgedAndAppliedOnce(t *testing.T) {
	t.Parallel()
	e := socketEnv(t)
	id := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	ref := e.ref(id)
	eventually(t, "the socket to open", func() bool { return e.fake.Opens() >= 1 })
	if c := e.fake.Calls("apps.connections.open"); c[0].Auth != "Bearer xapp-test" {
		t.Errorf("apps.connections.open authorised with %q, want the app-level token", c[0].Auth)
	}

	click := clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), ref, newTrigger())
	e.fake.Send("interactive", "env-1", click)
	e.fake.Send("interactive", "env-1", click) // Slack redelivers the envelope
	eventually(t, "both deliveries acknowledged", func() bool { return len(ackOf(e.fake, "env-1")) == 2 })
	for _, a := range ackOf(e.fake, "env-1") {
		if _, has := a["payload"]; has {
			t.Errorf("a click's acknowledgement carries a payload (%v), want an empty acknowledgement", a)
		}
	}
	e.barrier()
	if st := e.state(id); st.Status != "approved" || st.Decisions != 1 || st.DecidedBy[0] != "dr_smith [U0123ABC]" {
		t.Fatalf("after a duplicated envelope: %+v, want approved once by dr_smith [U0123ABC]", st)
	}
	e.drain()
	if u := e.fake.Calls("chat.update"); len(u) != 1 || len(buttons(t, u[0])) != 0 {
		t.Fatalf("message updates: %+v, want one without buttons", u)
	}

	// An unmapped clicker over the socket is refused privately and audited.
	other := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	before := len(e.denials())
	e.fake.Send("interactive", "env-2", clickPayload(stranger, actionApprove, strconv.FormatUint(other, 10), e.ref(other), newTrigger()))
	eventually(t, "the refusal", func() bool { return len(e.ephemerals(stranger)) == 1 })
	if d := e.denials(); len(d) != before+1 || d[len(d)-1].Principal != "unmapped [T1/U0999XYZ]" {
		t.Errorf("audit denials %+v, want one more by unmapped [T1/U0999XYZ]", d)
	}
}

func TestSocketModeReasonFormErrorsGoInTheAck(t *testing.T) {
	t.Parallel()
	e := socketEnv(t)
	id := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	meta := strconv.FormatUint(id, 10) + "|" + chOps
	e.fake.Send("interactive", "env-empty", submitPayload(nurseJo, meta, " ", newTrigger()))
	eventually(t, "the acknowledgement", func() bool { return len(ackOf(e.fake, "env-empty")) == 1 })
	p, _ := ackOf(e.fake, "env-empty")[0]["payload"].(map[string]any)
	if p["response_action"] != "errors" || p["errors"].(map[string]any)[reasonBlock] == "" {
		t.Fatalf("empty reason acknowledged with %v, want response_action errors on the reason block", ackOf(e.fake, "env-empty")[0])
	}
	e.fake.Send("interactive", "env-ok", submitPayload(nurseJo, meta, "freeze", newTrigger()))
	eventually(t, "the acknowledgement", func() bool { return len(ackOf(e.fake, "env-ok")) == 1 })
	e.barrier()
	if st := e.state(id); st.Status != "rejected" || st.Reason != "freeze" {
		t.Fatalf("after the reason: %+v, want rejected with reason freeze", st)
	}
}

func TestSocketModeSlashCommandAnswersInTheAck(t *testing.T) {
	t.Parallel()
	e := socketEnv(t)
	e.fake.Send("slash_commands", "env-cmd", map[string]any{
		"team_id": team, "user_id": drSmith, "channel_id": chOps, "command": "/countersign", "text": "pending", "trigger_id": newTrigger(),
	})
	eventually(t, "the acknowledgement", func() bool { return len(ackOf(e.fake, "env-cmd")) == 1 })
	got := <-e.cmds
	if got.Text != "pending" || got.Caller == nil || got.Caller.Name != "dr_smith" {
		t.Fatalf("chat got %+v, want pending from dr_smith", got)
	}
	p, _ := ackOf(e.fake, "env-cmd")[0]["payload"].(map[string]any)
	if p["response_type"] != "ephemeral" || p["text"] != "ran &lt;pending&gt; @\u2060here" {
		t.Fatalf("command acknowledged with %v, want an ephemeral reply with the text escaped", ackOf(e.fake, "env-cmd")[0])
	}
}

func TestSocketModeReconnects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) {
		o.Mode, o.AppToken, o.SigningSecret = ModeSocket, "xapp-test", ""
		o.PingInterval = 5 * time.Second
	})
	eventually(t, "the socket to open", func() bool { return e.fake.Opens() == 1 })
	// Slack refreshes the connection.
	e.fake.Disconnect()
	eventually(t, "a reconnect", func() bool { return e.fake.Opens() == 2 })
	// A fatal answer (invalid_auth) ends slack-go's loop; the adapter's
	// supervisor starts it again, and clicks flow once it is back.
	e.fake.SlackError("apps.connections.open", "invalid_auth")
	e.fake.Disconnect()
	eventually(t, "the supervisor to reconnect", func() bool { return e.fake.Opens() >= 4 })
	id := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	e.fake.Send("interactive", "env-after", clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), e.ref(id), newTrigger()))
	eventually(t, "the click after reconnecting", func() bool { return e.state(id).Status == "approved" })
}

// TestSocketModeEditErrorsGoInTheAck: over Socket Mode an edit form is
// decided on a worker and acknowledged with the result: a refused edit's
// field error in the acknowledgement's payload, a valid edit with an
// empty acknowledgement (the form closes) after the decision.
func TestSocketModeEditErrorsGoInTheAck(t *testing.T) {
	t.Parallel()
	e := socketEnv(t)
	id := e.create(bot.KindAction, "ops", editableAction())
	e.drain()
	eventually(t, "the socket to open", func() bool { return e.fake.Opens() >= 1 })
	it := e.item(id)
	meta := strconv.FormatUint(id, 10) + "|" + chOps + "|" + chat.EditBasis(it)
	e.fake.Send("interactive", "env-bad", editPayload(drSmith, meta, map[string]string{"edit_0": "Orders!", "edit_1": "30"}, "", newTrigger()))
	eventually(t, "the acknowledgement", func() bool { return len(ackOf(e.fake, "env-bad")) == 1 })
	p, _ := ackOf(e.fake, "env-bad")[0]["payload"].(map[string]any)
	if errs, _ := p["errors"].(map[string]any); p["response_action"] != "errors" || !strings.Contains(fmt.Sprint(errs["edit_0"]), "lowercase") {
		t.Fatalf("refused edit acknowledged with %v, want response_action errors saying lowercase", ackOf(e.fake, "env-bad")[0])
	}
	if st := e.state(id); st.Status != "pending" {
		t.Fatalf("after a refused edit: %+v, want pending", st)
	}
	e.fake.Send("interactive", "env-ok", editPayload(drSmith, meta, map[string]string{"edit_0": "orders_staging", "edit_1": "30"}, "", newTrigger()))
	eventually(t, "the acknowledgement", func() bool { return len(ackOf(e.fake, "env-ok")) == 1 })
	if _, has := ackOf(e.fake, "env-ok")[0]["payload"]; has {
		t.Fatalf("a valid edit's acknowledgement carries a payload (%v), want an empty acknowledgement", ackOf(e.fake, "env-ok")[0])
	}
	if st := e.state(id); st.Status != "approved" || st.EditedBy != "dr_smith [U0123ABC]" {
		t.Fatalf("after the edit over the socket: %+v, want approved, edited by dr_smith [U0123ABC]", st)
	}
}

// TestSocketModeLogsNoConnectionTicket: the WebSocket URL Slack hands out
// carries a one-time ticket that opens the app's event stream; when
// dialling it fails, the errors slack-go reports (and logs, at debug)
// quote the URL, and the adapter's logs say what failed with the ticket
// redacted.
func TestSocketModeLogsNoConnectionTicket(t *testing.T) {
	t.Parallel()
	const ticket = "tkt-0123456789secret"
	logs := &logtest.Buffer{}
	// A fake of its own, set before the socket first opens (newEnv opens
	// it at once): a URL with a ticket that cannot even be parsed.
	f := slacktest.New(t)
	f.SocketURL("ws://127.0.0.1:%zz/link/?ticket=" + ticket + "&app_id=A0APP")
	newEnv(t, func(o *Options) {
		o.Mode, o.AppToken, o.SigningSecret = ModeSocket, "xapp-test", ""
		o.APIURL = f.URL()
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	eventually(t, "the failed connection to be logged", func() bool {
		return strings.Contains(logs.String(), "connection_error") || strings.Contains(logs.String(), "reconnecting")
	})
	got := logs.String()
	if strings.Contains(got, ticket) {
		t.Errorf("the logs quote the connection ticket %q, want it redacted:\n%s", ticket, got)
	}
	if !strings.Contains(got, "ticket=[redacted]") {
		t.Errorf("the logs do not show the failed URL with its ticket redacted, want ticket=[redacted]:\n%s", got)
	}
}
