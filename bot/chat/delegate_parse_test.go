package chat

import (
	"testing"
	"time"
)

// TestParseDelegate: the delegate command's grammar, as the gate reads
// it; anything else is its usage, never a delegation.
func TestParseDelegate(t *testing.T) {
	for _, tt := range []struct {
		text string
		ok   bool
		want ChatCommand
	}{
		{"delegate", true, ChatCommand{Name: CmdDelegate}},
		{"/countersign delegate @bob until 18:00", true, ChatCommand{Name: CmdDelegate, Delegate: "@bob", Until: "until 18:00"}},
		{"delegate <@U0BOB|bob> UNTIL 2026-12-03 09:00", true, ChatCommand{Name: CmdDelegate, Delegate: "<@U0BOB|bob>", Until: "until 2026-12-03 09:00"}},
		{"delegate bob for 4h", true, ChatCommand{Name: CmdDelegate, Delegate: "bob", Until: "for 4h"}},
		{"delegate <@!1234> for 2d", true, ChatCommand{Name: CmdDelegate, Delegate: "<@!1234>", Until: "for 2d"}},
		{"delegate off", true, ChatCommand{Name: CmdDelegate, Until: "off"}},
		{"delegate OFF alice", true, ChatCommand{Name: CmdDelegate, Until: "off", Delegate: "alice"}},
		{"delegate bob", false, ChatCommand{}},
		{"delegate bob until teatime", false, ChatCommand{}},
		{"delegate bob for -4h", false, ChatCommand{}},
		{"delegate bob for 400d", false, ChatCommand{}},
		{"delegate off alice bob", false, ChatCommand{}},
		{"delegate bob until 18:00 and approve 12", false, ChatCommand{}},
		{"delegate <script> until 18:00", false, ChatCommand{}},
	} {
		v := Scope(tt.text)
		if tt.ok && (v.Kind != ScopeCommand || v.Command != tt.want) {
			t.Errorf("Scope(%q) = %s %+v, want the command %+v", tt.text, v.Kind, v.Command, tt.want)
		}
		if !tt.ok && v.Kind == ScopeCommand {
			t.Errorf("Scope(%q) = a command %+v, want none (its usage)", tt.text, v.Command)
		}
	}
}

// TestDelegationEnd: a window as typed, at a fixed now (UTC).
func TestDelegationEnd(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		phrase string
		want   time.Time
	}{
		{"until 18:00", time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)},
		{"until 09:00", time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)},
		{"until 14:30", time.Date(2026, 12, 3, 14, 30, 0, 0, time.UTC)},
		{"until 2026-12-04 08:15", time.Date(2026, 12, 4, 8, 15, 0, 0, time.UTC)},
		{"until 2026-12-04t08:15:00+01:00", time.Date(2026, 12, 4, 7, 15, 0, 0, time.UTC)},
		{"for 90m", now.Add(90 * time.Minute)},
		{"for 2d", now.Add(48 * time.Hour)},
	} {
		got, err := delegationEnd(tt.phrase, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("delegationEnd(%q) = %v, %v; want %v", tt.phrase, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "until", "for", "until 25:00", "for 0h", "for 99999999999d", "soon"} {
		if _, err := delegationEnd(bad, now); err == nil {
			t.Errorf("delegationEnd(%q) accepted, want an error", bad)
		}
	}
}

// FuzzDelegationEnd: any phrase gives a time or an error, never a panic,
// and a time a "for" phrase gives is after now.
func FuzzDelegationEnd(f *testing.F) {
	for _, s := range []string{"until 18:00", "for 4h", "for 2d", "until 2026-12-03 09:00", "until 2026-12-03T09:00:00Z"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 14, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, phrase string) {
		got, err := delegationEnd(phrase, now)
		if err == nil && len(phrase) > 4 && phrase[:4] == "for " && !got.After(now) {
			t.Fatalf("delegationEnd(%q) = %v, want a time after now (%v)", phrase, got, now)
		}
	})
}
