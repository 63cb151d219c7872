package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/bolt"
	"github.com/countersign/countersign/kv"
	"github.com/countersign/countersign/policy"
)

var rqT0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

func rqPerson(name, id, role string) Party {
	return Party{ID: id, Name: name, Role: role, Kind: "person", Display: name + " [" + id + "]"}
}

var (
	rqAgent = Party{ID: "prin_agent", Name: "deploy-bot", Role: "agent", Kind: "agent", Display: "deploy-bot [prin_agent]"}
	rqAlice = rqPerson("alice", "prin_a", "member")
	rqBob   = rqPerson("bob", "prin_b", "member")
	rqCarol = rqPerson("carol", "prin_c", "admin")
	// rqAliceChat is rqAlice deciding from Slack: another id, the same name.
	rqAliceChat = Party{ID: "chat:alice", Name: "alice", Role: "member", Kind: "person", Display: "alice [U0123]"}
)

func rqPending(quorum int) *Request {
	return &Request{
		ID: "req_0123456789abcdef", Kind: KindActionRequest, Requester: rqAgent, Status: StatusPending,
		Quorum: quorum, CreatedAt: rqT0, ExpiresAt: rqT0.Add(30 * time.Minute),
		Action: &Action{Tool: "delete_database", Category: "destructive", Mechanics: "dry_run_confirm"},
	}
}

type rqVote struct {
	by      Party
	approve bool
	want    Outcome
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name        string
		quorum      int
		votes       []rqVote
		status      RequestStatus
		confirmedBy string
		tally       string
	}{
		{"one approval decides quorum 1", 1, []rqVote{{rqAlice, true, OutcomeDecided}}, StatusApproved, "alice [prin_a]", "1 of 1 approvals: alice"},
		{"quorum 0 means 1", 0, []rqVote{{rqAlice, true, OutcomeDecided}}, StatusApproved, "alice [prin_a]", "1 of 1 approvals: alice"},
		{"one deny denies", 1, []rqVote{{rqAlice, false, OutcomeDecided}}, StatusDenied, "", "0 of 1 approvals"},
		{"quorum 2 needs two people", 2, []rqVote{{rqAlice, true, OutcomeCounted}, {rqBob, true, OutcomeDecided}}, StatusApproved, "alice [prin_a], bob [prin_b]", "2 of 2 approvals: alice, bob"},
		{"the same approver twice counts once", 2, []rqVote{{rqAlice, true, OutcomeCounted}, {rqAlice, true, OutcomeRepeat}}, StatusPending, "", "1 of 2 approvals: alice"},
		{"the same person from chat counts once", 2, []rqVote{{rqAlice, true, OutcomeCounted}, {rqAliceChat, true, OutcomeRepeat}}, StatusPending, "", "1 of 2 approvals: alice"},
		{"a deny after a quorum vote denies", 2, []rqVote{{rqAlice, true, OutcomeCounted}, {rqBob, false, OutcomeDecided}}, StatusDenied, "", "1 of 2 approvals: alice"},
		{"an approver may withdraw by denying", 2, []rqVote{{rqAlice, true, OutcomeCounted}, {rqAlice, false, OutcomeDecided}}, StatusDenied, "", "1 of 2 approvals: alice"},
		{"late approval after a deny conflicts", 1, []rqVote{{rqAlice, false, OutcomeDecided}, {rqBob, true, OutcomeConflict}}, StatusDenied, "", "0 of 1 approvals"},
		{"late deny after approval conflicts", 1, []rqVote{{rqAlice, true, OutcomeDecided}, {rqBob, false, OutcomeConflict}}, StatusApproved, "alice [prin_a]", "1 of 1 approvals: alice"},
		{"the winner repeating gets the same outcome", 1, []rqVote{{rqAlice, true, OutcomeDecided}, {rqAlice, true, OutcomeRepeat}, {rqAliceChat, true, OutcomeRepeat}}, StatusApproved, "alice [prin_a]", "1 of 1 approvals: alice"},
		{"the winner reversing conflicts", 1, []rqVote{{rqAlice, true, OutcomeDecided}, {rqAlice, false, OutcomeConflict}}, StatusApproved, "alice [prin_a]", "1 of 1 approvals: alice"},
		{"the denier repeating gets the same outcome", 1, []rqVote{{rqAlice, false, OutcomeDecided}, {rqAlice, false, OutcomeRepeat}}, StatusDenied, "", "0 of 1 approvals"},
		{"quorum 3 of three people", 3, []rqVote{{rqAlice, true, OutcomeCounted}, {rqBob, true, OutcomeCounted}, {rqCarol, true, OutcomeDecided}, {rqBob, false, OutcomeConflict}}, StatusApproved, "alice [prin_a], bob [prin_b], carol [prin_c]", "3 of 3 approvals: alice, bob, carol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rqPending(tt.quorum)
			for i, v := range tt.votes {
				if got := r.Decide(v.by, v.approve, "because", rqT0.Add(time.Duration(i)*time.Minute)); got != v.want {
					t.Fatalf("vote %d (%s approve=%v) = %v, want %v", i, v.by.Display, v.approve, got, v.want)
				}
			}
			if r.Status != tt.status || r.ConfirmedBy != tt.confirmedBy || r.Tally() != tt.tally {
				t.Fatalf("status %q confirmed_by %q tally %q; want %q %q %q", r.Status, r.ConfirmedBy, r.Tally(), tt.status, tt.confirmedBy, tt.tally)
			}
			if tt.status == StatusDenied && (r.Reason != "because" || len(r.DecidedBy) != 1) {
				t.Fatalf("denied: reason %q decided_by %v, want reason %q by one decider", r.Reason, r.DecidedBy, "because")
			}
		})
	}
}

