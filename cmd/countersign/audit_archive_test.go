package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// `audit archive` on a real server's store: the old entries move to a
// segment file, the store keeps a checkpoint, verify checks the live chain
// from it (and the anchors), the whole history given the archive, and the
// server starts again and appends after it.
func TestAuditArchiveThenVerify(t *testing.T) {
	t.Parallel()
	e, _ := anchoredEnv(t)
	rows, auditor := seedAudit(t, e, 3)
	out := filepath.Join(t.TempDir(), "audit-2026.jsonl")
	before := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	if _, err := e.runCmd("audit", "archive", "--config", e.cfg, "--before", "yesterday", "--out", out); err == nil || !strings.Contains(err.Error(), "--before: \"yesterday\" is not a date") {
		t.Fatalf("bad date: %v, want an error saying %q", err, "--before: \"yesterday\" is not a date")
	}
	if _, err := e.runCmd("audit", "archive", "--config", e.cfg, "--before", "2000-01-01", "--out", out); err == nil || !strings.Contains(err.Error(), "no live entry is older than that date") || fileExists(out) {
		t.Fatalf("nothing to archive: %v (file left: %v), want an error saying %q and no file", err, fileExists(out), "no live entry is older than that date")
	}
	got, err := e.runCmd("audit", "archive", "--config", e.cfg, "--before", before, "--out", out)
	want := fmt.Sprintf("Archived seq 1–%d (%d entries) to %s; the store keeps a signed checkpoint at seq %d.\n", rows-1, rows-1, out, rows-1)
	if err != nil || !strings.HasPrefix(got, want) {
		t.Fatalf("archive: %q %v, want %q", got, err, want)
	}
	if _, err := e.runCmd("audit", "archive", "--config", e.cfg, "--before", before, "--out", out); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("overwrite: %v, want an error saying %q", err, "never overwritten")
	}
	e.withBolt(func(tx *bbolt.Tx) error {
		if n := tx.Bucket([]byte("audit")).Stats().KeyN; n != 1 {
			t.Errorf("%d live rows, want the newest only", n)
		}
		return nil
	})

	live, err := e.runCmd("audit", "verify", "--config", e.cfg)
	if err != nil || !strings.HasPrefix(live, "✓ Audit chain INTACT — 1 entries verified.\n") || !strings.Contains(live, fmt.Sprintf("  checkpoint: seq 1–%d archived", rows-1)) {
		t.Fatalf("live chain: %q %v, want %q… with %q", live, err, "✓ Audit chain INTACT — 1 entries verified.\n", fmt.Sprintf("  checkpoint: seq 1–%d archived", rows-1))
	}
	whole, err := e.runCmd("audit", "verify", "--config", e.cfg, "--archive", out)
	if err != nil || !strings.HasPrefix(whole, fmt.Sprintf("✓ Audit chain INTACT — %d entries verified.\n", rows)) {
		t.Fatalf("with the archive: %q %v, want %q…", whole, err, fmt.Sprintf("✓ Audit chain INTACT — %d entries verified.\n", rows))
	}
	// An archived entry altered in the segment file.
	b, _ := os.ReadFile(out)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(strings.Replace(string(b), `\"bot1\"`, `\"bot9\"`, 1)), 0o600)
	if got, err := e.runCmd("audit", "verify", "--config", e.cfg, "--archive", bad); err == nil || !strings.Contains(got, "content tampered") {
		t.Fatalf("altered archive: %q %v, want an error and %q in the output", got, err, "content tampered")
	}

	// The server starts on the archived store (its anchors included) and
	// goes on; verify_audit reports the checkpoint.
	r := e.again()
	r.Start()
	v := r.MustOK(auditor, "verify_audit", nil)
	if !strings.HasPrefix(v.Text, "✓ Audit chain INTACT") || !strings.Contains(v.Text, fmt.Sprintf("checkpoint: seq 1–%d archived", rows-1)) {
		t.Fatalf("verify_audit: %q, want %q… with %q", v.Text, "✓ Audit chain INTACT", fmt.Sprintf("checkpoint: seq 1–%d archived", rows-1))
	}
	r.Stop()
	if got, err := e.runCmd("audit", "verify", "--config", e.cfg, "--archive", out); err != nil || !strings.HasPrefix(got, "✓ Audit chain INTACT") {
		t.Fatalf("after more entries: %q %v, want %q… and no error", got, err, "✓ Audit chain INTACT")
	}
}
