package config

import (
	"strings"
	"testing"
	"time"
)

// TestStepUpConfig: the step_up section is checked against the declared
// tools and categories, and refused unless the web console signs in
// through OIDC; unknown keys are refused; default off.
func TestStepUpConfig(t *testing.T) {
	t.Parallel()
	const tools = `tools:
  - {name: delete_database, category: destructive}
  - {name: read_logs, category: read-only}
`
	const oidc = `web:
  oidc: {issuer: "https://login.example.org", client_id: cs, client_secret_env: OIDC_SECRET}
`
	cfg, err := Parse([]byte(tools+oidc+"step_up: {tools: [delete_database], categories: [Mutating]}\n"), t.TempDir())
	if err != nil {
		t.Fatalf("a valid step_up: %v", err)
	}
	if s := cfg.StepUp.Spec(); s.Within != 5*time.Minute || s.Tools[0] != "delete_database" {
		t.Fatalf("step_up as wired: %+v (want the 5m default)", s)
	}
	if cfg, err := Parse([]byte(tools), t.TempDir()); err != nil || cfg.StepUp.On() {
		t.Fatalf("without step_up: on=%v, %v; want off, no error", cfg != nil && cfg.StepUp.On(), err)
	}
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown names", tools + oidc + "step_up: {tools: [drop_table, read_logs], categories: [dangerous, read-only], within: -1m}\n", []string{
			`step_up.tools[0]: "drop_table" is not a declared tool; name one under tools[].name`,
			`step_up.tools[1]: "read_logs" is read-only`,
			`step_up.categories[0]: "dangerous" is not a category`,
			`step_up.categories[1]: read-only calls are approved automatically`,
			"step_up.within: must be positive",
		}},
		{"without OIDC", tools + "step_up: {categories: [destructive]}\n", []string{"step_up: step-up is a fresh sign-in at your identity provider in the web console, so it needs web.enabled: true and web.oidc"}},
		{"with the console off", tools + "web: {enabled: false, oidc: {issuer: \"https://login.example.org\", client_id: cs, client_secret_env: S}}\nstep_up: {categories: [destructive]}\n", []string{"needs web.enabled: true and web.oidc"}},
		{"an unknown key", tools + oidc + "step_up: {categories: [destructive], windw: 5m}\n", []string{"step_up.windw"}},
	} {
		_, err := Parse([]byte(tt.yaml), t.TempDir())
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant %q", tt.name, err, w)
			}
		}
	}
}