func TestExpired(t *testing.T) {
	r := rqPending(1)
	if r.Expired(rqT0.Add(29 * time.Minute)) {
		t.Fatal("expired before its time")
	}
	if !r.Expired(rqT0.Add(30 * time.Minute)) {
		t.Fatal("not expired at expires_at")
	}
	r.Status = StatusApproved
	if r.Expired(rqT0.Add(time.Hour)) {
		t.Fatal("a decided request reported as expired")
	}
	r = rqPending(1)
	r.ExpiresAt = time.Time{}
	if r.Expired(rqT0.Add(1000 * time.Hour)) {
		t.Fatal("a request without expiry expired")
	}
}

func TestAnswer(t *testing.T) {
	q := &Request{ID: "ask_0123456789abcdef", Kind: KindQuestionRequest, Requester: rqAgent, Status: StatusPending, Question: &Question{Question: "Which region?", Options: []string{"eu", "us"}}}
	if got := q.Answer(rqAlice, []string{"eu"}, "", false, rqT0); got != OutcomeDecided || q.Status != StatusAnswered || !slices.Equal(q.Question.Answers, []string{"eu"}) {
		t.Fatalf("answer: %v %q %v, want OutcomeDecided, %q, [eu]", got, q.Status, q.Question.Answers, StatusAnswered)
	}
	if got := q.Answer(rqAlice, []string{"eu"}, "", false, rqT0); got != OutcomeRepeat {
		t.Fatalf("same answer again = %v, want repeat", got)
	}
	if got := q.Answer(rqBob, []string{"us"}, "", false, rqT0); got != OutcomeConflict || !slices.Equal(q.Question.Answers, []string{"eu"}) {
		t.Fatalf("second answer = %v, answers %v; want conflict and the first answer kept", got, q.Question.Answers)
	}
	if q.ConfirmedBy != "" {
		t.Fatalf("an answer set confirmed_by %q: an answer is never an approval", q.ConfirmedBy)
	}
	d := &Request{ID: "ask_1", Kind: KindQuestionRequest, Status: StatusPending, Question: &Question{Question: "?"}}
	if got := d.Answer(rqBob, nil, "not mine to say", true, rqT0); got != OutcomeDecided || d.Status != StatusDeclined || d.Reason != "not mine to say" {
		t.Fatalf("decline: %v %q %q, want OutcomeDecided, %q, %q", got, d.Status, d.Reason, StatusDeclined, "not mine to say")
	}
}

func TestClose(t *testing.T) {
	r := rqPending(1)
	if !r.Close(StatusExpired, "denied by automatic policy: x", rqT0) || r.Status != StatusExpired {
		t.Fatalf("close pending: %q, want closed as %q", r.Status, StatusExpired)
	}
	if r.Close(StatusDenied, "again", rqT0) || r.Reason != "denied by automatic policy: x" {
		t.Fatalf("a closed request changed: %q %q, want it kept, reason %q", r.Status, r.Reason, "denied by automatic policy: x")
	}
	a := rqPending(1)
	a.Decide(rqAlice, true, "", rqT0)
	if a.Close(StatusExpired, "late", rqT0) || a.Status != StatusApproved {
		t.Fatalf("an approved request expired: %q, want it kept %q", a.Status, StatusApproved)
	}
	if got := a.Decide(rqBob, false, "", rqT0); got != OutcomeConflict || a.Status != StatusApproved {
		t.Fatalf("a decided request changed: %v %q, want OutcomeConflict and %q", got, a.Status, StatusApproved)
	}
}

