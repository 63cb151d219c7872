package main

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// Seed 002: "mode accepts off, normal, or protective, and the synonyms
// listed under set_approval_mode. Any other value fails validation."
func TestSoftApprovalModeIsValidatedAtStart(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"off", "normal", "protective", "paranoid", "careful", "default", "yolo", "Protective"} {
		if _, err := config.Parse([]byte("soft_approval:\n  mode: "+ok+"\n  spaces: {patient_42: "+ok+"}\n"), t.TempDir()); err != nil {
			t.Errorf("mode %q refused: %v", ok, err)
		}
	}
	_, err := config.Parse([]byte("soft_approval:\n  mode: cautious\n  spaces: {patient_42: reckless}\n"), t.TempDir())
	for _, want := range []string{`soft_approval.mode: "cautious" is not an approval mode`, `soft_approval.spaces.patient_42: "reckless" is not an approval mode`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	e := newTestEnv(t, "soft_approval:\n  mode: sometimes\n")
	if _, _, err := runWith(t, nil, "serve", "--config", e.cfg); err == nil || !strings.Contains(err.Error(), "soft_approval.mode") {
		t.Fatalf("serve started with a bad mode: %v", err)
	}
}

// Seed 002: set_approval_mode "overrides the configured mode for that
// session from the next turn on".
func TestSoftApprovalConfiguredModeAndItsOverride(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "soft_approval:\n  mode: careful\n  spaces: {patient_42: yolo}\n")
	agent := e.CreateKey("ward_bot", "agent")
	e.Start()
	mode := func(user string) (string, string) {
		d := e.MustOK(agent, "get_approval_mode", map[string]any{"user_id": user}).Data
		return d["mode"].(string), d["source"].(string)
	}
	if m, src := mode("patient_7"); m != "protective" || src != "default" {
		t.Fatalf("deployment mode: %s (%s), want protective (default): careful is its synonym", m, src)
	}
	if m, src := mode("patient_42"); m != "off" || src != "configured for user_id" {
		t.Fatalf("per-space default: %s (%s), want off", m, src)
	}
	r := e.MustOK(agent, "set_approval_mode", map[string]any{"user_id": "patient_7", "mode": "normal"})
	if !strings.Contains(r.Text, "is now normal (was protective), from the next call on") {
		t.Fatalf("set: %s, want it to contain %q", r.Text, "is now normal (was protective), from the next call on")
	}
	if m, src := mode("patient_7"); m != "normal" || src != "set" {
		t.Fatalf("after set_approval_mode: %s (%s), want normal (set)", m, src)
	}
	if m, _ := mode("patient_8"); m != "protective" {
		t.Fatalf("another space changed: %s, want protective", m)
	}
}

// Seed 002: record_approval's detail is "Extra context such as the command
// or scope. It is logged, so it must not contain secrets." The audit entry
// is that log: it carries the action and the detail, bounded and escaped.
func TestRecordApprovalDetailIsInItsAuditEntry(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	admin := e.CreateKey("ops", "admin")
	agent := e.CreateKey("coder", "agent")
	e.Start()
	detail := "git push --force origin main\nscope: \u202eniam only" + strings.Repeat("x", 700)
	e.MustOK(agent, "record_approval", map[string]any{"action": "force-push main", "detail": detail, "turn": "t3", "message_id": "m9"})
	log := e.MustOK(admin, "audit_log", map[string]any{"limit": 5}).Text
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "consent_recorded") {
			line = l
		}
	}
	for _, want := range []string{`action="force-push main"`, `detail="git push --force origin main\nscope: \u202eniam only xxx`, "turn=t3 message=m9"} {
		want = strings.Replace(want, " xxx", "xxx", 1)
		if !strings.Contains(line, want) {
			t.Errorf("missing %q in the audit entry %q", want, line)
		}
	}
	if strings.Contains(line, "\u202e") || strings.Contains(line, strings.Repeat("x", 600)) || !strings.Contains(line, `…"`) {
		t.Errorf("the detail is not escaped and bounded: %q, want no U+202E, no run of 600 x and a closing %q", line, `…"`)
	}
}
