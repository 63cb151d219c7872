// This is a user's module: it imports the Go client the way an agent
// runtime does (module github.com/countersign/countersign, package
// client), and drives it against a running deployment. The test
// TestGoClientFromAScratchModule (cmd/countersign) copies it into a scratch
// module, starts the server, and runs `go test` here with CS_URL, CS_AGENT
// (a key scoped to the user "ops"), CS_ALICE (a member: the approver) and
// CS_PUBKEY (the deployment's public key, hex).
package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/receipt"
)

func deployment(t *testing.T) *client.Client {
	t.Helper()
	pub, err := client.ParsePublicKey(os.Getenv("CS_PUBKEY"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.New(os.Getenv("CS_URL"), os.Getenv("CS_AGENT"), pub)
	if err != nil {
		t.Fatal(err)
	}
	cs.PollWait = 5 * time.Second
	return cs
}

// alice decides as a person would in chat: with her own key.
func alice(t *testing.T, tool string, args map[string]any) {
	t.Helper()
	body, _ := json.Marshal(args)
	req, _ := http.NewRequest("POST", os.Getenv("CS_URL")+"/v1/tools/"+tool, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+os.Getenv("CS_ALICE"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("alice's %s: HTTP %d", tool, resp.StatusCode)
	}
}

// decides makes cs's next wait end with alice's decision.
func decides(t *testing.T, cs *client.Client, tool string, extra map[string]any) {
	cs.OnPending = func(id string) {
		args := map[string]any{"request_id": id}
		for k, v := range extra {
			args[k] = v
		}
		go alice(t, tool, args)
	}
}

func restart(args string) client.Action {
	return client.Action{Tool: "restart_service", Arguments: json.RawMessage(args), Summary: "restart web after the config change",
		UserID: "ops", AgentID: "deployer", RunID: "run-7", RequestedEffects: []string{"web restarts"}}
}

// verify checks the receipt the way an executor on another machine would:
// offline, with the receipt package and the pinned key only.
func verify(t *testing.T, ok *client.Approval) {
	t.Helper()
	pub, _ := client.ParsePublicKey(os.Getenv("CS_PUBKEY"))
	p, err := receipt.Verify(ok.Receipt, pub, time.Now())
	if err != nil {
		t.Fatalf("receipt: %v", err)
	}
	h, _ := receipt.ArgsHash(ok.Tool, ok.Arguments)
	if p.RequestID != ok.RequestID || p.Tool != ok.Tool || p.ApprovedArgsSHA256 != h || p.ConfirmedBy != ok.ConfirmedBy {
		t.Fatalf("receipt %+v does not bind the approval %+v", p, ok)
	}
}

func TestApproved(t *testing.T) {
	cs := deployment(t)
	decides(t, cs, "approve_action", nil)
	ok, err := cs.ConfirmAction(context.Background(), restart(`{"service": "web"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok.Outcome != client.Approved || ok.Edited || string(ok.Arguments) != `{"service":"web"}` || !strings.HasPrefix(ok.ConfirmedBy, "alice [") {
		t.Fatalf("approval %+v", ok)
	}
	verify(t, ok)
	if err := cs.Redeem(context.Background(), ok.Receipt); err != nil {
		t.Fatal(err)
	}
	var again *client.APIError
	if err := cs.Redeem(context.Background(), ok.Receipt); !errors.As(err, &again) || again.Status != http.StatusConflict {
		t.Fatalf("a second redemption: %v, want a 409", err)
	}
}

func TestApprovedWithChanges(t *testing.T) {
	cs := deployment(t)
	decides(t, cs, "approve_action", map[string]any{"arguments": map[string]any{"service": "web", "drain": true}, "reason": "drain first"})
	ok, err := cs.ConfirmAction(context.Background(), restart(`{"service": "web", "drain": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok.Outcome != client.ApprovedWithChanges || !ok.Edited || string(ok.Arguments) != `{"drain":true,"service":"web"}` || !strings.Contains(ok.Changes, "drain") {
		t.Fatalf("approval %+v", ok)
	}
	verify(t, ok)
}

func TestDenied(t *testing.T) {
	cs := deployment(t)
	decides(t, cs, "deny_action", map[string]any{"reason": "not at peak hour"})
	_, err := cs.ConfirmAction(context.Background(), restart(`{"service": "api"}`))
	var d *client.Denied
	if !errors.As(err, &d) || d.Reason != "not at peak hour" || len(d.DecidedBy) != 1 || !strings.HasPrefix(d.DecidedBy[0], "alice [") {
		t.Fatalf("err = %v, want *Denied by alice", err)
	}
}

func TestExpired(t *testing.T) {
	cs := deployment(t)
	_, err := cs.ConfirmAction(context.Background(), client.Action{Tool: "flush_cache", Arguments: json.RawMessage(`{"region": "eu"}`), UserID: "ops"})
	var x *client.Expired
	if !errors.As(err, &x) || !strings.Contains(x.Reason, "automatic policy") {
		t.Fatalf("err = %v, want *Expired (flush_cache times out after 2s)", err)
	}
}

func TestNeedsClarification(t *testing.T) {
	cs := deployment(t)
	_, err := cs.ConfirmAction(context.Background(), restart(`{}`))
	var q *client.NeedsClarification
	if !errors.As(err, &q) || len(q.Missing) != 1 || q.Missing[0] != "service" {
		t.Fatalf("err = %v, want *NeedsClarification for service", err)
	}
}

func TestResumeAfterATimeout(t *testing.T) {
	cs := deployment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	a := restart(`{"service": "billing"}`)
	_, err := cs.ConfirmAction(ctx, a)
	var p *client.Pending
	if !errors.As(err, &p) || !strings.HasPrefix(p.RequestID, "req_") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want *Pending with the request id", err)
	}
	alice(t, "approve_action", map[string]any{"request_id": p.RequestID})
	ok, err := cs.Resume(context.Background(), p.RequestID, a)
	if err != nil || ok.RequestID != p.RequestID || ok.Outcome != client.Approved {
		t.Fatalf("Resume: %+v %v", ok, err)
	}
	verify(t, ok)
}

// The scoped key may ask only in its own space: without UserID it is
// refused, and New refuses a bad public key before anything is asked.
func TestScopesAndBadKeys(t *testing.T) {
	cs := deployment(t)
	_, err := cs.ConfirmAction(context.Background(), client.Action{Tool: "restart_service", Arguments: json.RawMessage(`{"service": "web"}`)})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("no user_id with a key scoped to ops: %v, want a 403", err)
	}
	if _, err := client.New(os.Getenv("CS_URL"), os.Getenv("CS_AGENT"), []byte("short")); err == nil {
		t.Fatal("New accepted a 5-byte public key")
	}
}
