package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	bbolt "go.etcd.io/bbolt"
)

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func appendConfig(path, extra string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(extra); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runCmd runs countersign with args and returns stdout and the error.
func (e *testEnv) runCmd(args ...string) (string, error) {
	e.t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, e.getenv, strings.NewReader(""), &out, &errb)
	return out.String(), err
}

// seedAudit fills the chain with create_principal entries: the CLI's, n
// over HTTP, then an auditor's, whose key it returns with the row count.
func seedAudit(t *testing.T, e *testEnv, n int) (rows int, auditorKey string) {
	t.Helper()
	key := e.CreateKey("ops", "admin") // row 1
	e.Start()
	for i := 0; i < n; i++ {
		e.MustOK(key, "create_principal", map[string]any{"name": fmt.Sprintf("bot%d", i)})
	}
	auditorKey = e.MustOK(key, "create_principal", map[string]any{"name": "auditor", "role": "auditor"}).Data["key"].(string)
	e.Stop()
	e.withBolt(func(tx *bbolt.Tx) error {
		rows = tx.Bucket([]byte("audit")).Stats().KeyN
		return nil
	})
	return rows, auditorKey
}

// again returns a new handle on the same config and store, for starting the
// server once more: a testEnv's log reader is not meant to be restarted.
func (e *testEnv) again() *testEnv {
	n := &testEnv{t: e.t, dir: e.dir, cfg: e.cfg, env: e.env}
	e.t.Cleanup(n.Stop)
	return n
}

// withBolt opens the stopped server's bbolt file directly.
func (e *testEnv) withBolt(fn func(tx *bbolt.Tx) error) {
	e.t.Helper()
	skipOnPostgres(e.t, "it edits the bbolt file")
	db, err := bbolt.Open(filepath.Join(e.dir, "countersign.db"), 0o600, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		e.t.Fatal(err)
	}
}

func seqKey(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

func TestAuditTamperIsDetected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		tamper func(t *testing.T, tx *bbolt.Tx, rows int)
		at     func(rows int) int
		reason string
	}{
		{"untouched", func(*testing.T, *bbolt.Tx, int) {}, nil, ""},
		{"one byte of a row flipped", func(t *testing.T, tx *bbolt.Tx, rows int) {
			b := tx.Bucket([]byte("audit"))
			v := append([]byte(nil), b.Get(seqKey(3))...)
			i := bytes.Index(v, []byte("bot1"))
			if i < 0 {
				t.Fatalf("row 3: %s, want %q in it", v, "bot1")
			}
			v[i] ^= 0x01 // "bot1" becomes "cot1"
			if err := b.Put(seqKey(3), v); err != nil {
				t.Fatal(err)
			}
		}, func(int) int { return 3 }, approvals.ReasonTampered},
		{"newest row deleted", func(t *testing.T, tx *bbolt.Tx, rows int) {
			if err := tx.Bucket([]byte("audit")).Delete(seqKey(uint64(rows))); err != nil {
				t.Fatal(err)
			}
		}, func(rows int) int { return rows }, approvals.ReasonTruncated},
		{"two rows reordered", func(t *testing.T, tx *bbolt.Tx, rows int) {
			b := tx.Bucket([]byte("audit"))
			r2, r4 := append([]byte(nil), b.Get(seqKey(2))...), append([]byte(nil), b.Get(seqKey(4))...)
			if err := b.Put(seqKey(2), r4); err != nil {
				t.Fatal(err)
			}
			if err := b.Put(seqKey(4), r2); err != nil {
				t.Fatal(err)
			}
		}, func(int) int { return 2 }, approvals.ReasonLink},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, "")
			rows, auditor := seedAudit(t, e, 4)
			if rows < 5 {
				t.Fatalf("only %d rows, want at least 5", rows)
			}
			e.withBolt(func(tx *bbolt.Tx) error { tt.tamper(t, tx, rows); return nil })

			want := fmt.Sprintf("✓ Audit chain INTACT — %d entries verified.", rows)
			if tt.at != nil {
				want = fmt.Sprintf("⚠ Audit chain BROKEN at seq %d: %s.", tt.at(rows), tt.reason)
			}
			// Offline, with the server stopped.
			out, err := e.runCmd("audit", "verify", "--config", e.cfg)
			if first, _, _ := strings.Cut(out, "\n"); first != want {
				t.Fatalf("audit verify printed %q, want %q", out, want)
			}
			if (tt.at != nil) != (err != nil) {
				t.Fatalf("audit verify err = %v, want an error: %t", err, tt.at != nil)
			}
			// And through the tool, on the running server.
			e = e.again()
			e.Start()
			if r := e.MustOK(auditor, "verify_audit", nil); r.Text != want {
				t.Fatalf("verify_audit: %q, want %q", r.Text, want)
			}
		})
	}
}

