package config

import (
	"slices"
	"strings"
	"testing"
)

// TestConfigContext: tools[].context names the memory subjects a tool's
// approvals rest on; an empty or repeated subject, or too many, stop
// start-up with the key named.
func TestConfigContext(t *testing.T) {
	t.Parallel()
	bad := `
tools:
  - name: order_medication
    category: mutating
    context: [allergy, "", Allergy]
  - name: t
    context: [a, b, c, d, e, f, g, h, i]
`
	_, err := Parse([]byte(bad), t.TempDir())
	if err == nil {
		t.Fatal("a config with a bad context loaded")
	}
	for _, want := range []string{
		"tools[0].context[1]: empty",
		`tools[0].context[2]: "Allergy" is listed twice`,
		"tools[1].context: 9 subjects; at most 8",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing problem %q in:\n%v", want, err)
		}
	}
	cfg, err := Parse([]byte("tools:\n  - name: order_medication\n    category: mutating\n    context: [allergy, active_medication]\n"), t.TempDir())
	if err != nil {
		t.Fatalf("a valid context: %v", err)
	}
	if !slices.Equal(cfg.Tools[0].Context, []string{"allergy", "active_medication"}) {
		t.Fatalf("decoded context = %v, want [allergy active_medication]", cfg.Tools[0].Context)
	}
}
