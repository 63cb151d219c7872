package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func person(name, id string, role Role) Decider {
	return Decider{ID: id, Name: name, Display: name + " [" + id + "]", Kind: "person", Role: role}
}

// refusalOf is Decide's message, "" when it allows, for the tables of
// refusals.
func refusalOf(d Decider, it Decidable) string {
	if r := Decide(d, it); r != nil {
		return r.Message
	}
	return ""
}

// TestDecideRefusals: who Decide refuses, and what it says.
func TestDecideRefusals(t *testing.T) {
	it := Decidable{
		Ref: "req_0123456789abcdef", RequesterID: "prin_agent", RequesterName: "deploy-bot", RequesterDisplay: "deploy-bot [prin_agent]",
		SpaceUserID: "patient_42", Approvers: Approvers{Roles: []string{"admin"}, Principals: []string{"Bob"}}, ApproversOf: "delete_database requests",
	}
	scoped := person("carol", "prin_c", RoleMember)
	scoped.Scopes = []string{"patient_99"}
	scopedAdmin := person("carol", "prin_c", RoleAdmin)
	scopedAdmin.Scopes = []string{"patient_99"}
	suspended := person("carol", "prin_c", RoleAdmin)
	suspended.Suspended = "slack account deactivated"
	tests := []struct {
		name string
		d    Decider
		want string // "" or a fragment of the refusal
	}{
		{"an admin by role", person("carol", "prin_c", RoleAdmin), ""},
		{"a named principal, any case", person("bob", "prin_b", RoleMember), ""},
		{"a member not listed", person("alice", "prin_a", RoleMember), "delete_database requests are decided by roles admin or principals Bob; alice [prin_a] is not among them"},
		{"no identity", Decider{Kind: "person", Role: RoleAdmin}, "needs an authenticated identity"},
		{"a blank name", Decider{ID: "x", Name: " ", Kind: "person", Role: RoleAdmin}, "needs an authenticated identity"},
		{"an agent even with approve", Decider{ID: "p", Name: "x", Role: RoleAdmin, Kind: "agent", Display: "x [p]"}, "x [p] is an agent principal"},
		{"a member-role agent key", Decider{ID: "p", Name: "bob", Role: RoleMember, Kind: "agent"}, "is an agent principal"},
		{"a service account", Decider{ID: "p", Name: "cron", Role: RoleAdmin, Kind: "service", Display: "cron [p]"}, "is a service principal"},
		{"no kind at all fails closed", Decider{ID: "p", Name: "bob", Role: RoleAdmin}, "is an unclassified principal"},
		{"no approve capability", person("vic", "prin_v", RoleViewer), "requires the 'approve' capability; your role(s) ['viewer']"},
		{"the requester itself", person("deploy-bot", "prin_agent", RoleAdmin), "never decided by its own requester"},
		{"the requester by name from chat", Decider{ID: "chat:deploy-bot", Name: "Deploy-Bot", Role: RoleAdmin, Kind: "person"}, "never decided by its own requester"},
		{"out of scope", scoped, "outside your assigned scope"},
		{"admins ignore scopes", scopedAdmin, ""},
		{"a suspended admin", suspended, "carol [prin_c] is suspended from approving (slack account deactivated)"},
	}
	for _, tt := range tests {
		got := refusalOf(tt.d, it)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: Decide refused with %q, want %q", tt.name, got, tt.want)
		}
		if got != "" && !strings.HasPrefix(got, "Access denied: ") {
			t.Errorf("%s: refusal %q does not start with the seeds' wording", tt.name, got)
		}
	}
	// No approvers declared: anyone holding approve; no requester (a
	// trusted-source write): the requester check is skipped.
	open := Decidable{Ref: "#2", SpaceUserID: "patient_42"}
	if got := refusalOf(person("alice", "prin_a", RoleMember), open); got != "" {
		t.Errorf("no approvers declared: alice refused with %q, want no refusal", got)
	}
	if got := refusalOf(Decider{ID: "x", Name: "", Kind: "person", Role: RoleAdmin}, open); got == "" {
		t.Error("a nameless decider matched an empty requester")
	}
}

func TestSamePrincipal(t *testing.T) {
	for _, tt := range []struct {
		aID, aName, bID, bName string
		want                   bool
	}{
		{"p1", "alice", "p1", "other", true},
		{"p1", "alice", "chat:alice", "Alice", true},
		{"p1", "alice", "p2", "bob", false},
		{"", "", "", "", false},
		{"", " ", "", " ", false},
	} {
		if got := SamePrincipal(tt.aID, tt.aName, tt.bID, tt.bName); got != tt.want {
			t.Errorf("SamePrincipal(%q,%q,%q,%q) = %v, want %v", tt.aID, tt.aName, tt.bID, tt.bName, got, tt.want)
		}
	}
}

