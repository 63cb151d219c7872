package chat

import (
	"testing"

	"github.com/countersign/countersign/bot"
)

// TestGrantCommandsParse: `grants` and `revoke-grant <n>` are commands;
// anything else about them gets their usage, never a revocation.
func TestGrantCommandsParse(t *testing.T) {
	tests := []struct {
		text string
		kind ScopeKind
		name string
		id   uint64
	}{
		{"grants", ScopeCommand, CmdGrants, 0},
		{"/countersign grants", ScopeCommand, CmdGrants, 0},
		{"revoke-grant 4", ScopeCommand, CmdRevokeGrant, 4},
		{"revoke-grant #4", ScopeCommand, CmdRevokeGrant, 4},
		{"grants please", ScopeUsage, CmdGrants, 0},
		{"revoke-grant", ScopeUsage, CmdRevokeGrant, 0},
		{"revoke-grant four", ScopeUsage, CmdRevokeGrant, 0},
		{"revoke-grant 4 5", ScopeUsage, CmdRevokeGrant, 4},
	}
	for _, tt := range tests {
		v := Scope(tt.text)
		if v.Kind != tt.kind || v.Command.Name != tt.name || v.Command.ID != tt.id {
			t.Errorf("Scope(%q) = %s %q #%d, want %s %q #%d", tt.text, v.Kind, v.Command.Name, v.Command.ID, tt.kind, tt.name, tt.id)
		}
	}
	if u := usage(ChatCommand{Name: CmdRevokeGrant}); u == usage(ChatCommand{}) {
		t.Errorf("revoke-grant has no usage of its own: %q", u)
	}
}

func TestGrantMadeAndIDs(t *testing.T) {
	made := bot.Result{Text: "✅ approved. You also made grant #2: session calls…", Grants: []bot.GrantView{{ID: 2, Says: "grant #2: session calls\n…"}}}
	if got, want := grantMade(made), "Approved. You made grant #2: session calls …"; got != want {
		t.Errorf("grantMade = %q, want %q (the grant's own sentence, on one line)", got, want)
	}
	if got := grantMade(bot.Result{Text: "✅ approved. You also made grant #2"}); got != "" {
		t.Errorf("grantMade without a typed grant = %q, want \"\" (the text is not read)", got)
	}
	res := bot.Result{Grants: []bot.GrantView{{ID: 7}, {ID: 3}}}
	if ids := grantIDs(res); len(ids) != 2 || ids[0] != 7 || ids[1] != 3 {
		t.Errorf("grantIDs = %v, want [7 3]", ids)
	}
}
