package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/adapters/bolt"
)

func TestStoreCompactOfflineOnARealStore(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "compact rewrites the bbolt file")
	e := newTestEnv(t, "http:\n  rate_per_minute: 100000\n  rate_burst: 1000\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	for i := range 200 {
		e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": fmt.Sprintf("note_%d", i), "value": strings.Repeat("v", 200)})
	}
	storePath := strings.TrimSuffix(e.cfg, "config.yaml") + "countersign.db"

	// While the server runs: refused, with what to do, and nothing changed.
	before, err := os.ReadFile(storePath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.runCmd("store", "compact", "--config", e.cfg)
	if err == nil || !strings.Contains(err.Error(), bolt.ErrLocked.Error()) || !strings.Contains(err.Error(), "stop the server") {
		t.Fatalf("compact with the server running: %v, want an error containing %q and %q", err, bolt.ErrLocked.Error(), "stop the server")
	}
	if st, _ := os.Stat(storePath); st.Size() != int64(len(before)) {
		t.Fatal("the store changed size under a refused compaction")
	}

	e.Stop()
	out, err := e.runCmd("store", "compact", "--config", e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^compacted (\S+): ([0-9.]+) MiB -> ([0-9.]+) MiB \((-?\d+)% smaller\), (\d+) keys in (\d+) buckets, in \S+\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != storePath {
		t.Fatalf("store compact printed %q, want one line starting %q with the sizes, keys and buckets", out, "compacted "+storePath+": ")
	}
	var b, a float64
	fmt.Sscan(m[2], &b)
	fmt.Sscan(m[3], &a)
	if a > b {
		t.Fatalf("compaction grew the store: %s, want %v MiB or less", out, b)
	}
	// The compacted store verifies and serves what was written.
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg); err != nil {
		t.Fatalf("audit verify after compaction: %v %s", err, out)
	}
	e.Start()
	r := e.MustOK(key, "get_memory", map[string]any{"user_id": "p1", "memory_id": 200})
	if !strings.Contains(r.Raw, "note_199") {
		t.Fatalf("fact #200 after compaction: %s, want it to contain %q", r, "note_199")
	}
	e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": "after", "value": "compaction"})
}

// TestStoreCompactOnPostgresWhileServing: on PostgreSQL `store compact`
// vacuums the tables while a server keeps serving, and --full rewrites
// them; the chain verifies afterwards and the server answers what was
// written before and writes after.
func TestStoreCompactOnPostgresWhileServing(t *testing.T) {
	e := pgEnv(t, testDSN(t), "http:\n  rate_per_minute: 100000\n  rate_burst: 1000\n")
	key := e.CreateKey("ops", "admin")
	e.Start()
	for i := range 100 {
		e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": fmt.Sprintf("note_%d", i), "value": strings.Repeat("v", 200)})
	}
	line := regexp.MustCompile(`^compacted postgres \(\$COUNTERSIGN_DATABASE_URL\) with (VACUUM \(ANALYZE\)|VACUUM \(FULL, ANALYZE\)): [0-9.]+ MiB -> [0-9.]+ MiB \(-?\d+% smaller\), (\d+) keys, in \S+?(; the space of deleted rows is reused by later writes\. To give it back to the disk, run again with --full in a maintenance window \(each table is locked while it is rewritten\))?\n$`)
	for _, tt := range []struct {
		args []string
		how  string
	}{
		{nil, "VACUUM (ANALYZE)"},
		{[]string{"--full"}, "VACUUM (FULL, ANALYZE)"},
	} {
		out, err := e.cli(append([]string{"store", "compact", "--config", e.cfg}, tt.args...)...)
		if err != nil {
			t.Fatalf("store compact %v beside a running server: %v\n%s", tt.args, err, out)
		}
		m := line.FindStringSubmatch(out)
		if m == nil || m[1] != tt.how || (m[3] != "") != (tt.how == "VACUUM (ANALYZE)") || m[2] == "0" {
			t.Fatalf("store compact %v: output %q, want one line with %s, a nonzero key count, and the --full hint only after VACUUM (ANALYZE)", tt.args, out, tt.how)
		}
		e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": "after_" + strings.Join(tt.args, ""), "value": "compaction"})
	}
	r := e.MustOK(key, "get_memory", map[string]any{"user_id": "p1", "memory_id": 100})
	if !strings.Contains(r.Raw, "note_99") {
		t.Fatalf("fact #100 after compaction: %s, want it to contain %q", r, "note_99")
	}
	e.Stop()
	if out, err := e.cli("audit", "verify", "--config", e.cfg); err != nil || !strings.Contains(out, "INTACT") {
		t.Fatalf("audit verify after compaction: %v %s, want no error and %q", err, out, "INTACT")
	}
}
