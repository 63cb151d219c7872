package slack

import (
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/bot"
)

func TestQualifiedUser(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ref, team, want, err string }{
		{"U0123ABC", "T1", "T1/U0123ABC", ""},
		{" T2/U0123ABC ", "T1", "T2/U0123ABC", ""}, // the principal's own workspace wins
		{"E0GRID/W0GRID", "", "E0GRID/W0GRID", ""},
		{"W0GRID", "E0GRID", "E0GRID/W0GRID", ""},
		{"U0123ABC", "", "", "does not say which Slack workspace"},
		{"X1/U0123ABC", "T1", "", `"X1" is not a Slack workspace id`},
		{"/U0123ABC", "T1", "", "is not a Slack workspace id"},
		{"T1/", "T1", "", "is not a Slack user id"},
		{"T1/u0123abc", "T1", "", "is not a Slack user id"},
		{"T1/U0123ABC/U9", "T1", "", "is not a Slack user id"},
		{"<@U0123ABC>", "T1", "", "is not a Slack user id"},
	} {
		got, err := QualifiedUser(c.ref, c.team)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("QualifiedUser(%q, %q) = %q, %v; want %q", c.ref, c.team, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("QualifiedUser(%q, %q) = %q, %v; want an error saying %q", c.ref, c.team, got, err, c.err)
		}
	}
	if UserOf("T1/U0123ABC") != "U0123ABC" || UserOf("U0123ABC") != "U0123ABC" {
		t.Error("UserOf does not strip the workspace")
	}
}

// TestSocketModeClickFromAnotherWorkspaceIsRefused: over Socket Mode as
// over HTTP, a click by a mapped user id from another workspace is refused
// privately and audited under that workspace; nothing is decided.
func TestSocketModeClickFromAnotherWorkspaceIsRefused(t *testing.T) {
	t.Parallel()
	e := socketEnv(t)
	id := e.create(bot.KindAction, "ops", actionTestItem())
	e.drain()
	eventually(t, "the socket to open", func() bool { return e.fake.Opens() >= 1 })
	click := clickPayload(drSmith, actionApprove, strconv.FormatUint(id, 10), e.ref(id), newTrigger())
	click["user"] = map[string]any{"id": drSmith, "team_id": "T2"}
	click["team"] = map[string]any{"id": "T2"}
	before := len(e.denials())
	e.fake.Send("interactive", "env-other", click)
	eventually(t, "the refusal", func() bool { return len(e.ephemerals(drSmith)) == 1 })
	if st := e.state(id); st.Status != "pending" || st.Decisions != 0 {
		t.Fatalf("after a click from another workspace: %+v, want pending, no decision", st)
	}
	if d := e.denials(); len(d) != before+1 || d[len(d)-1].Principal != "unmapped [T2/"+drSmith+"]" {
		t.Errorf("audit denials %+v, want one more by unmapped [T2/%s]", d, drSmith)
	}
}
