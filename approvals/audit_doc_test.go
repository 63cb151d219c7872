package approvals

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/kv"
)

// The standalone verifier printed in docs/audit.md verifies a real export,
// including details that exercise every escaping rule, and rejects a
// tampered one: the documentation is the procedure, not a sketch of it.
func TestDocumentedVerifierRuns(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/audit.md has no Go snippet")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go toolchain on PATH: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "verify.go")
	if err := os.WriteFile(src, m[1], 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "verify")
	if out, err := exec.Command(goBin, "build", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("the snippet does not build: %v\n%s", err, out)
	}

	db := openStore(t)
	key := testKey(3)
	details := []string{"plain", "a<b>&c \"q\" \\", "line\nbreak\ttab\x01\x7f", "é 中 \u2028\u2029 🙂"}
	err = db.Update(context.Background(), func(tx kv.Tx) error {
		for i, d := range details {
			if _, err := Append(tx, key, t0, Entry{Principal: "dr_smith [U0123ABC]", UserID: "patient_42", Action: "remember", Detail: d, AgentID: strings.Repeat("x", i)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if _, err := Export(context.Background(), db, &export); err != nil {
		t.Fatal(err)
	}
	pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	run := func(input []byte) (string, error) {
		cmd := exec.Command(bin, pub)
		cmd.Stdin = bytes.NewReader(input)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(export.Bytes()); err != nil || !strings.HasPrefix(out, "OK: 4 entries verified; head seq 4 hash ") {
		t.Fatalf("intact export: %v %s, want no error and output starting %q", err, out, "OK: 4 entries verified; head seq 4 hash ")
	}
	tampered := bytes.Replace(export.Bytes(), []byte("plain"), []byte("plaim"), 1)
	if out, err := run(tampered); err == nil || out != "BROKEN at seq 1: content tampered\n" {
		t.Fatalf("tampered export: %v %q, want an error and %q", err, out, "BROKEN at seq 1: content tampered\n")
	}
	lines := bytes.SplitAfter(export.Bytes(), []byte("\n"))
	reordered := bytes.Join([][]byte{lines[0], lines[2], lines[1], lines[3]}, nil)
	if out, err := run(reordered); err == nil || out != "BROKEN at seq 3: chain link mismatch\n" {
		t.Fatalf("reordered export: %v %q, want an error and %q", err, out, "BROKEN at seq 3: chain link mismatch\n")
	}

	// An archive segment verifies on its own, and so does the export of
	// the live chain that goes on from its checkpoint.
	var seg syncBuf
	if _, err := Archive(context.Background(), db, key, VerifyOptions{Trusted: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}, t0.Add(time.Second), t0, &seg); err != nil {
		t.Fatal(err)
	}
	if out, err := run(seg.Bytes()); err != nil || !strings.HasPrefix(out, "OK: 3 entries verified; head seq 3 hash ") {
		t.Fatalf("archive segment: %v %s, want no error and output starting %q", err, out, "OK: 3 entries verified; head seq 3 hash ")
	}
	if out, err := run(bytes.Replace(seg.Bytes(), []byte("plain"), []byte("plaim"), 1)); err == nil || out != "BROKEN at seq 1: content tampered\n" {
		t.Fatalf("tampered segment: %v %q, want an error and %q", err, out, "BROKEN at seq 1: content tampered\n")
	}
	export.Reset()
	if _, err := Export(context.Background(), db, &export); err != nil {
		t.Fatal(err)
	}
	if out, err := run(export.Bytes()); err != nil || !strings.HasPrefix(out, "OK: 1 entries verified; head seq 4 hash ") {
		t.Fatalf("export from a checkpoint: %v %s, want no error and output starting %q", err, out, "OK: 1 entries verified; head seq 4 hash ")
	}
}
