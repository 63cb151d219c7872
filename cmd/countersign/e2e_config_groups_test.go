package main

import (
	"os"
	"strings"
	"testing"
)

// TestConfigGroupLeaverVotesStopCounting: ph_kim approves a dose that
// needs two pharmacists; config.yaml then takes ph_kim out of the group,
// and at the next start her approval stops counting, as a directory
// removal's does: the request is back to no approvals, a second
// pharmacist's approval is not enough, and it is
// audited once (a start with nothing changed, or a member added, voids
// nothing more).
func TestConfigGroupLeaverVotesStopCounting(t *testing.T) {
	t.Parallel()
	const conf = `groups:
  pharmacists: [ph_kim, ph_lee, ph_roe]
tools:
  - name: set_dose
    category: mutating
    quorum: 2
    approvers: {groups: [pharmacists]}
`
	e := newTestEnv(t, conf)
	agent := e.CreateKey("ward_bot", "agent")
	admin := e.CreateKey("root", "admin")
	kim := e.CreateKey("ph_kim", "member")
	lee := e.CreateKey("ph_lee", "member")
	e.Start()
	rid := e.MustOK(agent, "confirm_action", map[string]any{"tool": "set_dose", "arguments": map[string]any{"drug": "apixaban", "dose": "5mg"}}).Data["request_id"].(string)
	if r := e.MustOK(kim, "approve_action", map[string]any{"request_id": rid}); r.Data["tally"] != "1 of 2 approvals: ph_kim" {
		t.Fatalf("ph_kim's approval: tally = %v, want %q: %s", r.Data["tally"], "1 of 2 approvals: ph_kim", r)
	}
	voids := func() int {
		n := 0
		for _, en := range e.MustOK(admin, "audit_log", map[string]any{"limit": 200}).Data["entries"].([]any) {
			if en.(map[string]any)["action"] == "group_votes_void" {
				n++
			}
		}
		return n
	}
	restartWith := func(from, to string) {
		t.Helper()
		e.Stop()
		b, err := os.ReadFile(e.cfg)
		if err != nil || !strings.Contains(string(b), from) {
			t.Fatalf("the config does not hold %q (%v), want it there to replace", from, err)
		}
		if err := os.WriteFile(e.cfg, []byte(strings.Replace(string(b), from, to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		e.Start()
	}

	restartWith("pharmacists: [ph_kim, ph_lee, ph_roe]", "pharmacists: [ph_lee, ph_roe]")
	st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid})
	if st.Data["status"] != "pending" || strings.Contains(st.Data["tally"].(string), "1 of 2") {
		t.Fatalf("after ph_kim left the group: %s, want her approval no longer counted", st)
	}
	if n := voids(); n != 1 {
		t.Fatalf("%d group_votes_void entries after the restart, want 1", n)
	}
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 5}).Text
	if !strings.Contains(log, `"ph_kim" left config.yaml's group pharmacists: their approvals no longer count on #`) {
		t.Fatalf("the audit does not say why (want %q in the log):\n%s", `"ph_kim" left config.yaml's group pharmacists: their approvals no longer count on #`, log)
	}
	if r := e.MustOK(lee, "approve_action", map[string]any{"request_id": rid}); r.Data["tally"] != "1 of 2 approvals: ph_lee" {
		t.Fatalf("ph_lee's approval after ph_kim's stopped counting: %s, want 1 of 2", r)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["status"] != "pending" {
		t.Fatalf("one counted approval of two approved it: status = %v, want pending: %s", st.Data["status"], st)
	}
	// Nothing changed, then a member added: no more voids.
	restartWith("pharmacists: [ph_lee, ph_roe]", "pharmacists: [ph_lee, ph_roe]")
	restartWith("pharmacists: [ph_lee, ph_roe]", "pharmacists: [ph_lee, ph_roe, ph_kim]")
	if n := voids(); n != 1 {
		t.Fatalf("%d group_votes_void entries after restarts that took nobody out, want still 1", n)
	}
	if st := e.MustOK(agent, "action_status", map[string]any{"request_id": rid}); st.Data["tally"] != "1 of 2 approvals: ph_lee" {
		t.Fatalf("after ph_kim's return: %s, want ph_lee's approval alone (a voided vote stays void)", st)
	}
}
