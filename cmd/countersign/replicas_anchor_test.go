package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/kv"
)

// TestReplicasWriteOneAnchorStream: two serve processes on one PostgreSQL
// database and one anchor file (a volume both mount). Only the leader
// writes the file: its anchors follow the chain's head with rising seqs,
// and a follower's clean stop adds nothing (per-replica anchoring made it
// write the head again, out of step with the leader). Every replica checks
// the chain against the stream: an anchor beyond the chain's end (a
// rollback of the database under the running cluster) is logged by both,
// the leader stops anchoring, and a new replica refuses to start.
func TestReplicasWriteOneAnchorStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	dsn := testDSN(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	anchors := filepath.Join(t.TempDir(), "shared", "audit.anchors")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") +
		"\n  anchor:\n    file: " + anchors + "\n    every: 1s\n" + memoryConfig
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	agent := e.CreateKey("ward_bot", "agent")
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}
	leader := startReplica(t, cfg, env)
	waitFor(t, "the first replica to lead", func() bool { return strings.Contains(leader.logs.String(), "this replica leads") })
	follower := startReplica(t, cfg, env)

	head := func() approvals.Checkpoint {
		t.Helper()
		db := e.openTestStore()
		defer db.Close()
		var h approvals.Checkpoint
		if err := db.View(context.Background(), func(tx kv.Tx) error { var err error; h, _, err = approvals.HeadOf(tx); return err }); err != nil {
			t.Fatal(err)
		}
		return h
	}
	stream := func() []approvals.Anchor {
		t.Helper()
		as, err := approvals.ReadAnchors(anchors)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(as); i++ {
			if as[i].Seq <= as[i-1].Seq {
				t.Fatalf("the anchor stream goes back: %s after %s, want rising seqs", as[i], as[i-1])
			}
		}
		return as
	}
	for i, r := range []*replica{leader, follower, leader, follower} {
		if st, m, err := r.call(agent, "remember", map[string]any{"user_id": "p1", "subject": "allergy", "value": "penicillin " + string(rune('a'+i))}); err != nil || st != 200 {
			t.Fatalf("remember: %d %v %v, want 200 and no error", st, m, err)
		}
	}
	want := head()
	waitFor(t, "the leader to anchor the head", func() bool {
		as := stream()
		return len(as) > 0 && as[len(as)-1].Seq == want.Seq && as[len(as)-1].Hash == want.Hash
	})
	before := len(stream())
	follower.stop()
	if got := stream(); len(got) != before {
		t.Fatalf("the follower's clean stop wrote to the cluster's anchor file: %d anchors, then %d, want still %d: %s", before, len(got), before, got[len(got)-1])
	}

	// The database is rolled back under the running cluster: the stream
	// holds an anchor beyond the chain's end.
	follower = startReplica(t, cfg, env)
	key, err := approvals.ReadSigningKey(filepath.Join(dir, "sign.key"))
	if err != nil {
		t.Fatal(err)
	}
	h := head()
	if err := approvals.AppendAnchor(anchors, approvals.SignAnchor(key, h.Seq+50, h.Hash, time.Now())); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*replica{"leader": leader, "follower": follower} {
		waitFor(t, "the "+name+" to see the chain disagree with the stream", func() bool {
			return strings.Contains(r.logs.String(), "the chain disagrees with the cluster's anchor file")
		})
	}
	if st, m, err := leader.call(agent, "remember", map[string]any{"user_id": "p1", "subject": "allergy", "value": "latex"}); err != nil || st != 200 {
		t.Fatalf("remember: %d %v %v, want 200 and no error", st, m, err)
	}
	n := len(stream())
	leader.stop()
	if got := stream(); len(got) != n {
		t.Fatalf("the leader anchored a chain that disagrees with the stream: %d anchors, then %d, want still %d: %s", n, len(got), n, got[len(got)-1])
	}
	if err := e.serveOnce(); err == nil || !strings.Contains(err.Error(), "before the head anchored at") {
		t.Fatalf("a replica starting on a chain behind the stream: %v, want the refusal", err)
	}
}