func TestDueAndNextDue(t *testing.T) {
	const remind, escalate = 10 * time.Minute, 20 * time.Minute
	r := rqPending(1)
	tests := []struct {
		at   time.Duration
		want SweepStep
	}{
		{0, SweepStep{}},
		{9*time.Minute + 59*time.Second, SweepStep{}},
		{10 * time.Minute, SweepStep{Remind: true}},
		{25 * time.Minute, SweepStep{Remind: true, Escalate: true}},
		{30 * time.Minute, SweepStep{Expire: true}},
		{2 * time.Hour, SweepStep{Expire: true}},
	}
	for _, tt := range tests {
		if got := r.Due(rqT0.Add(tt.at), remind, escalate); got != tt.want {
			t.Errorf("Due(+%s) = %+v, want %+v", tt.at, got, tt.want)
		}
	}
	if got := r.NextDue(remind, escalate); !got.Equal(rqT0.Add(remind)) {
		t.Fatalf("NextDue = %s, want the reminder", got)
	}
	r.RemindedAt = rqT0.Add(remind)
	if got := r.Due(rqT0.Add(12*time.Minute), remind, escalate); got != (SweepStep{}) {
		t.Fatalf("a second reminder is due: %+v, want nothing due", got)
	}
	if got := r.NextDue(remind, escalate); !got.Equal(rqT0.Add(escalate)) {
		t.Fatalf("NextDue after the reminder = %s, want the escalation", got)
	}
	r.EscalatedAt = rqT0.Add(escalate)
	if got := r.NextDue(remind, escalate); !got.Equal(r.ExpiresAt) {
		t.Fatalf("NextDue after the escalation = %s, want the expiry", got)
	}
	if got := r.NextDue(0, 0); !got.Equal(r.ExpiresAt) {
		t.Fatalf("NextDue without reminders = %s, want the expiry %s", got, r.ExpiresAt)
	}
	r.Decide(rqAlice, true, "", rqT0)
	if got := r.NextDue(remind, escalate); !got.IsZero() {
		t.Fatalf("a decided request is due at %s, want never (the zero time)", got)
	}
}

func TestRequestIDs(t *testing.T) {
	prefixes := map[RequestKind]string{KindActionRequest: "req_", KindConsentRequest: "con_", KindQuestionRequest: "ask_"}
	for k, p := range prefixes {
		id, err := NewRequestID(k)
		rest, ok := strings.CutPrefix(id, p)
		if err != nil || !ok || len(rest) != 16 || strings.Trim(rest, "0123456789abcdef") != "" {
			t.Fatalf("NewRequestID(%s) = %q, %v, want %q and 16 hex digits, no error", k, id, err, p)
		}
	}
}

