package config

import (
	"strings"
	"testing"
	"time"
)

// TestPolicyConfig: groups:, tools[].rules and stages are read as
// declared and wired into the tool's spec; a rule that does not compile
// or type-check stops start with the rule's key and CEL's position; a
// group nobody declared, a stage without a name, step-up without the
// console's OIDC are refused, every problem at once.
func TestPolicyConfig(t *testing.T) {
	t.Parallel()
	const good = `groups:
  pharmacists: [ph_lee]
  doctors: []
web:
  oidc: {issuer: "https://login.example.org", client_id: cs, client_secret_env: OIDC_SECRET}
tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {groups: [doctors]}}
          - {name: pharmacist, approvers: {groups: [pharmacists]}, step_up: true}
      - when: "args.dose_mg < 1"
        category: read-only
`
	cfg, err := Parse([]byte(good), t.TempDir())
	if err != nil {
		t.Fatalf("a valid policy: %v", err)
	}
	if got := cfg.Groups["pharmacists"]; len(got) != 1 || got[0] != "ph_lee" {
		t.Fatalf("groups.pharmacists = %v, want [ph_lee]", got)
	}
	spec := cfg.Tools[0]
	if len(spec.Rules) != 2 || len(spec.Rules[0].Stages) != 2 || !spec.Rules[0].Stages[1].StepUp || spec.Rules[1].Category != "read-only" {
		t.Fatalf("rules as read: %+v; want 2 rules, the first of 2 stages with step-up on the second, the second of category read-only", spec.Rules)
	}

	const bad = `groups:
  pharmacists: [ph_lee, ""]
tools:
  - name: order_medication
    schema: {type: object, properties: {dose_mg: {type: number}}}
    approvers: {groups: [nurses]}
    rules:
      - when: "args.dose > 10"
      - when: "args.dose_mg"
      - when: "args.dose_mg > 1"
        category: dangerous
        stages:
          - {approvers: {groups: [pharmacist]}, step_up: true}
`
	_, err = Parse([]byte(bad), t.TempDir())
	if err == nil {
		t.Fatal("a bad policy was accepted")
	}
	for _, want := range []string{
		"groups.pharmacists[1]: empty",
		`tools[0].approvers.groups[0]: group "nurses" is not declared under groups:`,
		"tools[0].rules[0].when: at line 1, column 5: undefined field 'dose'",
		"tools[0].rules[1].when: is of type double, not bool",
		`tools[0].rules[2].category: "dangerous" is not a category`,
		"tools[0].rules[2].stages[0].name: required",
		`tools[0].rules[2].stages[0].approvers.groups[0]: group "pharmacist" is not declared`,
		"tools: a rule or stage sets step_up",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestBudgetConfig: a grant budget is read and wired; one that names a
// non-numeric argument, a window without uses, a sum without a cap, or a
// budget on a tool without grants is refused.
func TestBudgetConfig(t *testing.T) {
	t.Parallel()
	const good = `tools:
  - name: refund
    schema: {type: object, properties: {amount: {type: number}, customer: {type: string}}}
    grants:
      max: 8h
      allow: [duration]
      budget: {uses: 5, per: 1h, sum: {argument: amount, max: 500, per: 24h}, within: {argument: amount, percent: 10}}
`
	cfg, err := Parse([]byte(good), t.TempDir())
	if err != nil {
		t.Fatalf("a valid budget: %v", err)
	}
	if b := cfg.Tools[0].Spec().Grants.Budget; b.Uses != 5 || b.SumArgument != "amount" || b.SumMax != 500 || b.WithinPercent != 10 {
		t.Fatalf("budget as wired: %+v; want 5 uses, sum of amount up to 500, within 10%%", b)
	}
	const bad = `tools:
  - name: refund
    schema: {type: object, properties: {amount: {type: number}, customer: {type: string}}}
    grants:
      max: 8h
      allow: [duration]
      budget: {per: 1h, sum: {argument: customer}, within: {argument: amount, percent: 120}}
  - name: other
    grants: {budget: {uses: 1}}
`
	_, err = Parse([]byte(bad), t.TempDir())
	for _, want := range []string{
		"tools[0].grants.budget.per: set uses too",
		`tools[0].grants.budget.sum.argument: "customer" is not a number or integer property of refund's schema`,
		"tools[0].grants.budget.sum.max: required",
		"tools[0].grants.budget.within.percent: between 0 and 100",
		"tools[1].grants.budget: a budget bounds standing grants, and other allows none",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestOnCallConfig: oncall: rotations are read, wired as the bot's
// rotations and accepted as approver groups; one without people, start
// or length, or named like a group, is refused.
func TestOnCallConfig(t *testing.T) {
	t.Parallel()
	const good = `oncall:
  ops: {people: [alice, bob], start: "2026-12-01T09:00:00Z", length: 24h}
tools:
  - {name: restart_service, approvers: {groups: [ops]}}
`
	cfg, err := Parse([]byte(good), t.TempDir())
	if err != nil {
		t.Fatalf("a valid rotation: %v", err)
	}
	if r := cfg.Rotations()["ops"]; len(r.People) != 2 || r.Length != 24*time.Hour || r.Start.Hour() != 9 {
		t.Fatalf("the rotation as wired: %+v; want 2 people, 24h shifts starting at 9", r)
	}
	const bad = `groups: {ops: [carol]}
oncall:
  ops: {people: [alice], start: "2026-12-01T09:00:00Z", length: 24h}
  night: {start: "tomorrow"}
`
	_, err = Parse([]byte(bad), t.TempDir())
	for _, want := range []string{
		`oncall.ops: "ops" is also a group`,
		"oncall.night.people: required",
		`oncall.night.start: "tomorrow" is not a time`,
		"oncall.night.length: required",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// TestDirectoryGroupConfig: with scim: on, an approvers list may name a
// group config.yaml does not declare (the directory provides it, read at
// each decision); without scim: the same config stops start naming the
// group; an empty group name is refused either way.
func TestDirectoryGroupConfig(t *testing.T) {
	t.Parallel()
	const tools = `tools:
  - name: order_medication
    category: mutating
    stages:
      - {name: prescriber, approvers: {roles: [member]}}
      - {name: pharmacist, approvers: {groups: [pharmacists]}}
break_glass:
  tools: [order_medication]
  review: {approvers: {groups: [pharmacy_leads]}}
web:
  oidc: {issuer: "https://login.example.org", client_id: cs, client_secret_env: OIDC_SECRET}
`
	if _, err := Parse([]byte(tools+"scim: {token_env: COUNTERSIGN_SCIM_TOKEN}\n"), t.TempDir()); err != nil {
		t.Fatalf("groups only the directory provides, with scim: on: %v", err)
	}
	_, err := Parse([]byte(tools), t.TempDir())
	for _, want := range []string{
		`tools[0].stages[1].approvers.groups[0]: group "pharmacists" is not declared under groups:`,
		`break_glass.review.approvers.groups[0]: group "pharmacy_leads" is not declared under groups:`,
		"or configure scim: so the directory provides it",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without scim: missing %q in: %v", want, err)
		}
	}
	_, err = Parse([]byte(`tools:
  - name: order_medication
    category: mutating
    approvers: {groups: [" "]}
scim: {token_env: COUNTERSIGN_SCIM_TOKEN}
`), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "tools[0].approvers.groups[0]: an empty group name") {
		t.Errorf("an empty group name with scim: on: %v, want an error saying %q", err, "tools[0].approvers.groups[0]: an empty group name")
	}
}
