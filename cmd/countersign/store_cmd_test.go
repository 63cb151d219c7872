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
		t.Fatalf("compact with the server running: %v", err)
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
		t.Fatalf("output %q", out)
	}
	var b, a float64
	fmt.Sscan(m[2], &b)
	fmt.Sscan(m[3], &a)
	if a > b {
		t.Fatalf("compaction grew the store: %s", out)
	}
	// The compacted store verifies and serves what was written.
	if out, err := e.runCmd("audit", "verify", "--config", e.cfg); err != nil {
		t.Fatalf("audit verify after compaction: %v %s", err, out)
	}
	e.Start()
	r := e.MustOK(key, "get_memory", map[string]any{"user_id": "p1", "memory_id": 200})
	if !strings.Contains(r.Raw, "note_199") {
		t.Fatalf("fact #200 after compaction: %s", r)
	}
	e.MustOK(key, "remember", map[string]any{"user_id": "p1", "subject": "after", "value": "compaction"})
}