func TestDeadlineIndex(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	mk := func(id string, due time.Duration) *Request {
		return &Request{ID: id, Kind: KindActionRequest, Status: StatusPending, CreatedAt: rqT0}
	}
	a, b, c := mk("req_a", 0), mk("req_b", 0), mk("req_c", 0)
	err = db.Update(ctx, func(tx kv.Tx) error {
		for _, x := range []struct {
			r   *Request
			due time.Duration
		}{{a, 10 * time.Minute}, {b, 5 * time.Minute}, {c, time.Hour}} {
			if err := PutRequest(tx, x.r, rqT0.Add(x.due)); err != nil {
				return err
			}
		}
		// Moving a's deadline must drop its old entry.
		return PutRequest(tx, a, rqT0.Add(20*time.Minute))
	})
	if err != nil {
		t.Fatal(err)
	}
	due := func(at time.Duration, limit int) []string {
		var ids []string
		if err := db.View(ctx, func(tx kv.Tx) error {
			es, err := DueRequests(tx, rqT0.Add(at), limit)
			for _, e := range es {
				ids = append(ids, e.ID)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := due(15*time.Minute, 10); !slices.Equal(got, []string{"req_b"}) {
		t.Fatalf("due at +15m = %v, want [req_b] (a moved to +20m)", got)
	}
	if got := due(20*time.Minute, 10); !slices.Equal(got, []string{"req_b", "req_a"}) {
		t.Fatalf("due at +20m = %v, want earliest first, inclusive", got)
	}
	if got := due(2*time.Hour, 2); !slices.Equal(got, []string{"req_b", "req_a"}) {
		t.Fatalf("limit 2 = %v, want [req_b req_a]", got)
	}
	if err := db.Update(ctx, func(tx kv.Tx) error { return PutRequest(tx, b, time.Time{}) }); err != nil {
		t.Fatal(err)
	}
	if got := due(2*time.Hour, 10); !slices.Equal(got, []string{"req_a", "req_c"}) {
		t.Fatalf("after unindexing b: %v, want [req_a req_c]", got)
	}
	var back *Request
	if err := db.View(ctx, func(tx kv.Tx) error { var err error; back, err = LoadRequest(tx, "req_a"); return err }); err != nil {
		t.Fatal(err)
	}
	if back == nil || !back.DueAt.Equal(rqT0.Add(20*time.Minute)) {
		t.Fatalf("stored req_a = %+v, want it due at %s", back, rqT0.Add(20*time.Minute))
	}
}

// FuzzDecide drives a request through arbitrary sequences of votes and
// closes: a terminal status never changes, an approval always has a quorum
// of distinct approvers and names them in confirmed_by, and nothing but an
// approval sets confirmed_by.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, uint8(2))
	f.Add([]byte{4, 4, 0, 9}, uint8(1))
	f.Add([]byte{1, 1, 1, 5, 2}, uint8(3))
	people := []Party{rqAlice, rqBob, rqCarol, rqAliceChat}
	f.Fuzz(func(t *testing.T, ops []byte, quorum uint8) {
		r := rqPending(int(quorum % 4))
		var terminal RequestStatus
		for i, op := range ops {
			now := rqT0.Add(time.Duration(i) * time.Second)
			switch op % 10 {
			case 8:
				r.Close(StatusExpired, "timeout", now)
			case 9:
				r.Close(StatusDenied, "headless", now)
			default:
				r.Decide(people[int(op)%len(people)], op%10 < 6, "r", now)
			}
			if terminal != "" && r.Status != terminal {
				t.Fatalf("terminal status %q changed to %q", terminal, r.Status)
			}
			if r.Status.Terminal() {
				terminal = r.Status
			}
			switch r.Status {
			case StatusApproved:
				if n := len(r.Approvals()); n < max(r.Quorum, 1) || r.ConfirmedBy != strings.Join(r.Approvals(), ", ") {
					t.Fatalf("approved with %d approvers (quorum %d), confirmed_by %q; want at least %d approvers, confirmed_by %q", n, r.Quorum, r.ConfirmedBy, max(r.Quorum, 1), strings.Join(r.Approvals(), ", "))
				}
			default:
				if r.ConfirmedBy != "" {
					t.Fatalf("status %q with confirmed_by %q, want none", r.Status, r.ConfirmedBy)
				}
			}
		}
	})
}

// rqStep is one decision in TestEdit: an approval (args "" : no edit, else
// an edit to that version), or a denial.
type rqStep struct {
	by      Party
	approve bool
	args    string // "" for a plain decision; otherwise the edited version's bytes
	want    Outcome
}

func TestEdit(t *testing.T) {
	const proposal = `{"dose":"5mg"}`
	hash := func(s string) string { return "sha:" + s }
	tests := []struct {
		name        string
		quorum      int
		steps       []rqStep
		status      RequestStatus
		edited      bool
		version     string // the arguments up for approval (or approved)
		editedBy    string
		confirmedBy string
		tally       string
	}{
		{"an edit approves at quorum 1", 1,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeDecided}},
			StatusApproved, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "alice [prin_a]", "1 of 1 approvals: alice"},
		{"an edit equal to the proposal is no edit", 1,
			[]rqStep{{rqAlice, true, proposal, OutcomeDecided}},
			StatusApproved, false, proposal, "", "alice [prin_a]", "1 of 1 approvals: alice"},
		{"an edit restarts the count: an earlier approval no longer counts", 2,
			[]rqStep{{rqBob, true, "", OutcomeCounted}, {rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}},
			StatusPending, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "", "1 of 2 approvals: alice"},
		{"a later plain approval approves the edited version", 2,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqBob, true, "", OutcomeDecided}},
			StatusApproved, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "alice [prin_a], bob [prin_b]", "2 of 2 approvals: alice, bob"},
		{"the earlier approver approves again, on the edited version", 2,
			[]rqStep{{rqBob, true, "", OutcomeCounted}, {rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqBob, true, "", OutcomeDecided}},
			StatusApproved, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "alice [prin_a], bob [prin_b]", "2 of 2 approvals: alice, bob"},
		{"approving the edited version again is a repeat", 2,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqAlice, true, "", OutcomeRepeat}, {rqAliceChat, true, `{"dose":"2.5mg"}`, OutcomeRepeat}},
			StatusPending, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "", "1 of 2 approvals: alice"},
		{"a second different edit restarts again", 3,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqBob, true, "", OutcomeCounted}, {rqCarol, true, `{"dose":"1mg"}`, OutcomeCounted}},
			StatusPending, true, `{"dose":"1mg"}`, "carol [prin_c]", "", "1 of 3 approvals: carol"},
		{"an edit back to the proposal counts the proposal's approvals again", 2,
			[]rqStep{{rqBob, true, "", OutcomeCounted}, {rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqCarol, true, proposal, OutcomeDecided}},
			StatusApproved, false, proposal, "carol [prin_c]", "bob [prin_b], carol [prin_c]", "2 of 2 approvals: bob, carol"},
		{"an editor editing again is recorded, not a repeat", 2,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqAlice, true, `{"dose":"1mg"}`, OutcomeCounted}, {rqBob, true, "", OutcomeDecided}},
			StatusApproved, true, `{"dose":"1mg"}`, "alice [prin_a]", "alice [prin_a], bob [prin_b]", "2 of 2 approvals: alice, bob"},
		{"a deny after an edit denies", 2,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeCounted}, {rqBob, false, "", OutcomeDecided}},
			StatusDenied, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "", "1 of 2 approvals: alice"},
		{"an edit after the decision conflicts and changes nothing", 1,
			[]rqStep{{rqAlice, true, "", OutcomeDecided}, {rqBob, true, `{"dose":"2.5mg"}`, OutcomeConflict}},
			StatusApproved, false, proposal, "", "alice [prin_a]", "1 of 1 approvals: alice"},
		{"the winner repeating the approved edit gets the same outcome", 1,
			[]rqStep{{rqAlice, true, `{"dose":"2.5mg"}`, OutcomeDecided}, {rqAlice, true, `{"dose":"2.5mg"}`, OutcomeRepeat}, {rqAlice, true, "", OutcomeRepeat}},
			StatusApproved, true, `{"dose":"2.5mg"}`, "alice [prin_a]", "alice [prin_a]", "1 of 1 approvals: alice"},
		{"an edit of a denied request conflicts", 1,
			[]rqStep{{rqAlice, false, "", OutcomeDecided}, {rqBob, true, `{"dose":"2.5mg"}`, OutcomeConflict}},
			StatusDenied, false, proposal, "", "", "0 of 1 approvals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rqPending(tt.quorum)
			r.Action.Arguments, r.Action.ArgsSHA256 = json.RawMessage(proposal), hash(proposal)
			for i, st := range tt.steps {
				at := rqT0.Add(time.Duration(i) * time.Minute)
				var got Outcome
				if st.args == "" {
					got = r.Decide(st.by, st.approve, "because", at)
				} else {
					got = r.Edit(st.by, json.RawMessage(st.args), hash(st.args), "because", at)
				}
				if got != st.want {
					t.Fatalf("step %d (%s args %q) = %v, want %v", i, st.by.Display, st.args, got, st.want)
				}
			}
			a := r.Action
			args, h := a.Version()
			if r.Status != tt.status || a.Edited != tt.edited || string(args) != tt.version || h != hash(tt.version) || a.EditedBy != tt.editedBy {
				t.Fatalf("status %q edited %v version %s (%s) edited_by %q; want %q %v %s %q", r.Status, a.Edited, args, h, a.EditedBy, tt.status, tt.edited, tt.version, tt.editedBy)
			}
			if r.ConfirmedBy != tt.confirmedBy || r.Tally() != tt.tally {
				t.Fatalf("confirmed_by %q tally %q; want %q %q", r.ConfirmedBy, r.Tally(), tt.confirmedBy, tt.tally)
			}
			// The proposal is never changed by an edit.
			if string(a.Arguments) != proposal || a.ArgsSHA256 != hash(proposal) {
				t.Fatalf("the proposal changed: %s %s, want %s %s", a.Arguments, a.ArgsSHA256, proposal, hash(proposal))
			}
			// Every vote names the version it was cast on.
			for i, v := range r.Votes {
				if v.ArgsSHA256 == "" {
					t.Fatalf("vote %d has no version", i)
				}
			}
		})
	}
}

