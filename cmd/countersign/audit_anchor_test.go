package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/config"
	bbolt "go.etcd.io/bbolt"
)

// boltEnv is newTestEnv on a bbolt file whatever COUNTERSIGN_TEST_STORE
// says: these tests attack the bbolt file itself (its old pages, its
// buckets, its truncation).
func boltEnv(t *testing.T, config string) *testEnv {
	t.Helper()
	dir := t.TempDir()
	full := "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(dir, "countersign.db") + "\n" + config
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: path, env: map[string]string{}}
	t.Cleanup(e.Stop)
	return e
}

// anchoredEnv is a bbolt test environment whose config anchors the audit
// chain to a file in a directory of its own, as docs/audit.md recommends.
func anchoredEnv(t *testing.T) (*testEnv, string) {
	t.Helper()
	dir := t.TempDir()
	anchors := filepath.Join(dir, "anchors", "audit.anchors")
	return boltEnv(t, "audit:\n  anchor:\n    file: "+anchors+"\n"), anchors
}

// plainConfig writes a second config for e's store and key with no anchor
// file: what verification sees without anchors.
func plainConfig(t *testing.T, e *testEnv) string {
	t.Helper()
	p := filepath.Join(e.dir, "plain.yaml")
	if err := os.WriteFile(p, []byte("store:\n  path: "+filepath.Join(e.dir, "countersign.db")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveOnce runs serve on e's config and returns its error; a server that
// starts is stopped at once (the tests expect a refusal).
func (e *testEnv) serveOnce(flags ...string) error {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"serve", "--config", e.cfg}, flags...), e.getenv, strings.NewReader(""), io.Discard, pw)
		pw.Close()
		done <- err
	}()
	buf := make([]byte, 64<<10)
	var logs bytes.Buffer
	for {
		n, err := pr.Read(buf)
		logs.Write(buf[:n])
		if strings.Contains(logs.String(), "msg=listening") {
			cancel()
			go io.Copy(io.Discard, pr)
			<-done
			return nil
		}
		if err != nil {
			return <-done
		}
	}
}

