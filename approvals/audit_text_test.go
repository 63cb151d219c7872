package approvals

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportWriteText: what `audit verify` prints, line by line, for an
// intact chain with a checkpoint, anchors and a rotation, and for a broken
// one (nothing but the break).
func TestReportWriteText(t *testing.T) {
	t.Parallel()
	rep := Report{Intact: true, Entries: 12, Head: Checkpoint{Seq: 40, Hash: "h40"}, Checkpoint: 28,
		Anchors: 2, NewestAnchor: Anchor{Seq: 39, Time: "2026-12-01T09:00:00Z"},
		Keys: []KeySpan{{From: 1, To: 30, PublicKey: "k1"}, {From: 31, To: 40, PublicKey: "k2"}}}
	var b bytes.Buffer
	rep.WriteText(&b, 1, "  anchors: a note\n")
	want := []string{
		"✓ Audit chain INTACT — 12 entries verified.",
		"  head: seq 40 hash h40",
		"  archives: 1 segment(s), seq 1–28, joined to the store's checkpoint",
		"  anchors: 2 checked, the newest at seq 39 (2026-12-01T09:00:00Z)",
		"  anchors: a note",
		"  key: seq 1–30 k1",
		"  key: seq 31–40 k2",
	}
	if got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("intact report printed:\n%s\nwant:\n%s", b.String(), strings.Join(want, "\n"))
	}
	b.Reset()
	Report{BrokenAt: 7, Reason: "hash mismatch", Entries: 6}.WriteText(&b, 0, "  anchors: a note\n")
	if got, want := b.String(), "⚠ Audit chain BROKEN at seq 7: hash mismatch.\n"; got != want {
		t.Errorf("broken report printed %q, want %q", got, want)
	}
}