// A vote stored before votes carried a version counts as a vote on the
// proposal, and stops counting once an edit changes the version.
func TestEditLegacyVotes(t *testing.T) {
	r := rqPending(2)
	r.Action.Arguments, r.Action.ArgsSHA256 = json.RawMessage(`{"n":1}`), "sha:1"
	r.Votes = []Vote{{By: rqBob, Approve: true, At: rqT0}}
	if got := r.Tally(); got != "1 of 2 approvals: bob" {
		t.Fatalf("legacy vote not counted: %q, want %q", got, "1 of 2 approvals: bob")
	}
	if got := r.Edit(rqAlice, json.RawMessage(`{"n":2}`), "sha:2", "", rqT0); got != OutcomeCounted || r.Tally() != "1 of 2 approvals: alice" {
		t.Fatalf("edit = %v, tally %q; want OutcomeCounted, %q", got, r.Tally(), "1 of 2 approvals: alice")
	}
}

// TestVoteCap: repeated edits cannot grow a request's vote list without
// bound. One person's edits stop at MaxVotesPerPerson (OutcomeFull, the
// request unchanged); a denial is still recorded; and the list as a whole
// stops at MaxVotes.
func TestVoteCap(t *testing.T) {
	r := rqPending(2)
	r.Action.Mechanics = "confirm"
	r.Action.Arguments, r.Action.ArgsSHA256 = []byte(`{"dose":"5mg"}`), "sha:p"
	for i := range MaxVotesPerPerson {
		v := fmt.Sprintf(`{"dose":"%dmg"}`, i+10)
		if out := r.Edit(rqAlice, []byte(v), "sha:"+v, "", rqT0); out != OutcomeCounted {
			t.Fatalf("edit %d: %v, want counted", i+1, out)
		}
	}
	before := fmt.Sprintf("%+v %s", *r.Action, r.Tally())
	if out := r.Edit(rqAlice, []byte(`{"dose":"1mg"}`), "sha:1", "", rqT0); out != OutcomeFull {
		t.Fatalf("edit %d: %v, want OutcomeFull", MaxVotesPerPerson+1, out)
	}
	if out := r.Decide(rqAlice, true, "", rqT0); out != OutcomeRepeat {
		t.Fatalf("alice's approval of her own last edit: %v, want a repeat", out)
	}
	if after := fmt.Sprintf("%+v %s", *r.Action, r.Tally()); after != before || len(r.Votes) != MaxVotesPerPerson {
		t.Fatalf("a refused edit changed the request:\n%s\n%s (%d votes, want %d and no change)", before, after, len(r.Votes), MaxVotesPerPerson)
	}
	if msg := r.Full(rqAlice); !strings.Contains(msg, "the most one person casts") {
		t.Fatalf("Full(alice) = %q, want it to contain %q", msg, "the most one person casts")
	}
	if r.Full(rqBob) != "" {
		t.Fatal("bob is refused for alice's votes")
	}
	// Many approvers fill the list: then nobody's approval is recorded,
	// but a denial still is.
	for i := 0; len(r.Votes) < MaxVotes; i++ {
		p := rqPerson(fmt.Sprintf("p%d", i), fmt.Sprintf("prin_p%d", i), "member")
		v := fmt.Sprintf(`{"dose":"%dmg"}`, 100+i)
		if out := r.Edit(p, []byte(v), "sha:"+v, "", rqT0); out != OutcomeCounted {
			t.Fatalf("edit by %s: %v, want OutcomeCounted", p.Name, out)
		}
	}
	if out := r.Decide(rqBob, true, "", rqT0); out != OutcomeFull {
		t.Fatalf("an approval on a full list: %v, want OutcomeFull", out)
	}
	if out := r.Decide(rqBob, false, "too many edits", rqT0); out != OutcomeDecided || r.Status != StatusDenied {
		t.Fatalf("a denial on a full list: %v %s, want it recorded", out, r.Status)
	}
}