func readAnchorFile(t *testing.T, path string) []approvals.Anchor {
	t.Helper()
	as, err := approvals.ReadAnchors(path)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// firstBeyond is the anchor a rollback to seq must be reported against:
// the lowest anchored seq above it.
func firstBeyond(t *testing.T, anchors []approvals.Anchor, seq uint64) approvals.Anchor {
	t.Helper()
	var best approvals.Anchor
	for _, a := range anchors {
		if a.Seq > seq && (best.Seq == 0 || a.Seq < best.Seq) {
			best = a
		}
	}
	if best.Seq == 0 {
		t.Fatalf("no anchor beyond seq %d in %+v, want one", seq, anchors)
	}
	return best
}

func headSeq(t *testing.T, e *testEnv) (seq uint64, raw []byte) {
	t.Helper()
	e.withBolt(func(tx *bbolt.Tx) error {
		raw = append([]byte(nil), tx.Bucket([]byte("audit_head")).Get([]byte("head"))...)
		var h approvals.Checkpoint
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		seq = h.Seq
		return nil
	})
	return seq, raw
}

// The attack of issue 9: bbolt keeps older pages, so an older validly
// signed head is at hand. Delete the newest entries, write the old head
// back and reset the bucket sequence: the chain is consistent with itself
// (verification without anchors says INTACT), but not with its anchors,
// and the server refuses to append to it.
func TestAuditRollbackToAnOldSignedHeadIsDetected(t *testing.T) {
	t.Parallel()
	e, anchorPath := anchoredEnv(t)
	key := e.CreateKey("ops", "admin")
	e.Start()
	e.MustOK(key, "create_principal", map[string]any{"name": "bot0"})
	e.Stop()
	oldSeq, oldHead := headSeq(t, e)

	e = e.again()
	e.Start()
	for i := 1; i <= 4; i++ {
		e.MustOK(key, "create_principal", map[string]any{"name": fmt.Sprintf("bot%d", i)})
	}
	e.Stop() // anchors the newest head at the clean stop
	newSeq, _ := headSeq(t, e)
	anchors := readAnchorFile(t, anchorPath)
	if newest, _ := approvals.Newest(anchors); newest.Seq != newSeq {
		t.Fatalf("the newest anchor is %+v, want seq %d", newest, newSeq)
	}
	pub, err := e.runCmd("audit", "pubkey", "--config", e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	pub = strings.TrimSpace(pub)

	// The attack, on the store file.
	e.withBolt(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		for s := oldSeq + 1; s <= newSeq; s++ {
			if err := b.Delete(seqKey(s)); err != nil {
				return err
			}
		}
		if err := b.SetSequence(oldSeq); err != nil {
			return err
		}
		return tx.Bucket([]byte("audit_head")).Put([]byte("head"), oldHead)
	})

	// Without anchors the rolled-back chain is consistent with itself: the
	// attack is faithful, and only the anchors can tell.
	if out, err := e.runCmd("audit", "verify", "--config", plainConfig(t, e), "--pubkey", pub); err != nil || !strings.HasPrefix(out, "✓ Audit chain INTACT") {
		t.Fatalf("without anchors: %q %v, want %q… and no error", out, err, "✓ Audit chain INTACT")
	}
	want := fmt.Sprintf("⚠ Audit chain BROKEN at seq %d: rolled back: the chain ends at seq %d, before the head anchored at %s.\n",
		oldSeq+1, oldSeq, firstBeyond(t, anchors, oldSeq))
	for _, args := range [][]string{
		{"audit", "verify", "--config", e.cfg, "--pubkey", pub},
		{"audit", "verify", "--config", plainConfig(t, e), "--anchors", anchorPath},
	} {
		out, err := e.runCmd(args...)
		if out != want || err == nil {
			t.Fatalf("%v:\n got %q (%v)\nwant %q", args, out, err, want)
		}
	}
	// The server does not go on appending to it.
	if err := e.again().serveOnce(); err == nil || !strings.Contains(err.Error(), "rolled back, truncated or replaced") {
		t.Fatalf("serve on a rolled-back store: %v, want an error saying %q", err, "rolled back, truncated or replaced")
	}
	if got, _ := headSeq(t, e); got != oldSeq {
		t.Fatalf("the refused server moved the head to %d, want %d", got, oldSeq)
	}
}

// Wiping the audit and audit_head buckets leaves the principals behind:
// an empty chain next to state is broken, with or without anchors, and
// the server does not start a new chain over it.
func TestAuditWipedChainIsBroken(t *testing.T) {
	t.Parallel()
	e, anchorPath := anchoredEnv(t)
	seedAudit(t, e, 2)
	e.withBolt(func(tx *bbolt.Tx) error {
		for _, b := range []string{"audit", "audit_head"} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	plain := plainConfig(t, e)
	if out, err := e.runCmd("audit", "verify", "--config", plain); err == nil || out != "⚠ Audit chain BROKEN at seq 1: "+approvals.ReasonEmptied+".\n" {
		t.Fatalf("without anchors: %q %v, want %q and an error", out, err, "⚠ Audit chain BROKEN at seq 1: "+approvals.ReasonEmptied+".\n")
	}
	want := fmt.Sprintf("⚠ Audit chain BROKEN at seq 1: rolled back: the chain ends at seq 0, before the head anchored at %s.\n", firstBeyond(t, readAnchorFile(t, anchorPath), 0))
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg); err == nil || out != want {
		t.Fatalf("with anchors: %q %v, want %q", out, err, want)
	}
	if err := e.again().serveOnce(); err == nil || !strings.Contains(err.Error(), "rolled back, truncated or replaced") {
		t.Fatalf("serve with anchors: %v, want an error saying %q", err, "rolled back, truncated or replaced")
	}
	// Without anchors too, serve refuses to start a fresh chain over it.
	noAnchors := e.again()
	noAnchors.cfg = plain
	if err := noAnchors.serveOnce(); err == nil || !strings.Contains(err.Error(), "the chain was emptied") {
		t.Fatalf("serve without anchors: %v, want an error saying %q", err, "the chain was emptied")
	}
}

// A store file truncated to nothing is a new, empty store to bbolt. Next
// to its anchors, serve refuses it, and verify reports it broken.
func TestServeOnAnEmptyStoreNextToItsAnchorsRefuses(t *testing.T) {
	t.Parallel()
	e, anchorPath := anchoredEnv(t)
	seedAudit(t, e, 2)
	if err := os.Truncate(filepath.Join(e.dir, "countersign.db"), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.again().serveOnce(); err == nil || !strings.Contains(err.Error(), "the audit chain ends at seq 0, before the head anchored at line") {
		t.Fatalf("serve on a truncated store: %v, want an error saying %q", err, "the audit chain ends at seq 0, before the head anchored at line")
	}
	want := fmt.Sprintf("⚠ Audit chain BROKEN at seq 1: rolled back: the chain ends at seq 0, before the head anchored at %s.\n", firstBeyond(t, readAnchorFile(t, anchorPath), 0))
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg); err == nil || out != want {
		t.Fatalf("verify: %q %v, want %q", out, err, want)
	}
}

// An attacker with the store file re-signs the whole chain with a key of
// their own (rows, head, genesis record, key index) and puts that key in
// the key file. The chain verifies with the swapped key alone; it fails
// against the anchors and against the original key pinned with --pubkey.
func TestAuditChainResignedWithASwappedKeyIsDetected(t *testing.T) {
	t.Parallel()
	e, anchorPath := anchoredEnv(t)
	seedAudit(t, e, 3)
	origPub, err := e.runCmd("audit", "pubkey", "--config", e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	forged := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x66}, ed25519.SeedSize))
	forgedPub := hex.EncodeToString(forged.Public().(ed25519.PublicKey))
	sign := func(msg string) string { return hex.EncodeToString(ed25519.Sign(forged, []byte(msg))) }
	e.withBolt(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		err := b.ForEach(func(k, v []byte) error {
			en, err := approvals.DecodeRow(k, v)
			if err != nil {
				return err
			}
			if en.Sig == "" { // rows carry no signature: the head covers them
				return nil
			}
			en.Sig = sign("countersign.audit.v1|" + en.Hash)
			nv, _ := json.Marshal(en)
			return b.Put(k, nv)
		})
		if err != nil {
			return err
		}
		hb := tx.Bucket([]byte("audit_head"))
		var h approvals.Checkpoint
		_ = json.Unmarshal(hb.Get([]byte("head")), &h)
		h.Sig = sign(fmt.Sprintf("countersign.audit.head.v1|%d|%s", h.Seq, h.Hash))
		nh, _ := json.Marshal(h)
		var g approvals.GenesisRecord
		if err := json.Unmarshal(hb.Get([]byte("genesis")), &g); err != nil {
			t.Fatalf("no genesis record: %v", err)
		}
		g.Key = forgedPub
		g.Sig = sign("countersign.audit.genesis.v1|" + g.Created + "|" + g.Hash + "|" + g.Key)
		ng, _ := json.Marshal(g)
		if err := hb.Put([]byte("head"), nh); err != nil {
			return err
		}
		if err := hb.Put([]byte("genesis"), ng); err != nil {
			return err
		}
		return tx.Bucket([]byte("audit_keys")).Put(seqKey(1), []byte(forgedPub))
	})
	if err := os.WriteFile(filepath.Join(e.dir, "countersign.db.sign.key"), []byte(hex.EncodeToString(forged.Seed())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// On its own, with the swapped key, the forgery holds.
	plain := plainConfig(t, e)
	if out, err := e.runCmd("audit", "verify", "--config", plain); err != nil || !strings.HasPrefix(out, "✓ Audit chain INTACT") {
		t.Fatalf("the forgery against itself: %q %v, want %q… and no error", out, err, "✓ Audit chain INTACT")
	}
	// Against the original key, pinned.
	if out, err := e.runCmd("audit", "verify", "--config", plain, "--pubkey", strings.TrimSpace(origPub)); err == nil || out != "⚠ Audit chain BROKEN at seq 1: invalid signature.\n" {
		t.Fatalf("pinned key: %q %v, want %q and an error", out, err, "⚠ Audit chain BROKEN at seq 1: invalid signature.\n")
	}
	// Against the anchors, with the swapped key configured.
	first := readAnchorFile(t, anchorPath)[0]
	want := fmt.Sprintf("⚠ Audit chain BROKEN at seq %d: the anchor at %s was not signed by the chain's key for this entry (the chain was re-signed, or the anchor forged).\n", first.Seq, first)
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg); err == nil || out != want {
		t.Fatalf("anchors:\n got %q %v\nwant %q", out, err, want)
	}
	if err := e.again().serveOnce(); err == nil || !strings.Contains(err.Error(), "the chain was re-signed") {
		t.Fatalf("serve on a re-signed chain: %v, want an error saying %q", err, "the chain was re-signed")
	}
}

