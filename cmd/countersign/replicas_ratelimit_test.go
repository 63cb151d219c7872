package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReplicasShareOneRateLimit: three serve processes on one PostgreSQL
// database, http.rate_per_minute 1 with bursts of 6. One agent's 18 calls,
// spread round robin over the three replicas, get 6 answers and 12 × 429
// with Retry-After, as from one replica (per-process buckets let through
// 18: three times the limit). Another key's bucket is its own.
func TestReplicasShareOneRateLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	dsn := testDSN(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") +
		"\nhttp:\n  rate_per_minute: 1\n  rate_burst: 6\n"
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	agent := e.CreateKey("deploy-bot", "agent")
	other := e.CreateKey("triage-bot", "agent")
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}
	reps := []*replica{startReplica(t, cfg, env), startReplica(t, cfg, env), startReplica(t, cfg, env)}
	args := map[string]any{"user_id": "ward7", "subject": "allergy"}
	answered, limited := 0, 0
	for i := range 18 {
		st, m, err := reps[i%3].call(agent, "check_before_act", args)
		switch {
		case err != nil:
			t.Fatalf("call %d on replica %d: %v", i, i%3, err)
		case st == 200:
			answered++
		case st == 429:
			limited++
		default:
			t.Fatalf("call %d on replica %d: %d %v, want 200 or 429", i, i%3, st, m)
		}
	}
	if answered != 6 || limited != 12 {
		t.Fatalf("18 calls over three replicas with a burst of 6: %d answered and %d limited, want 6 and 12", answered, limited)
	}
	// The 429 says when to come back.
	e.URL = reps[1].URL
	resp, _ := e.post("/v1/tools/check_before_act", agent, args)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a limited call: %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if st, m, err := reps[2].call(other, "check_before_act", args); err != nil || st != 200 {
		t.Fatalf("another key on the same replicas: %d %v %v, want 200 and no error", st, m, err)
	}
}