// TestReopen is the one way back to pending: an approved action whose
// receipt is not redeemed, or a pending one whose count starts again,
// when the facts its approval rests on changed. Every other state stays.
func TestReopen(t *testing.T) {
	later := rqT0.Add(time.Hour)
	expires := later.Add(30 * time.Minute)
	tests := []struct {
		name    string
		make    func() *Request
		want    bool
		status  RequestStatus
		round   int
		tally   string
		expires time.Time
	}{
		{"approved, not redeemed: pending again, the count from zero", func() *Request {
			r := rqPending(1)
			r.Decide(rqAlice, true, "", rqT0)
			return r
		}, true, StatusPending, 1, "0 of 1 approvals", expires},
		{"pending with a vote counted: the count starts again", func() *Request {
			r := rqPending(2)
			r.Decide(rqAlice, true, "", rqT0)
			return r
		}, true, StatusPending, 1, "0 of 2 approvals", rqT0.Add(30 * time.Minute)},
		{"approved and redeemed: executed, it stays", func() *Request {
			r := rqPending(1)
			r.Decide(rqAlice, true, "", rqT0)
			r.ExecutedAt = rqT0.Add(time.Minute)
			return r
		}, false, StatusApproved, 0, "1 of 1 approvals: alice", time.Time{}},
		{"denied: it stays", func() *Request {
			r := rqPending(1)
			r.Decide(rqAlice, false, "no", rqT0)
			return r
		}, false, StatusDenied, 0, "0 of 1 approvals", rqT0.Add(30 * time.Minute)},
		{"expired: it stays", func() *Request {
			r := rqPending(1)
			r.Close(StatusExpired, "timeout", rqT0)
			return r
		}, false, StatusExpired, 0, "0 of 1 approvals", rqT0.Add(30 * time.Minute)},
		{"a consent request is not an action: it stays", func() *Request {
			r := rqPending(1)
			r.Kind, r.Action, r.Consent = KindConsentRequest, nil, &Consent{Action: "x"}
			r.Decide(rqAlice, true, "", rqT0)
			return r
		}, false, StatusApproved, 0, "1 of 1 approvals: alice", rqT0.Add(30 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.make()
			before := r.Status
			got := r.Reopen("allergy: none → penicillin", later, expires)
			if got != tt.want || r.Status != tt.status || r.Round != tt.round || r.Tally() != tt.tally {
				t.Fatalf("Reopen from %s = %v: status %s round %d tally %q; want %v %s %d %q", before, got, r.Status, r.Round, r.Tally(), tt.want, tt.status, tt.round, tt.tally)
			}
			if tt.want {
				if r.Reopened != "allergy: none → penicillin" || !r.ReopenedAt.Equal(later) || r.ConfirmedBy != "" || len(r.DecidedBy) != 0 || r.Facts != nil {
					t.Fatalf("reopened request: %+v, want reopened %q at %s, no confirmed_by, deciders or facts", r, "allergy: none → penicillin", later)
				}
				if !r.ExpiresAt.Equal(tt.expires) {
					t.Fatalf("expires_at %s, want %s", r.ExpiresAt, tt.expires)
				}
				if len(r.Votes) == 0 {
					t.Fatal("the earlier votes were dropped; they stay for the record")
				}
			} else if r.Reopened != "" {
				t.Fatalf("a request that stayed records a reopening: %q, want none", r.Reopened)
			}
		})
	}

	// After a reopening, the earlier approver's vote is a new vote, not
	// a repeat, and a new round decides.
	r := rqPending(1)
	r.DecideOn(rqAlice, true, "", rqT0, Basis{Facts: []Fact{{Subject: "allergy", Value: "none", Version: "1:A"}}})
	if len(r.Facts) != 1 || r.Facts[0].Version != "1:A" {
		t.Fatalf("the deciding approval's facts are not the request's: %+v, want one fact at version 1:A", r.Facts)
	}
	r.Reopen("allergy: none → penicillin", later, expires)
	now := []Fact{{Subject: "allergy", Value: "penicillin", Version: "2:A"}}
	if got := r.DecideOn(rqAlice, true, "", later, Basis{Facts: now}); got != OutcomeDecided || r.Status != StatusApproved || r.Facts[0].Version != "2:A" {
		t.Fatalf("a new approval after the reopening = %v (%s, facts %+v), want decided on the new facts", got, r.Status, r.Facts)
	}
	if v := r.Votes[len(r.Votes)-1]; v.Round != 1 || v.Facts[0].Value != "penicillin" {
		t.Fatalf("the new vote: %+v, want round 1 on the fact penicillin", v)
	}
	if got := r.Changes(now); len(got) != 0 {
		t.Fatalf("changes against the facts it was approved on: %v, want none", got)
	}
}