func TestAuditExportAndPubkey(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, "")
	rows, _ := seedAudit(t, e, 3)

	pubHex, err := e.runCmd("audit", "pubkey", "--config", e.cfg)
	if err != nil || len(strings.TrimSpace(pubHex)) != 64 {
		t.Fatalf("pubkey: %q, %v, want 64 hex digits", pubHex, err)
	}
	pub, _ := hex.DecodeString(strings.TrimSpace(pubHex))
	out, err := e.runCmd("audit", "export", "--config", e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != rows+1 {
		t.Fatalf("%d lines for %d rows and the head, want %d", len(lines), rows, rows+1)
	}
	var head approvals.ExportedHead
	if err := json.Unmarshal([]byte(lines[rows]), &head); err != nil || head.Head.Seq != uint64(rows) ||
		!ed25519.Verify(ed25519.PublicKey(pub), []byte(fmt.Sprintf("countersign.audit.head.v1|%d|%s", rows, head.Head.Hash)), mustHex(t, head.Head.Sig)) {
		t.Fatalf("the last line is not the signed head (want seq %d, signed by the exported key): %s", rows, lines[rows])
	}
	lines = lines[:rows]
	prev := approvals.Genesis
	for i, line := range lines {
		var en approvals.Entry
		if err := json.Unmarshal([]byte(line), &en); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if en.Seq != uint64(i+1) || en.PrevHash != prev || en.ComputeHash() != en.Hash {
			t.Fatalf("line %d does not verify (want seq %d after %s, its hash matching): %s", i+1, i+1, prev, line)
		}
		if strings.Contains(line, "cs_sk_") {
			t.Fatalf("a key in the trail, want no %q in it: %s", "cs_sk_", line)
		}
		prev = en.Hash
	}
	if head.Head.Hash != prev {
		t.Fatalf("the head names %s, want the last entry %s", head.Head.Hash, prev)
	}
	// The exported key verifies; another key does not.
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg, "--pubkey", strings.TrimSpace(pubHex)); err != nil || !strings.HasPrefix(out, "✓ Audit chain INTACT") || !strings.Contains(out, "head: seq") {
		t.Fatalf("verify with exported key: %q %v, want %q… with %q and no error", out, err, "✓ Audit chain INTACT", "head: seq")
	}
	other := hex.EncodeToString(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey))
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg, "--pubkey", other); err == nil || out != "⚠ Audit chain BROKEN at seq 1: invalid signature.\n" {
		t.Fatalf("verify with another key: %q %v, want %q and an error", out, err, "⚠ Audit chain BROKEN at seq 1: invalid signature.\n")
	}
	if _, err := e.runCmd("audit", "verify", "--config", e.cfg, "--pubkey", "abc"); err == nil || !strings.Contains(err.Error(), "--pubkey") {
		t.Fatalf("bad pubkey: %v, want an error naming %q", err, "--pubkey")
	}
	if _, err := e.runCmd("audit", "frobnicate", "--config", e.cfg); err == nil || !strings.Contains(err.Error(), "countersign audit verify") {
		t.Fatalf("unknown subcommand: %v, want an error saying %q", err, "countersign audit verify")
	}

	// While the server runs it holds the store: a clear error, not a hang.
	e = e.again()
	e.Start()
	if _, err := e.runCmd("audit", "verify", "--config", e.cfg); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("verify while serving: %v, want an error saying %q", err, "locked by another process")
	}
	e.Stop()

	// No store, no key: clear errors, and nothing created.
	empty := newTestEnv(t, "")
	if _, err := empty.runCmd("audit", "verify", "--config", empty.cfg); err == nil || !strings.Contains(err.Error(), "store.path: no store at") {
		t.Fatalf("no store: %v, want an error saying %q", err, "store.path: no store at")
	}
	if _, err := empty.runCmd("audit", "pubkey", "--config", empty.cfg); err == nil || !strings.Contains(err.Error(), "audit.signing_key: no key at") ||
		!strings.Contains(err.Error(), "point --config at the server's config") || strings.Contains(err.Error(), "start the server once") {
		t.Fatalf("no key: %v; want it to point at the server's config, never to starting a server (which would make a new key)", err)
	}
	if _, err := os.Stat(filepath.Join(empty.dir, "countersign.db.sign.key")); err == nil {
		t.Fatal("audit pubkey created a signing key, want no countersign.db.sign.key")
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
