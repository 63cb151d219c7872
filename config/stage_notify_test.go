package config

import (
	"strings"
	"testing"
)

// TestStageNotifyConfig: tools[].rules[].stages[].notify is read into the
// tool's stage; a name that is not a configured principal, one named
// twice, and a person no direct message can reach are refused, each with
// its key.
func TestStageNotifyConfig(t *testing.T) {
	t.Parallel()
	const head = `groups:
  pharmacists: [ph_kim]
principals:
  - {name: ph_kim, role: member, slack: U0456DEF}
  - {name: ph_web, role: member, web: web@example.org}
tools:
  - name: order_medication
    category: mutating
    schema: {type: object, properties: {dose_mg: {type: number}}}
    rules:
      - when: "args.dose_mg > 10"
        stages:
          - {name: prescriber, approvers: {roles: [member]}}
`
	cfg, err := Parse([]byte(head+"          - {name: pharmacist, approvers: {groups: [pharmacists]}, notify: [ph_kim]}\n"), t.TempDir())
	if err != nil {
		t.Fatalf("a valid notify: %v", err)
	}
	if got := cfg.Tools[0].Rules[0].Stages[1].Notify; len(got) != 1 || got[0] != "ph_kim" {
		t.Errorf("stages[1].notify = %v, want [ph_kim]", got)
	}
	_, err = Parse([]byte(head+"          - {name: pharmacist, approvers: {groups: [pharmacists]}, notify: [ph_kim, PH_KIM, nobody, ph_web, \"\"]}\n"), t.TempDir())
	if err == nil {
		t.Fatal("a bad notify was accepted")
	}
	for _, want := range []string{
		`stages[1].notify[1]: "PH_KIM" is named twice`,
		`stages[1].notify[2]: "nobody" is not a person configured under principals`,
		`stages[1].notify[3]: "ph_web" has no slack, discord, teams or email`,
		`stages[1].notify[4]: empty`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}
