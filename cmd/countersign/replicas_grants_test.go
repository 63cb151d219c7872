package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplicasSeeGrantRevocationAtOnce: two serve processes on one
// PostgreSQL database. A grant made on replica 0 approves a call on
// replica 1; revoked on replica 0, the very next call on replica 1 waits
// for a person: confirm_action reads the grant from the database, never
// from a cache of its own.
func TestReplicasSeeGrantRevocationAtOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts two servers")
	}
	dsn := testDSN(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + `
tools:
  - name: restart_service
    category: mutating
    grants: {max: 8h, allow: [duration]}
`
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	agent := e.CreateKey("deploy-bot", "agent")
	alice := e.CreateKey("alice", "member")
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}
	reps := []*replica{startReplica(t, cfg, env), startReplica(t, cfg, env)}
	call := map[string]any{"user_id": "ward7", "tool": "restart_service", "arguments": map[string]any{"service": "payments"}}
	confirm := func(r *replica) map[string]any {
		t.Helper()
		st, m, err := r.call(agent, "confirm_action", call)
		if err != nil || st != 200 {
			t.Fatalf("confirm_action: %d %v %v, want 200 and no error", st, m, err)
		}
		return data(m)
	}
	first := confirm(reps[0])
	if st, m, err := reps[0].call(alice, "approve_action", map[string]any{"request_id": first["request_id"], "grant": map[string]any{"kind": "duration", "for": "1h"}}); err != nil || st != 200 {
		t.Fatalf("approve with a grant on replica 0: %d %v %v, want 200 and no error", st, m, err)
	}
	if d := confirm(reps[1]); d["status"] != "approved" || d["grant_id"] != float64(1) {
		t.Fatalf("replica 1 under the grant: %v, want status approved with grant_id 1", d)
	}
	if st, m, err := reps[0].call(alice, "revoke_grant", map[string]any{"grant_id": 1}); err != nil || st != 200 {
		t.Fatalf("revoke on replica 0: %d %v %v, want 200 and no error", st, m, err)
	}
	if d := confirm(reps[1]); d["status"] != "pending" {
		t.Fatalf("replica 1 right after the revocation on replica 0: %v, want status pending", d)
	}
}