// A store with a chain and no signing key: serve refuses and says how to
// proceed; --new-signing-key rotates with a signed entry linking the keys,
// export_public_key lists both with their ranges, and a verifier that
// pinned only the old key sees where the new one took over.
func TestLostSigningKeyRefusesThenRotates(t *testing.T) {
	t.Parallel()
	e, _ := anchoredEnv(t)
	_, auditor := seedAudit(t, e, 1)
	oldPub, err := e.runCmd("audit", "pubkey", "--config", e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	oldPub = strings.TrimSpace(oldPub)
	keyFile := filepath.Join(e.dir, "countersign.db.sign.key")
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	err = e.again().serveOnce()
	if err == nil || !strings.Contains(err.Error(), "audit.signing_key: no key at "+keyFile+", but the store already holds an audit chain signed by key "+oldPub) ||
		!strings.Contains(err.Error(), "--new-signing-key") {
		t.Fatalf("serve without its key: %v, want an error saying %q and %q", err, "audit.signing_key: no key at "+keyFile+", but the store already holds an audit chain signed by key "+oldPub, "--new-signing-key")
	}
	if fileExists(keyFile) {
		t.Fatal("the refused start created a key, want no key file at", keyFile)
	}
	// keys create appends too: it refuses the same way.
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"keys", "create", "--config", e.cfg, "--name", "x", "--role", "member"}, e.getenv, strings.NewReader(""), &out, &errb); err == nil || !strings.Contains(err.Error(), "no key at") {
		t.Fatalf("keys create without the key: %v, want an error saying %q", err, "no key at")
	}
	rows, _ := headSeq(t, e)

	r := e.again()
	r.serveFlags = []string{"--new-signing-key"}
	r.Start()
	newPub := hex.EncodeToString(mustKey(t, keyFile).Public().(ed25519.PublicKey))
	if newPub == oldPub {
		t.Fatal("the key was not renewed: the new public key is the old one, want another")
	}
	pk := r.MustOK(auditor, "export_public_key", nil)
	wantKeys := fmt.Sprintf("Ed25519 public key (hex):\n%s\n\nKeys the chain has used (pin every one you trust):\n  seq 1–%d: %s\n  seq %d–now: %s", newPub, rows, oldPub, rows+1, newPub)
	if pk.Text != wantKeys {
		t.Fatalf("export_public_key:\n got %q\nwant %q", pk.Text, wantKeys)
	}
	if v := r.MustOK(auditor, "verify_audit", nil); !strings.HasPrefix(v.Text, "✓ Audit chain INTACT") || !strings.Contains(v.Text, "anchors: ") {
		t.Fatalf("verify_audit after rotation: %q, want %q… naming %q", v.Text, "✓ Audit chain INTACT", "anchors: ")
	}
	r.Stop()
	export, err := e.runCmd("audit", "export", "--config", e.cfg)
	var rot approvals.Entry
	if lines := strings.Split(strings.TrimSpace(export), "\n"); err != nil || len(lines) <= int(rows) || json.Unmarshal([]byte(lines[rows]), &rot) != nil ||
		rot.Action != approvals.ActionKeyRotation || rot.Principal != "countersign [system]" || !strings.HasPrefix(rot.Detail, "old ed25519:"+oldPub+" new ed25519:"+newPub+";") {
		t.Fatalf("no rotation entry at seq %d: %+v %v, want %s by %q with the detail %q…", rows+1, rot, err, approvals.ActionKeyRotation, "countersign [system]", "old ed25519:"+oldPub+" new ed25519:"+newPub+";")
	}

	// The configured (new) key vouches for the old one through the
	// rotation entry, signed by it.
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg); err != nil || !strings.HasPrefix(out, "✓ Audit chain INTACT") ||
		!strings.Contains(out, fmt.Sprintf("  key: seq 1–%d %s\n", rows, oldPub)) {
		t.Fatalf("verify with the new key: %q %v, want %q… with %q and no error", out, err, "✓ Audit chain INTACT", fmt.Sprintf("  key: seq 1–%d %s\n", rows, oldPub))
	}
	// Pinning only the old key: the entries from the rotation on are not
	// vouched for by anyone the auditor trusts.
	want := fmt.Sprintf("⚠ Audit chain BROKEN at seq %d: %s.\n", rows+1, approvals.ReasonUntrustedKey)
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg, "--pubkey", oldPub); err == nil || out != want {
		t.Fatalf("old key pinned: %q %v, want %q", out, err, want)
	}
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg, "--pubkey", oldPub+","+newPub); err != nil || !strings.HasPrefix(out, "✓ Audit chain INTACT") {
		t.Fatalf("both keys pinned: %q %v, want %q… and no error", out, err, "✓ Audit chain INTACT")
	}
	// Starting again with the new key needs no flag; the flag again is refused.
	if err := e.again().serveOnce("--new-signing-key"); err == nil || !strings.Contains(err.Error(), "already signs the audit chain") {
		t.Fatalf("second rotation: %v, want an error saying %q", err, "already signs the audit chain")
	}
	// A key file that is not the chain's key is refused too.
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(other.Seed())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.again().serveOnce(); err == nil || !strings.Contains(err.Error(), "does not sign this store's audit chain") {
		t.Fatalf("serve with another key: %v, want an error saying %q", err, "does not sign this store's audit chain")
	}
}