// TestDecideNamesTheCheck: the check that refused, and its short
// form for a list of read-only items, agree with the refusal itself.
func TestDecideNamesTheCheck(t *testing.T) {
	it := Decidable{Ref: "#7", RequesterID: "prin_agent", RequesterName: "ward_bot", RequesterDisplay: "ward_bot [prin_agent]",
		SpaceUserID: "patient_42", Approvers: Approvers{Principals: []string{"bob"}}}
	scoped := person("carol", "prin_c", RoleMember)
	scoped.Scopes = []string{"patient_99"}
	tests := []struct {
		name  string
		d     Decider
		check DecisionCheck
		short string
	}{
		{"allowed", person("bob", "prin_b", RoleMember), CheckAllowed, ""},
		{"no identity", Decider{Kind: "person", Role: RoleAdmin}, CheckIdentity, "agents and services do not decide"},
		{"an agent", Decider{ID: "p", Name: "x", Role: RoleMember, Kind: "agent"}, CheckPerson, "agents and services do not decide"},
		{"a viewer", person("vic", "prin_v", RoleViewer), CheckCapability, "needs role member or admin (you are viewer)"},
		{"the requester", person("ward_bot", "prin_agent", RoleAdmin), CheckRequester, "you requested it"},
		{"out of scope", scoped, CheckScope, "outside your scope"},
		{"not an approver", person("alice", "prin_a", RoleMember), CheckApprovers, "Access denied: #7 are decided by principals bob"},
	}
	for _, tt := range tests {
		r := checkDecision(tt.d, it)
		if r.Check != tt.check || r.Message != refusalOf(tt.d, it) {
			t.Errorf("%s: checkDecision = %+v, want check %d and Decide's message", tt.name, r, tt.check)
		}
		if got := r.Short(tt.d.Role); !strings.HasPrefix(got, tt.short) || (tt.short == "") != (got == "") {
			t.Errorf("%s: Short = %q, want %q", tt.name, got, tt.short)
		}
	}
}

// TestDecideStepUp: an item that requires step-up is approved only
// by a decider whose last strong sign-in lies within the window at the
// decision's time; every other check comes first, and the step-up refusal
// is recognisable by its check (errors.Is(err, CheckStepUp)) so a surface
// can offer a fresh sign-in.
func TestDecideStepUp(t *testing.T) {
	at := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	it := Decidable{Ref: "req_1", RequesterID: "prin_agent", RequesterName: "deploy-bot", RequesterDisplay: "deploy-bot [prin_agent]",
		SpaceUserID: "ops", StepUp: 5 * time.Minute, At: at}
	fresh := func(ago time.Duration) Decider {
		d := person("alice", "prin_a", RoleMember)
		d.AuthAt, d.AuthMethod = at.Add(-ago), "oidc"
		return d
	}
	noAt := it
	noAt.At = time.Time{}
	notRequired := it
	notRequired.StepUp = 0
	tests := []struct {
		name  string
		d     Decider
		it    Decidable
		check DecisionCheck
		want  string
	}{
		{"signed in a minute ago", fresh(time.Minute), it, CheckAllowed, ""},
		{"signed in exactly at the window's edge", fresh(5 * time.Minute), it, CheckAllowed, ""},
		{"signed in a second too early", fresh(5*time.Minute + time.Second), it, CheckStepUp, "last oidc was at 2026-12-01T15:54:59Z, which is not within the last 5m0s"},
		{"no strong sign-in at all (chat, API key, link)", person("alice", "prin_a", RoleMember), it, CheckStepUp, "carries no fresh sign-in: chat, API keys and sign-in links never do"},
		{"a sign-in within the skew ahead", fresh(-30 * time.Second), it, CheckAllowed, ""},
		{"a sign-in far in the future fails closed", fresh(-2 * time.Minute), it, CheckStepUp, "not within the last"},
		{"no decision time fails closed", fresh(time.Minute), noAt, CheckStepUp, "the time of the decision is unknown"},
		{"not required: no sign-in needed", person("alice", "prin_a", RoleMember), notRequired, CheckAllowed, ""},
		{"the requester is refused as the requester, not for step-up", func() Decider { d := fresh(time.Hour); d.ID, d.Name = "prin_agent", "deploy-bot"; return d }(), it, CheckRequester, "never decided by its own requester"},
		{"an agent is refused as an agent even when fresh", func() Decider { d := fresh(time.Minute); d.Kind = "agent"; return d }(), it, CheckPerson, "agent principal"},
	}
	for _, tt := range tests {
		r := checkDecision(tt.d, tt.it)
		if r.Check != tt.check || !strings.Contains(r.Message, tt.want) || (tt.want == "") != (r.Message == "") {
			t.Errorf("%s: checkDecision = %+v, want check %d with %q", tt.name, r, tt.check, tt.want)
		}
		refusal := Decide(tt.d, tt.it)
		if got := refusal != nil && errors.Is(refusal, CheckStepUp); got != (tt.check == CheckStepUp) {
			t.Errorf("%s: errors.Is(Decide's refusal %v, CheckStepUp) = %v, want %v", tt.name, refusal, got, tt.check == CheckStepUp)
		}
		if tt.check == CheckStepUp {
			if !strings.HasPrefix(r.Message, "Access denied: step-up required: approve in the console after signing in again.") {
				t.Errorf("%s: refusal %q does not start with the step-up wording", tt.name, r.Message)
			}
			if s := r.Short(RoleMember); s != "approving needs a fresh sign-in (step-up)" {
				t.Errorf("%s: Short = %q, want %q", tt.name, s, "approving needs a fresh sign-in (step-up)")
			}
		}
	}
}

