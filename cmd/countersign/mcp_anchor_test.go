package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/approvals"
	"github.com/countersign/countersign/internal/logtest"
	"github.com/countersign/countersign/kv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioMCPLeaderAnchorsAtStop: `countersign mcp` on PostgreSQL leads
// the cluster when no serve runs, and so writes the cluster's anchor file.
// Played with the real binary (this test binary as countersign) over
// stdio: it anchors when it starts to lead; the agent's writes move the
// chain's head; when its stdin closes (a clean stop) the file's last
// anchor is the final head, as serve's is. It did not write one: the
// stream ended before the session's last writes.
func TestStdioMCPLeaderAnchorsAtStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts countersign mcp")
	}
	dsn := testDSN(t)
	anchors := filepath.Join(t.TempDir(), "shared", "audit.anchors")
	e := pgEnv(t, dsn, "  anchor:\n    file: "+anchors+"\n    every: 1h\n"+memoryConfig)
	agent := e.CreateKey("ward_bot", "agent")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "mcp", "--config", e.cfg)
	cmd.Env = append(os.Environ(), "COUNTERSIGN_TEST_AS_MAIN=1", "GOMAXPROCS=2", "COUNTERSIGN_DATABASE_URL="+dsn, "COUNTERSIGN_API_KEY="+agent)
	logs := &logtest.Buffer{}
	cmd.Stderr = logs
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "ward-bot", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to countersign mcp: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	waitFor(t, "countersign mcp to lead and anchor", func() bool {
		as, err := approvals.ReadAnchors(anchors)
		return err == nil && len(as) > 0 && strings.Contains(logs.String(), "this replica leads")
	})
	first, _ := approvals.ReadAnchors(anchors)
	for _, v := range []string{"penicillin", "latex", "aspirin"} {
		mcpOK(t, cs, "remember", map[string]any{"user_id": "p1", "subject": "allergy", "value": v})
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("countersign mcp did not stop cleanly: %v\n%s", err, logs.String())
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatalf("countersign mcp exited %v\n%s", cmd.ProcessState, logs.String())
	}

	db := e.openTestStore()
	defer db.Close()
	var head approvals.Checkpoint
	if err := db.View(context.Background(), func(tx kv.Tx) error { var err error; head, _, err = approvals.HeadOf(tx); return err }); err != nil {
		t.Fatal(err)
	}
	as, err := approvals.ReadAnchors(anchors)
	if err != nil {
		t.Fatal(err)
	}
	last := as[len(as)-1]
	if head.Seq <= first[len(first)-1].Seq {
		t.Fatalf("the head (seq %d) did not move past the first anchor %s", head.Seq, first[len(first)-1])
	}
	if last.Seq != head.Seq || last.Hash != head.Hash {
		t.Errorf("the anchor file ends with %s, want the final head seq %d %.16s… (a clean stop of the leader anchors it)\n%s", last, head.Seq, head.Hash, logs.String())
	}
}