func mustKey(t *testing.T, path string) ed25519.PrivateKey {
	t.Helper()
	k, err := approvals.LoadSigningKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Anchors are written at start, when the head moves, and at a clean stop;
// `audit anchor` appends one on demand (server stopped) and not twice for
// the same head; verify_audit and `audit verify` report them.
func TestAnchorsAreWrittenAndChecked(t *testing.T) {
	t.Parallel()
	e, anchorPath := anchoredEnv(t)
	_, auditor := seedAudit(t, e, 2)
	seq, _ := headSeq(t, e)
	anchors := readAnchorFile(t, anchorPath)
	newest, _ := approvals.Newest(anchors)
	if newest.Seq != seq {
		t.Fatalf("the clean stop anchored %+v, want seq %d", newest, seq)
	}
	for i, a := range anchors {
		if a.Line != i+1 || (i > 0 && a.Seq <= anchors[i-1].Seq) {
			t.Fatalf("anchor %d: %+v, want line %d and a seq above the previous anchor's (an unchanged head anchored twice?)", i+1, a, i+1)
		}
	}
	if out, err := e.runCmd("audit", "anchor", "--config", e.cfg); err != nil || out != fmt.Sprintf("Already anchored: seq %d hash %s in %s\n", seq, newest.Hash, anchorPath) {
		t.Fatalf("audit anchor: %q %v, want %q", out, err, fmt.Sprintf("Already anchored: seq %d hash %s in %s\n", seq, newest.Hash, anchorPath))
	}
	other := filepath.Join(t.TempDir(), "elsewhere.anchors")
	if out, err := e.runCmd("audit", "anchor", "--config", e.cfg, "--anchors", other); err != nil || !strings.HasPrefix(out, fmt.Sprintf("Anchored: seq %d hash ", seq)) {
		t.Fatalf("audit anchor --anchors: %q %v, want %q…", out, err, fmt.Sprintf("Anchored: seq %d hash ", seq))
	}
	out, err := e.runCmd("audit", "verify", "--config", e.cfg)
	if err != nil || !strings.Contains(out, fmt.Sprintf("  anchors: %d checked, the newest at seq %d (%s)\n", len(anchors), seq, newest.Time)) {
		t.Fatalf("audit verify: %q %v, want it to contain %q", out, err, fmt.Sprintf("  anchors: %d checked, the newest at seq %d (%s)\n", len(anchors), seq, newest.Time))
	}
	r := e.again()
	r.Start()
	v := r.MustOK(auditor, "verify_audit", nil)
	if !strings.HasPrefix(v.Text, "✓ Audit chain INTACT") || !strings.Contains(v.Text, "\n  anchors: ") {
		t.Fatalf("verify_audit: %q, want %q… naming %q", v.Text, "✓ Audit chain INTACT", "\n  anchors: ")
	}
	r.Stop()

	// A line someone wrote into the anchor file is named, not skipped.
	f, err := os.OpenFile(anchorPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{\"seq\":1}\n")
	f.Close()
	lines := len(readAnchorFileRaw(t, anchorPath))
	if _, err := e.runCmd("audit", "verify", "--config", e.cfg); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d: not an anchor", lines)) {
		t.Fatalf("verify with a foreign line: %v, want an error saying %q", err, fmt.Sprintf("line %d: not an anchor", lines))
	}
	if err := e.again().serveOnce(); err == nil || !strings.Contains(err.Error(), "not an anchor") {
		t.Fatalf("serve with a foreign line: %v, want an error saying %q", err, "not an anchor")
	}
}

func readAnchorFileRaw(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Without an anchor file every start says what is not protected.
func TestNoAnchorFileWarns(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	e.Start()
	if !strings.Contains(e.logs.String(), "audit.anchor.file is not set") {
		t.Fatalf("no warning (want %q in the log):\n%s", "audit.anchor.file is not set", e.logs.String())
	}
}

func TestAnchorConfigProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ yaml, want string }{
		{"audit:\n  anchor:\n    file: " + filepath.Join(dir, "a.anchors") + "\n", "audit.anchor.file: " + filepath.Join(dir, "a.anchors") + " is in the store's directory"},
		{"audit:\n  anchor:\n    channel: ops\n", "audit.anchor.channel: posting anchors to chat is not supported yet"},
		{"audit:\n  anchor:\n    every: 10ms\n", "audit.anchor.every: must be at least 1s"},
	} {
		_, err := config.Parse([]byte("store:\n  path: "+filepath.Join(dir, "c.db")+"\n"+tt.yaml), dir)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.yaml, err, tt.want)
		}
	}
	cfg, err := config.Parse([]byte("store:\n  path: "+filepath.Join(dir, "c.db")+"\n"), dir)
	if err != nil || cfg.Audit.Anchor.Every != config.DefaultAnchorEvery || cfg.Audit.Anchor.File != "" {
		t.Fatalf("defaults: %+v %v, want every %v, no file", cfg.Audit.Anchor, err, config.DefaultAnchorEvery)
	}
}

// The buckets auditStateBuckets names are the ones the wiring writes: a
// rename would silently blind the emptied-chain check.
func TestAuditStateBucketsExist(t *testing.T) {
	t.Parallel()
	e := boltEnv(t, "")
	key := e.CreateKey("ops", "admin")
	e.Start()
	e.MustOK(key, "remember", map[string]any{"user_id": "patient_42", "subject": "allergy", "value": "penicillin", "text": "allergic to penicillin"})
	e.MustOK(key, "confirm_action", map[string]any{"tool": "restart_service", "arguments": map[string]any{"service": "web"}})
	e.Stop()
	e.withBolt(func(tx *bbolt.Tx) error {
		for _, b := range auditStateBuckets() {
			if b == "break_glass_reviews" {
				continue // only a break-glass fills it: approvals' TestAReviewIsStoredInAnAuditedBucket
			}
			if bk := tx.Bucket([]byte(b)); bk == nil || bk.Stats().KeyN == 0 {
				t.Errorf("bucket %q is empty or missing, want at least one key in it", b)
			}
		}
		return nil
	})
}
