package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/bot"
	"github.com/countersign/countersign/kv"
)

// stop ends the process as an operator does (SIGTERM: drain, then exit).
func (r *replica) stop() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	<-r.done
}

// uncleanEntries returns the details of the chain's unclean_restart
// entries, oldest first.
func (e *testEnv) uncleanEntries() []string {
	e.t.Helper()
	db := e.openTestStore()
	defer db.Close()
	var got []string
	err := db.View(context.Background(), func(tx kv.Tx) error {
		es, err := approvals.List(tx, approvals.Filter{Limit: 100000})
		got = got[:0]
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].Action == bot.ActionUncleanRestart {
				got = append(got, es[i].Detail)
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// TestReplicaStartsRecordNoFalseUncleanRestart plays security item 19.12
// on one throwaway PostgreSQL: a replica, and then `countersign mcp`,
// starting while another replica serves record no unclean_restart (the old
// single running marker made each of them report the healthy replica as
// crashed). A replica killed with SIGKILL is reported once, by the next
// run to start, naming its pid; a replica stopped cleanly is never
// reported.
func TestReplicaStartsRecordNoFalseUncleanRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers")
	}
	dsn := testDSN(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	config := "listen: 127.0.0.1:0\nstore:\n  engine: postgres\n  path: " + filepath.Join(dir, "unused.db") +
		"\naudit:\n  signing_key: " + filepath.Join(dir, "sign.key") + "\n"
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, dir: dir, cfg: cfg, env: map[string]string{"COUNTERSIGN_DATABASE_URL": dsn}}
	agent := e.CreateKey("deploy-bot", "agent")
	env := []string{"COUNTERSIGN_DATABASE_URL=" + dsn}

	a := startReplica(t, cfg, env)
	b := startReplica(t, cfg, env)
	if got := e.uncleanEntries(); len(got) != 0 {
		t.Fatalf("a second replica starting beside a healthy one recorded unclean_restart: %q, want none", got)
	}
	cs, stopMCP := e.runMCP([]string{"--key", agent}, nil)
	mcpOK(t, cs, "check_before_act", map[string]any{"user_id": "ward7", "subject": "allergy"})
	if err := stopMCP(); err != nil {
		t.Fatalf("countersign mcp: %v\n%s", err, e.mcpLogs.String())
	}
	if got := e.uncleanEntries(); len(got) != 0 {
		t.Fatalf("countersign mcp starting beside two replicas recorded unclean_restart: %q, want none", got)
	}

	// b dies without stopping; the next run to start (its replacement)
	// reports it, and only it.
	bPID := b.cmd.Process.Pid
	b.kill()
	c := startReplica(t, cfg, env)
	got := e.uncleanEntries()
	if len(got) != 1 || !strings.Contains(got[0], "as pid "+strconv.Itoa(bPID)+")") || !strings.Contains(got[0], "did not stop cleanly") {
		t.Fatalf("after SIGKILL of the replica with pid %d: unclean_restart = %q, want one naming it", bPID, got)
	}
	for _, r := range []*replica{a, c} {
		if st, m, err := r.call(agent, "check_before_act", map[string]any{"user_id": "ward7", "subject": "allergy"}); err != nil || st != 200 {
			t.Fatalf("check_before_act on a replica that stayed up: %d %v %v, want 200 and no error", st, m, err)
		}
	}

	// a stops cleanly; a new replica finds nothing more to report.
	a.stop()
	startReplica(t, cfg, env)
	if got := e.uncleanEntries(); len(got) != 1 {
		t.Fatalf("after a clean stop of one replica and a start: unclean_restart = %q, want only the killed one's", got)
	}
}