// TestSuspensionComesRightAfterIdentity: a suspended principal is refused
// for the suspension, before anything else about them is weighed.
func TestSuspensionComesRightAfterIdentity(t *testing.T) {
	d := person("deploy-bot", "prin_agent", RoleViewer)
	d.Suspended = "left the Discord server"
	r := checkDecision(d, Decidable{Ref: "#4", RequesterID: "prin_agent", SpaceUserID: "x"})
	if r.Check != CheckSuspended || !strings.Contains(r.Message, "left the Discord server") {
		t.Fatalf("checkDecision = %+v, want the suspension", r)
	}
	if got := r.Short(RoleViewer); got != "you are suspended from approving" {
		t.Errorf("Short = %q, want %q", got, "you are suspended from approving")
	}
	admin := person("alice", "prin_a", RoleAdmin)
	if !SeesDetails(admin, Decidable{Ref: "#4", SpaceUserID: "x"}, true) {
		t.Fatal("an admin does not see a sensitive item's details")
	}
	admin.Suspended = "slack account deactivated"
	if SeesDetails(admin, Decidable{Ref: "#4", SpaceUserID: "x"}, true) {
		t.Error("a suspended principal sees a sensitive item's details as an approver")
	}
}

// TestDecisionRuleGroupsAndStages: a group among the approvers admits a
// decider who belongs to it (any case), nobody else; an approver of an
// earlier stage is refused, after the approvers check and before
// step-up; the short reason says so.
func TestDecisionRuleGroupsAndStages(t *testing.T) {
	lee := Decider{ID: "prin_lee", Name: "ph_lee", Kind: "person", Role: RoleMember, Groups: []string{"Pharmacists"}}
	smith := Decider{ID: "prin_smith", Name: "dr_smith", Kind: "person", Role: RoleMember}
	it := Decidable{Ref: "req_1", Approvers: Approvers{Groups: []string{"pharmacists"}}, Stage: "pharmacist, stage 2 of 2"}
	if r := checkDecision(lee, it); r.Check != CheckAllowed {
		t.Errorf("a pharmacist: %+v, want check %s", r, CheckAllowed)
	}
	if r := checkDecision(smith, it); r.Check != CheckApprovers || !strings.Contains(r.Message, "is decided by groups pharmacists") {
		t.Errorf("not a pharmacist: %+v, want check %s saying %q", r, CheckApprovers, "is decided by groups pharmacists")
	}
	it.EarlierStages = []StageApproval{{ID: "prin_other", Name: "PH_LEE", Stage: "prescriber"}}
	it.StepUp, it.At = time.Minute, time.Now()
	r := checkDecision(lee, it)
	if r.Check != CheckStage || !strings.Contains(r.Message, "approved the prescriber stage of req_1, and one person approves at most one stage") {
		t.Errorf("the prescriber at the pharmacist stage: %+v, want check %s saying %q", r, CheckStage, "approved the prescriber stage of req_1, and one person approves at most one stage")
	}
	if got := r.Short(RoleMember); got != "you approved an earlier stage" {
		t.Errorf("Short = %q, want %q", got, "you approved an earlier stage")
	}
	if r := checkDecision(smith, it); r.Check != CheckApprovers {
		t.Errorf("not a pharmacist at a later stage: %+v, want check %s (approvers come before the stage check)", r, CheckApprovers)
	}
}

// TestRotation: turns of Length each from Start, round and round;
// nobody before Start or without people.
func TestRotation(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := Rotation{People: []string{"alice", "bob", "carol"}, Start: t0, Length: 24 * time.Hour}
	for _, tc := range []struct {
		at   time.Duration
		want string
	}{{-time.Minute, ""}, {0, "alice"}, {23 * time.Hour, "alice"}, {24 * time.Hour, "bob"}, {71 * time.Hour, "carol"}, {72 * time.Hour, "alice"}} {
		if got := r.OnCall(t0.Add(tc.at)); got != tc.want {
			t.Errorf("OnCall(start%+v) = %q, want %q", tc.at, got, tc.want)
		}
	}
	if got := (Rotation{Start: t0, Length: time.Hour}).OnCall(t0); got != "" {
		t.Errorf("a rotation without people: OnCall = %q, want \"\"", got)
	}
}
