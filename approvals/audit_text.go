package approvals

import (
	"fmt"
	"io"
)

// WriteText writes the report as `countersign audit verify` prints it:
// BROKEN at the first break and why; or INTACT with the entries verified,
// the head, the archive segments joined (archives: how many were given)
// or the checkpoint verified from, the anchors checked, then note (a
// line about the anchors, when there is one) and, after a rotation, the
// span of each key.
func (r Report) WriteText(w io.Writer, archives int, note string) {
	if !r.Intact {
		fmt.Fprintf(w, "⚠ Audit chain BROKEN at seq %d: %s.\n", r.BrokenAt, r.Reason)
		return
	}
	fmt.Fprintf(w, "✓ Audit chain INTACT — %d entries verified.\n", r.Entries)
	if r.Head.Seq > 0 {
		fmt.Fprintf(w, "  head: seq %d hash %s\n", r.Head.Seq, r.Head.Hash)
	}
	switch {
	case r.Checkpoint > 0 && archives > 0:
		fmt.Fprintf(w, "  archives: %d segment(s), seq 1–%d, joined to the store's checkpoint\n", archives, r.Checkpoint)
	case r.Checkpoint > 0:
		fmt.Fprintf(w, "  checkpoint: seq 1–%d archived; verified from there (pass --archive FILE... for the whole history)\n", r.Checkpoint)
	}
	if r.Anchors > 0 {
		fmt.Fprintf(w, "  anchors: %d checked, the newest at seq %d (%s)\n", r.Anchors, r.NewestAnchor.Seq, r.NewestAnchor.Time)
	}
	fmt.Fprint(w, note)
	if len(r.Keys) > 1 {
		for _, k := range r.Keys {
			fmt.Fprintf(w, "  key: seq %d–%d %s\n", k.From, k.To, k.PublicKey)
		}
	}
}
