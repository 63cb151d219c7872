package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/bot/bottest"
	"github.com/countersign/countersign/policy"
)

// TestOnCallNote: the escalation's note names the rotation and the person
// on call at the time asked, and reads back into the Note every surface
// renders; words that would break the note are left out.
func TestOnCallNote(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	b, err := New(Options{Store: bottest.OpenStore(t), SigningKey: bottest.SigningKey(),
		OnCall: map[string]policy.Rotation{"ops": {People: []string{"alice", "bob"}, Start: start, Length: 24 * time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   time.Time
		want string
	}{
		{start.Add(-time.Minute), ""},
		{start, "alice"},
		{start.Add(25 * time.Hour), "bob"},
		{start.Add(48 * time.Hour), "alice"},
	} {
		if got := b.OnCallNow("OPS", tt.at); got != tt.want {
			t.Errorf("OnCallNow(ops, start%+v) = %q, want %q", tt.at.Sub(start), got, tt.want)
		}
	}
	if got := b.OnCallNow("nope", start); got != "" {
		t.Errorf("an unknown rotation: %q, want nobody", got)
	}
	for _, tt := range []struct {
		note, line string
	}{
		{EscalationNote("ops", "admin") + " " + OnCallNote("ops", "bob"), "Escalated to the ops on-call, bob."},
		{OnCallNote("ops", ""), "Nobody is on call in ops now."},
		{OnCallNote("ops", "bob smith"), "Nobody is on call in ops now."},
		{OnCallNote("o=ps", "bob") + " text", ""},
	} {
		_, _, rest := parseEscalation(tt.note)
		rot, person, rest := parseOnCall(rest)
		n := Note{OnCall: rot, Person: person}
		if got := n.OnCallLine(); got != tt.line {
			t.Errorf("%q: OnCallLine = %q, want %q", tt.note, got, tt.line)
		}
		if strings.Contains(strings.Join(rest, " "), "=") {
			t.Errorf("%q: routing words left in the text: %q", tt.note, rest)
		}
	}
}

// TestNameOfADelegatesVote: a vote cast under a delegation shows on a
// card as "bob for alice", its id folded away like any voter's.
func TestNameOfADelegatesVote(t *testing.T) {
	for in, want := range map[string]string{
		"bob [U0BOB] for alice": "bob for alice",
		"bob [U0BOB]":           "bob",
		"bob":                   "bob",
		"countersign [sweeper]": "countersign",
	} {
		if got := NameOf(in); got != want {
			t.Errorf("NameOf(%q) = %q, want %q", in, got, want)
		}
	}
}