func TestFactChanges(t *testing.T) {
	was := []Fact{{Subject: "allergy", Value: "none", Version: ""}, {Subject: "active_medication", Value: "warfarin", Version: "3:A"}}
	tests := []struct {
		name string
		now  []Fact
		want string
	}{
		{"nothing changed", []Fact{{Subject: "allergy", Value: "none"}, {Subject: "active_medication", Value: "warfarin", Version: "3:A"}}, ""},
		{"an allergy recorded", []Fact{{Subject: "allergy", Value: "penicillin", Version: "9:A"}, {Subject: "active_medication", Value: "warfarin", Version: "3:A"}}, "allergy: none → penicillin"},
		{"a proposal flags the medication", []Fact{{Subject: "allergy", Value: "none"}, {Subject: "active_medication", Value: "warfarin; apixaban (proposed)", Version: "3:A 7:F"}}, "active_medication: warfarin → warfarin; apixaban (proposed)"},
		{"retracted", []Fact{{Subject: "allergy", Value: "none"}}, "active_medication: warfarin → none"},
		{"the same value, another version", []Fact{{Subject: "allergy", Value: "none"}, {Subject: "active_medication", Value: "warfarin", Version: "8:A"}}, "active_medication: warfarin → warfarin (changed)"},
	}
	for _, tt := range tests {
		if got := JoinChanges(FactChanges(was, tt.now)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestVoidVotes: a suspended voter's approvals of a pending request stop
// counting (from any surface: the same name), so the next approval does
// not reach the quorum with theirs; a decided request is never changed.
func TestVoidVotes(t *testing.T) {
	r := rqPending(2)
	if got := r.Decide(rqAliceChat, true, "", rqT0); got != OutcomeCounted {
		t.Fatalf("alice = %v, want OutcomeCounted", got)
	}
	if !r.VoidVotes("Alice", "slack account deactivated") {
		t.Fatal("VoidVotes changed nothing")
	}
	if r.VoidVotes("alice", "again") {
		t.Error("voiding twice changed the request again")
	}
	if got := r.Tally(); got != "0 of 2 approvals" {
		t.Errorf("tally after the suspension = %q, want 0 of 2", got)
	}
	if got := r.Decide(rqBob, true, "", rqT0.Add(time.Minute)); got != OutcomeCounted || r.Status != StatusPending {
		t.Fatalf("bob after alice's vote was voided = %v %s, want counted and still pending", got, r.Status)
	}
	// Alice, her suspension lifted, approves again: a new vote, counted.
	if got := r.Decide(rqAlice, true, "", rqT0.Add(2*time.Minute)); got != OutcomeDecided || r.ConfirmedBy != "bob [prin_b], alice [prin_a]" {
		t.Fatalf("alice again = %v, confirmed_by %q, want decided by bob and alice", got, r.ConfirmedBy)
	}
	if r.VoidVotes("bob", "left") || r.Status != StatusApproved {
		t.Error("a decided request was changed by VoidVotes")
	}
}

// TestDecisionAssurance: each vote keeps its assurance; an approved
// request's is the weakest of the approvals that decided it, a denied
// one's the denial's, a pending one's none, and a decision with a vote
// recorded before assurances were states none.
func TestDecisionAssurance(t *testing.T) {
	r := rqPending(2)
	r.DecideOn(rqAlice, true, "", rqT0, Basis{Assurance: policy.AssurancePasskey})
	if got := r.DecisionAssurance(); got != "" {
		t.Fatalf("pending: %q, want no assurance", got)
	}
	r.DecideOn(rqBob, true, "", rqT0.Add(time.Minute), Basis{Assurance: policy.AssuranceChat})
	if r.Status != StatusApproved || r.Votes[0].Assurance != policy.AssurancePasskey || r.DecisionAssurance() != policy.AssuranceChat {
		t.Fatalf("approved: status %s, votes %+v, assurance %q; want %s, the first vote %s, assurance %q", r.Status, r.Votes, r.DecisionAssurance(), StatusApproved, policy.AssurancePasskey, policy.AssuranceChat)
	}
	d := rqPending(1)
	d.DecideOn(rqAlice, false, "no", rqT0, Basis{Assurance: policy.AssuranceStepUp})
	if got := d.DecisionAssurance(); got != policy.AssuranceStepUp {
		t.Fatalf("denied: %q, want %q", got, policy.AssuranceStepUp)
	}
	old := rqPending(1)
	old.Decide(rqAlice, true, "", rqT0)
	if got := old.DecisionAssurance(); got != "" {
		t.Fatalf("a vote without an assurance: %q, want none", got)
	}
}

// TestVoidApprovalsRestages: a voided approval that leaves an earlier
// stage short sends the request back to that stage: the approvals of the
// later stages stop counting too (named in later), so each signs off
// again after it; the people whose later approvals were voided may approve
// again (their void votes hold them to no stage). A voided approval of the
// open stage leaves the earlier stages' alone.
func TestVoidApprovalsRestages(t *testing.T) {
	dave := rqPerson("dave", "prin_d", "member")
	staged := func() *Request {
		r := rqPending(1)
		r.Stages = []policy.Stage{{Name: "prescriber", Quorum: 1}, {Name: "pharmacist", Quorum: 1}, {Name: "nurse", Quorum: 2}}
		return r
	}
	r := staged()
	for i, p := range []Party{rqAlice, rqBob, rqCarol} {
		if got := r.Decide(p, true, "", rqT0.Add(time.Duration(i)*time.Minute)); got != OutcomeCounted {
			t.Fatalf("%s: %v, want counted", p.Name, got)
		}
	}
	if got := r.OpenStage(); got != 2 {
		t.Fatalf("open stage after prescriber, pharmacist and one nurse: %d, want 2", got)
	}
	changed, later := r.VoidApprovals("alice", "suspended from approving: slack: deactivated")
	if !changed || !slices.Equal(later, []string{"bob [prin_b]", "carol [prin_c]"}) {
		t.Fatalf("VoidApprovals = %v, later %q; want changed, later bob and carol", changed, later)
	}
	if got, want := r.Tally(), "stage 1 of 3 (prescriber): 0 of 1 approvals, open; stage 2 of 3 (pharmacist): 0 of 1 approvals, waiting; stage 3 of 3 (nurse): 0 of 2 approvals, waiting"; got != want {
		t.Fatalf("tally after the prescriber's approval was voided:\n got %q\nwant %q", got, want)
	}
	if v := r.Votes[1]; v.Void == "" || !strings.Contains(v.Void, "stage 1 of 3 (prescriber) lost alice's approval") {
		t.Errorf("bob's vote says %q, want why it no longer counts", v.Void)
	}
	// bob may now prescribe (his pharmacist vote no longer counts), dave
	// is the pharmacist, and the nurse stage needs two again.
	for i, step := range []struct {
		p    Party
		want Outcome
	}{{rqBob, OutcomeCounted}, {dave, OutcomeCounted}, {rqCarol, OutcomeCounted}, {rqAlice, OutcomeDecided}} {
		if got := r.Decide(step.p, true, "", rqT0.Add(time.Duration(10+i)*time.Minute)); got != step.want {
			t.Fatalf("%s after the restage: %v, want %v (tally %s)", step.p.Name, got, step.want, r.Tally())
		}
	}
	if r.Status != StatusApproved || r.ConfirmedBy != "bob [prin_b], dave [prin_d], carol [prin_c], alice [prin_a]" {
		t.Fatalf("after the stages signed off again: %s, confirmed by %q; want %s, %q", r.Status, r.ConfirmedBy, StatusApproved, "bob [prin_b], dave [prin_d], carol [prin_c], alice [prin_a]")
	}

	// The open stage's approval voided: the earlier stages keep theirs.
	r = staged()
	r.Decide(rqAlice, true, "", rqT0)
	r.Decide(rqBob, true, "", rqT0.Add(time.Minute))
	r.Decide(rqCarol, true, "", rqT0.Add(2*time.Minute))
	if changed, later := r.VoidApprovals("carol", "left"); !changed || later != nil || r.OpenStage() != 2 || len(r.StageApprovers(1)) != 1 {
		t.Fatalf("voiding the open stage's approval: changed %v, later %q, open %d; want the earlier stages kept", changed, later, r.OpenStage())
	}
}
