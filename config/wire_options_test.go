package config

import (
	"strings"
	"testing"
	"time"
)

// TestWireOptions: the action tools' options carry the sections they are
// made of (tools, approvals, retention, limits, the slot resolution of
// context subjects); the SCIM token is read from its variable, refused
// missing or short.
func TestWireOptions(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`approvals:
  remind_after: 10m
tools:
  - name: restart_service
    category: mutating
retention:
  action_requests: 720h
memory:
  slots:
    - {name: active_medication, category: active_medication, aliases: [meds]}
principals:
  - {name: dr_lee, role: member, web: lee@ward7.example, scopes: [patient_42]}
  - {name: ops, role: admin, slack: T1/U1}
scim:
  token_env: SCIM_TOKEN
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.ActionOptions()
	if len(o.Tools) != 1 || o.Tools[0].Name != "restart_service" || o.RemindAfter != 10*time.Minute || o.Retention.Actions != 720*time.Hour || o.MaxArgumentsBytes != cfg.Limits.MaxArgumentsBytes {
		t.Errorf("action options: tools %v, remind_after %v, retention %v, max arguments %d; want restart_service only, 10m, 720h, %d", o.Tools, o.RemindAfter, o.Retention.Actions, o.MaxArgumentsBytes, cfg.Limits.MaxArgumentsBytes)
	}
	if got := o.Subject("meds"); got != "active_medication" {
		t.Errorf("a context subject's alias resolves to %q, want the slot active_medication", got)
	}
	for _, c := range []struct{ token, want string }{
		{"", "scim.token_env: the environment variable SCIM_TOKEN is not set"},
		{"short", "is 5 characters; use at least 32"},
		{strings.Repeat("k", 32), ""},
	} {
		got, err := cfg.SCIM.Token(func(k string) string { return map[string]string{"SCIM_TOKEN": c.token}[k] })
		if c.want == "" && (err != nil || got.Reveal() != c.token) || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("SCIM token %q: %q %v, want %q", c.token, got.Reveal(), err, c.want)
		}
	}
}
